"""The README's rows of the width axis (docs/width/; the analysis is
resnorm_jax/analysis/width.py): the edges across width in sp, muP against sp."""

from __future__ import annotations

from resnorm_jax.analysis.claims.docs_data import Claim, exists, lr_text, read, tokens_note
from resnorm_jax.analysis.claims.edges import edge, edge_lr, lr_cells_of
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.runs import status


def row_width() -> Claim | None:
  """Each variant's best lr and largest lr that trains on some seed ('(k/n)' where not every
  seed did) at every width run, and how many runs above the narrowest width diverged."""
  path = "docs/width/edges.csv"
  if not exists(path):
    return None
  edges = read(path)
  widths = sorted({int(r["d_model"]) for r in edges})
  if len(widths) < 2:
    return None
  by = {(r["variant"], int(r["d_model"])): r for r in edges}
  results = read("docs/width/results.csv")
  cells = lr_cells_of(results, axis="d_model")
  parts, short = [], []
  for variant in ("postnorm", "deepnorm", "prenorm"):
    texts = []
    reach = [edge_lr(edge(cells, variant, d)) for d in (widths[0], widths[-1])]
    short.append(f"{variant_label(variant)} {' to '.join(reach)}")
    for d in widths:
      r = by.get((variant, d))
      # the best lr by muP's row's rule: seed 0's lowest loss, '<=' at its smallest lr run
      best, _ = _best_and_reach(_seed0(results, variant, d), variant, d, set())
      if r is None or best in ("-", "none"):
        texts.append("not run" if r is None else "none trained")
      else:
        texts.append(f"{best}/{edge(cells, variant, d, unit='')}")
    parts.append(f"{variant_label(variant)} " + ", ".join(texts))
  runs = [r for r in results if int(r["d_model"]) > widths[0]]
  diverged = sum(r["outcome"] == status.DIVERGED for r in runs)
  at = ", ".join(str(d) for d in widths)
  seeds = {d: sorted({int(r["seed"]) for r in results if int(r["d_model"]) == d}) for d in widths}
  more = [d for d in widths if len(seeds[d]) > 1]
  top = max((seeds[d][-1] for d in more), default=0)
  seed_text = (
    f"seed 0 (d_model {', '.join(map(str, more))}: 0-{top} next to edges)" if more else "seed 0"
  )
  return Claim(
    "Width moves the edges down in sp",
    f"best (seed 0)/largest lr trained (k/n) at d_model {at}: "
    + "; ".join(parts)
    + f"; {diverged}/{len(runs)} runs above {widths[0]} diverged",
    f"12 layers, 1,000 steps, no warmup, constant lr; head dim 16; {seed_text}; <=: best at "
    "the smallest lr run; stdlib; " + tokens_note("docs/width/runs/deepnorm-L12-d256-lr0.0005-s0"),
    "[figure](docs/width/curves.png), `docs/width/edges.csv`, `docs/width/results.csv`",
    f"largest lr trained from d_model {widths[0]} to {widths[-1]}: " + ", ".join(short),
    f"12 layers, 1,000 steps; {seed_text}",
  )


def _seed0(rows: list[dict[str, str]], variant: str, d_model: int) -> list[dict[str, str]]:
  """The seed-0 runs of one variant at one width."""
  return [
    r
    for r in rows
    if r["variant"] == variant and int(r["d_model"]) == d_model and int(r["seed"]) == 0
  ]


def _best_and_reach(
  runs: list[dict[str, str]], variant: str, d_model: int, lrs: set[float]
) -> tuple[str, str]:
  """(best lr among all of one width's runs, '<=' before it where it is the smallest lr run;
  largest lr trained (edge()) among those at `lrs`): '-' where none ran, 'none' where none
  trained."""
  if not runs:
    return "-", "-"
  best = min(runs, key=lambda r: float(r["final_eval_loss"]))
  if best["outcome"] != status.TRAINED:
    best_text = "none"
  else:
    lr = float(best["opt.lr"])
    below = any(float(r["opt.lr"]) < lr for r in runs)
    best_text = lr_text(lr) if below else f"<={lr_text(lr)}"
  shared = [r for r in runs if float(r["opt.lr"]) in lrs]
  reach = edge(lr_cells_of(shared, axis="d_model"), variant, d_model) if shared else "-"
  return best_text, reach


def row_width_mup() -> Claim | None:
  """muP against sp at each width muP ran: each variant's seed-0 best lr on its own lrs, and
  the largest lr that trained on the lrs both ran there (the two sweeps' results.csv; the
  losses are in docs/width/README.md)."""
  path = "docs/width/mup/results.csv"
  if not exists(path):
    return None
  mup, sp = read(path), read("docs/width/results.csv")
  widths = sorted({int(r["d_model"]) for r in mup})
  if len(widths) < 2:
    return None
  cells = {}
  for variant in ("postnorm", "prenorm"):
    for d in widths:
      m, s = _seed0(mup, variant, d), _seed0(sp, variant, d)
      both = {float(r["opt.lr"]) for r in m} & {float(r["opt.lr"]) for r in s}
      cells[variant, "muP", d] = _best_and_reach(m, variant, d, both)
      cells[variant, "sp", d] = _best_and_reach(s, variant, d, both)

  def both_ways(variant: str, i: int) -> str:
    m, s = ("/".join(cells[variant, p, d][i] for d in widths) for p in ("muP", "sp"))
    return f"muP {m}, sp {s}"

  # what each variant's width question turns on: Pre-LN's best lr, Post-LN's edge (as well)
  return Claim(
    "muP against sp across width",
    f"at d_model {'/'.join(map(str, widths))}: Pre-LN's best lr {both_ways('prenorm', 0)}; "
    f"Post-LN's best lr {both_ways('postnorm', 0)}, its largest lr trained "
    f"{both_ways('postnorm', 1)}",
    "12 layers, seed 0 (sp's seeds split at Post-LN's edge); best lr on each one's lrs "
    "(<=: its smallest run), largest trained on the lrs both ran; 1,000 steps, no warmup, "
    "constant lr; base width "
    "64, head dim 16; stdlib; " + tokens_note("docs/width/runs/postnorm-L12-d256-mup-lr0.00025-s0"),
    "[figure](docs/width/mup/curves.png), `docs/width/mup/results.csv`",
    f"at d_model {'/'.join(map(str, widths))}: Pre-LN's best lr {both_ways('prenorm', 0)}; "
    f"Post-LN's largest trained {both_ways('postnorm', 1)}",
    "12 layers, 1,000 steps; seed 0",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  170: row_width,
  180: row_width_mup,
}
