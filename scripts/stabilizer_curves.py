"""Pre-LN's loss-vs-lr curve with each stabilizer (docs/stabilizers/), beside Pre-LN's own.

python scripts/stabilizer_curves.py [--runs=docs/stabilizers/runs] \
    [--baseline=docs/lr_sensitivity/runs] [--out_dir=docs/stabilizers]

Reads the finished `prenorm-<stabilizer>-L<depth>-lr<lr>-s<seed>` run folders of --runs (the
grid configs/sweeps/stabilizers.py's CURVES: the loss-vs-lr protocol, 1,000 steps, constant
lr, no warmup) and plain Pre-LN's runs of the loss-vs-lr grid at the same depths, seeds and
budget (--baseline), and writes into --out_dir:
  curves.csv   a row per (stabilizer, depth, lr, seed): final eval loss and outcome, Pre-LN's
               at the same depth, lr and seed, and the difference (stabilizer minus Pre-LN);
               plain Pre-LN's own points at those depths as the rows of stabilizer `none`
  curves.png   final eval loss against lr, a panel per depth, a line per stabilizer and
               Pre-LN's in black
and prints, per depth, a markdown table of the final eval losses (lrs across; under plain
Pre-LN's seed-0 row, its seeds' range where more than one ran) with each
curve's best lr (`<=` or `>=` where it is the lowest or highest lr run), and, where a
stabilizer has more than one seed at a point, its seeds' range
beside plain Pre-LN's seeds there. A point still running, or not run, is a blank cell. No JAX
here.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys

from resnorm_jax.analysis import lr_sweep_rows  # (no JAX)
from resnorm_jax.analysis.claims.stabilizers import PARAMETRIZED, label  # the README's names
from resnorm_jax.analysis.style import variant_color
from resnorm_jax.config.nofollow import open_nofollow

NAME = re.compile(
  r"^prenorm-(?P<stab>[a-z0-9_-]+?)-L(?P<depth>\d+)-lr(?P<lr>[0-9.e-]+)-s(?P<seed>\d+)$"
)
COLUMNS = (
  "stabilizer", "num_layers", "opt.lr", "seed", "final_eval_loss", "outcome",
  "prenorm_final_eval_loss", "difference",
)  # fmt: skip


def stabilizer_rows(runs: str) -> list[dict]:
  """The finished curve points of `runs`: the stabilizer from the folder's name (Muon's runs
  under a depth parametrization are `muon-sp`, `muon-completep`)."""
  out = []
  for r in lr_sweep_rows.finished_rows(runs):
    m = NAME.match(r["name"])
    if m and int(r["train.steps"] or 0) == 1000:
      out.append({**r, "stabilizer": m["stab"]})
  return out


def baseline_rows(runs: str, depths: set[int]) -> list[dict]:
  """Pre-LN's finished runs in the loss-vs-lr grid's folder at `depths`, on the same protocol
  (1,000 steps, constant lr, no warmup)."""
  return [
    r
    for r in lr_sweep_rows.finished_rows(runs)
    if r["variant"] == "prenorm" and r["num_layers"] in depths
    and int(r["train.steps"] or 0) == 1000 and r["opt.schedule"] == "constant"
  ]  # fmt: skip


def key(r: dict) -> tuple[int, float, int]:
  return r["num_layers"], float(r["opt.lr"]), int(r["seed"])


def table(rows: list[dict], baseline: list[dict]) -> list[dict]:
  """curves.csv's rows: each stabilizer's points and plain Pre-LN's own (`none`)."""
  base = {key(b): b["final_eval_loss"] for b in baseline}
  out = []
  for r in [*rows, *({**b, "stabilizer": "none"} for b in baseline)]:
    (depth, lr, seed), loss = key(r), r["final_eval_loss"]
    b = base.get((depth, lr, seed))
    finite = b is not None and loss is not None and math.isfinite(b) and math.isfinite(loss)
    out.append({
      "stabilizer": r["stabilizer"], "num_layers": depth, "opt.lr": f"{lr:g}", "seed": seed,
      "final_eval_loss": f"{loss:.4f}" if loss is not None else "", "outcome": r["outcome"],
      "prenorm_final_eval_loss": f"{b:.4f}" if b is not None else "",
      "difference": f"{loss - b:+.4f}" if finite else "",
    })  # fmt: skip
  return sorted(out, key=lambda r: (r["num_layers"], r["stabilizer"], float(r["opt.lr"])))


def markdown(rows: list[dict], depth: int) -> str:
  """Final eval loss, stabilizers down and lrs across, at one depth (seed 0), Pre-LN first."""
  base = plain(rows)
  here = [
    r for r in rows if r["num_layers"] == depth and r["seed"] == 0 and r["stabilizer"] != "none"
  ]
  lrs = sorted({float(r["opt.lr"]) for r in here} | {k[1] for k in base if k[0] == depth})
  cells = {(r["stabilizer"], float(r["opt.lr"])): float(r["final_eval_loss"]) for r in here}
  cells |= {("Pre-LN", lr): loss for (d, lr, s), loss in base.items() if d == depth and s == 0}
  names = ["Pre-LN", *dict.fromkeys(r["stabilizer"] for r in here)]
  head = "| stabilizer | " + " | ".join(f"{lr:g}" for lr in lrs) + " | best lr |"
  lines = [head, "| --- " * (len(lrs) + 2) + "|"]
  for n in names:
    row = {lr: cells.get((n, lr)) for lr in lrs}
    done = {lr: v for lr, v in row.items() if v is not None and math.isfinite(v)}
    best = min(done, key=done.get) if len(done) > 1 else None
    text = [
      f"**{v:.4f}**" if lr == best else (f"{v:.4f}" if v is not None else "")
      for lr, v in row.items()
    ]
    lines.append(f"| {n} | " + " | ".join(text) + f" | {best_lr(done)} |")
    if n == "Pre-LN":
      spread = seed_spread(base, depth, lrs)
      if spread:
        lines.append(spread)
  return "\n".join(lines)


def seed_spread(base: dict, depth: int, lrs: list[float]) -> str:
  """The row under Pre-LN's: its seeds' range at each lr where more than one seed ran (the
  yardstick for a stabilizer's one-seed point); empty where no lr has two."""
  cells = []
  for lr in lrs:
    v = [loss for (d, x, _), loss in base.items() if d == depth and x == lr]
    cells.append(f"{min(v):.4f}-{max(v):.4f} ({len(v)})" if len(v) > 1 else "")
  if not any(cells):
    return ""
  return "| Pre-LN, its seeds' range (n) | " + " | ".join(cells) + " | |"


def best_lr(done: dict[float, float]) -> str:
  """The lowest-loss lr of the finite points run, said only as far as they bracket it: the
  lr where both a lower and a higher lr were run and lost more; `<= lr` or `>= lr` where
  the best is the lowest or highest lr run (the optimum may lie beyond); blank for fewer
  than two points."""
  if len(done) < 2:
    return ""
  best = min(done, key=done.get)
  if best == min(done):
    return f"<= {best:g}"
  if best == max(done):
    return f">= {best:g}"
  return f"{best:g}"


def seeds_markdown(rows: list[dict]) -> str:
  """Where a stabilizer has more than one seed at a (depth, lr): its seeds' final eval losses
  beside plain Pre-LN's seeds at the same point, and whether the two ranges are apart."""
  groups: dict[tuple[str, int, float], list[float]] = {}
  for r in rows:
    if r["final_eval_loss"]:
      groups.setdefault((r["stabilizer"], r["num_layers"], float(r["opt.lr"])), []).append(
        float(r["final_eval_loss"])
      )
  lines = [
    "| stabilizer | layers | lr | seeds | final eval loss | Pre-LN's seeds | Pre-LN | apart |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for (name, depth, lr), losses in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2])):
    if name == "none" or len(losses) < 2:
      continue
    base = groups.get(("none", depth, lr), [])
    span = lambda v: f"{min(v):.4f}-{max(v):.4f}" if v else ""  # noqa: E731
    apart = bool(base) and (max(losses) < min(base) or min(losses) > max(base))
    lines.append(
      f"| {label(name)} | {depth} | {lr:g} | {len(losses)} | {span(losses)} | {len(base)} | "
      f"{span(base)} | {'yes' if apart else 'no' if base else ''} |"
    )
  return "\n".join(lines) if len(lines) > 2 else ""


def plain(rows: list[dict]) -> dict[tuple[int, float, int], float]:
  """(depth, lr, seed) -> plain Pre-LN's final eval loss, from curves.csv's `none` rows."""
  return {key(r): float(r["final_eval_loss"]) for r in rows if r["stabilizer"] == "none"}


def plot(rows: list[dict], out: str) -> str:
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


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--runs", default=os.path.join("docs", "stabilizers", "runs"))
  p.add_argument("--baseline", default=os.path.join("docs", "lr_sensitivity", "runs"))
  p.add_argument("--out_dir", default=os.path.join("docs", "stabilizers"))
  args = p.parse_args()
  for path in (args.runs, args.baseline):
    if not os.path.isdir(path):
      sys.exit(f"no run folder at {path}")
  rows = stabilizer_rows(args.runs)
  if not rows:
    sys.exit(f"no finished prenorm-<stabilizer>-L<depth>-lr<lr>-s<seed> run under {args.runs}")
  out = table(rows, baseline_rows(args.baseline, {r["num_layers"] for r in rows}))
  path = os.path.join(args.out_dir, "curves.csv")
  with open_nofollow(path, "w", newline="") as f:
    w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(out)
  print(path, plot(out, os.path.join(args.out_dir, "curves.png")))
  for depth in sorted({r["num_layers"] for r in out}):
    print(f"\n{depth} layers, seed 0:\n{markdown(out, depth)}")
  seeds = seeds_markdown(out)
  if seeds:
    print(f"\nWhere a curve has more than one seed:\n{seeds}")


if __name__ == "__main__":
  main()
