"""docs/stabilizers/curves.png: final eval loss against lr, a panel per depth, a line per
stabilizer (seed 0; hollow markers: its other seeds) and plain Pre-LN's in black, from
curves.csv's rows (resnorm_jax/analysis/stabilizer_curves.py's table). One colour per
stabilizer in every panel (style.py's); Muon under a depth parametrization takes Muon's,
CompleteP dashed. No JAX here; matplotlib only when drawn.
"""

from __future__ import annotations

from resnorm_jax.analysis.claims.stabilizers import PARAMETRIZED, label  # the README's names
from resnorm_jax.analysis.stabilizer_curves import plain
from resnorm_jax.analysis.style import variant_color


def plot(rows: list[dict], out: str) -> str:
  """Draws curves.png of `rows` into `out`; returns `out`."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  base = plain(rows)
  depths = sorted({r["num_layers"] for r in rows})
  # One colour per stabilizer in every panel; Muon under a depth parametrization takes Muon's,
  # CompleteP dashed.
  names = list(dict.fromkeys(r["stabilizer"] for r in rows if r["stabilizer"] != "none"))
  family = {n: "muon" if n in PARAMETRIZED else n for n in names}
  colour = {f: variant_color(f) for f in family.values()}  # style.py's, as in every figure
  fig, axes = plt.subplots(1, len(depths), figsize=(6.5 * len(depths), 4.6), squeeze=False)
  for ax, depth in zip(axes[0], depths, strict=True):
    pts = sorted((lr, loss) for (d, lr, s), loss in base.items() if d == depth and s == 0)
    if pts:
      ax.plot(*zip(*pts, strict=True), "k-o", lw=2.2, ms=4, label="Pre-LN", zorder=3)
    more = [(lr, loss) for (d, lr, s), loss in base.items() if d == depth and s != 0]
    if more:
      ax.scatter(*zip(*more, strict=True), s=22, facecolors="none", edgecolors="k", zorder=3)
    for name in names:
      here = sorted(
        (float(r["opt.lr"]), float(r["final_eval_loss"]))
        for r in rows
        if r["stabilizer"] == name and r["num_layers"] == depth and r["seed"] == 0
      )
      if here:
        style = "--o" if name.endswith("-completep") else "-o"
        (line,) = ax.plot(
          *zip(*here, strict=True), style, lw=1.2, ms=3.5, color=colour[family[name]],
          label=label(name),
        )  # fmt: skip
        more = [
          (float(r["opt.lr"]), float(r["final_eval_loss"]))
          for r in rows
          if r["stabilizer"] == name and r["num_layers"] == depth and r["seed"] != 0
        ]
        if more:  # seeds other than 0: hollow markers in the curve's colour
          ax.scatter(*zip(*more, strict=True), s=22, facecolors="none", edgecolors=line.get_color())
    ax.set_xscale("log", base=2)
    ticks = sorted({lr for (d, lr, _s) in base if d == depth} | {float(r["opt.lr"]) for r in rows})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks], rotation=45, fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("lr (constant, no warmup)")
    ax.set_ylabel("final eval loss (nats/byte), 1,000 steps")
    ax.set_title(
      f"Pre-LN, {depth} layers: each stabilizer alone (lines: seed 0; hollow: other seeds)"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out
