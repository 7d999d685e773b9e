"""The README's rows of depth transfer (docs/depth_transfer/; the analysis is
resnorm_jax/analysis/depth_transfer.py): the slope of the best lr, CompleteP's best loss,
CompleteP and the edges."""

from __future__ import annotations

import collections
import functools
import os
import re
import statistics

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  ROOT,
  Claim,
  exists,
  lr_text,
  optional,
  read,
  tokens_note,
)
from resnorm_jax.analysis.claims.edges import edge, edge_lr, kept_cells, lr_cells_of
from resnorm_jax.analysis.claims.width import wall_seconds
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.runs import status


def row_depth_transfer() -> Claim | None:
  """Each parametrization's slope of log2(best lr) on log2(L) as the range over three fits of
  the same best lrs (weighted 5-point vertex, its OLS, the 3-point vertex), and the
  CompleteP-minus-sp difference with its OLS standard error, and at 24 layers over seeds."""
  path = "docs/depth_transfer/slopes.csv"
  if not exists(path):
    return None
  names = {"depth_mup": "depth-muP", "sp": "sp", "completep": "CompleteP"}
  fits = ("5pt", "5pt-ols", "3pt")
  slopes = collections.defaultdict(dict)
  for r in read(path):
    if r["variant"] == "prenorm" and r["fit"] in fits:
      slopes[r["depth_param"]][r["fit"]] = r
  parts = []
  for p, name in names.items():
    if p in slopes:
      vals = sorted(float(r["slope"]) for r in slopes[p].values())
      parts.append(f"{name} {vals[0]:+.3f} to {vals[-1]:+.3f}")
  depths = next(iter(slopes.values()))["5pt"]["depths"].split()
  text = f"d log2(best lr) / d log2(L), {depths[0]}-{depths[-1]} layers, over 3 fits: " + ", ".join(
    parts
  )
  contrast = [
    r for r in optional("docs/depth_transfer/contrast.csv") if "ols slope" in r["quantity"]
  ]
  if contrast:
    c = contrast[0]
    d, se = float(c["difference"]), float(c["difference_se"])
    verdict = "undecided" if abs(d) < 2 * se else ("CompleteP higher" if d > 0 else "sp higher")
    text += f"; CompleteP - sp {d:+.3f} +- {se:.3f} (OLS, seed 0): {verdict}"
  seeded = [
    r for r in optional("docs/depth_transfer/contrast.csv") if "log2 best lr" in r["quantity"]
  ]
  interval = "95% seed bootstrap"
  if seeded:
    c = seeded[0]
    interval = c["interval"]
    text += (
      f"; at {c['depths']} layers, seeds {c['seeds'].replace(' ', ', ')}: log2 best lr "
      f"{float(c['difference']):+.2f} ({float(c['ci_lo']):+.2f} to "
      f"{float(c['ci_hi']):+.2f})"
    )
  return Claim(
    "Depth transfer of Pre-LN's best lr",
    text,
    f"0 = transfer; 1,000 steps, 7 lrs ({len(depths)} depths; 3 lrs, a 3-point vertex, at 48 "
    f"under depth-muP and CompleteP); seed 0; at 24 layers {interval}; stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "[figure](docs/depth_transfer/prenorm.png), `docs/depth_transfer/slopes.csv`, "
    "`docs/depth_transfer/contrast.csv`",
    "slope of log2(best lr) on log2(depth), 0 = transfer: " + ", ".join(parts),
    f"1,000 steps, 7 lrs, {depths[0]}-{depths[-1]} layers; seed 0",
  )


def row_completep_loss() -> Claim | None:
  """CompleteP's and sp's best Pre-LN loss at each depth, and at 24 layers the seed-mean
  contrast on the lrs both ran with every seed (docs/depth_transfer/contrast.csv)."""
  best = [r for r in optional("docs/depth_transfer/best_lr.csv") if r["variant"] == "prenorm"]
  if not best:
    return None
  by = {(r["depth_param"], int(r["num_layers"])): float(r["grid_best_loss"]) for r in best}
  depths = sorted({d for p, d in by if p == "completep"})
  losses = "; ".join(
    f"{name} " + " / ".join(f"{by[(p, d)]:.3f}" for d in depths)
    for p, name in (("completep", "CompleteP"), ("sp", "sp"))
  )
  text = f"best loss at {' / '.join(map(str, depths))} layers: {losses}"
  seeded = [
    r
    for r in optional("docs/depth_transfer/contrast.csv")
    if r["quantity"].startswith("best loss at")
  ]
  budget = "1,000 steps, lrs 2.5e-4 to 1.6e-2; seed 0 (seed means where seeds ran)"
  if seeded:
    c = seeded[0]
    text += (
      f"; at {c['depths']} layers, seeds {c['seeds'].replace(' ', ', ')} on the lrs both ran: "
      f"CompleteP minus sp {float(c['difference']):+.3f} ({c['interval']}: "
      f"{float(c['ci_lo']):+.3f} to {float(c['ci_hi']):+.3f})"
    )
  else:
    text += "; the 24-layer seeds at every lr around the best are not all run yet"

  def falls(p: str) -> str:
    seq = [by[(p, d)] for d in depths]
    return "falls" if all(b < a for a, b in zip(seq, seq[1:], strict=False)) else "does not fall"

  ends = ", ".join(
    f"{name} {by[(p, depths[0])]:.3f} to {by[(p, depths[-1])]:.3f}"
    for p, name in (("completep", "CompleteP"), ("sp", "sp"))
  )
  return Claim(
    f"CompleteP's best loss {falls('completep')} with depth, sp's {falls('sp')}",
    text,
    budget + "; stdlib; " + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "`docs/depth_transfer/best_lr.csv`, `docs/depth_transfer/contrast.csv`",
    f"best loss from {depths[0]} to {depths[-1]} layers: {ends}",
    budget.split(" (")[0],
  )


def row_param_edges() -> Claim | None:
  """Post-LN's and DeepNorm's edge (largest lr that trains on some seed) under sp and under
  CompleteP, at the depths CompleteP was run, and the best loss there."""
  path = "docs/depth_transfer/results.csv"
  if not exists(path):
    return None
  rows = read(path)
  best = {
    (r["variant"], r["depth_param"], int(r["num_layers"])): r
    for r in read("docs/depth_transfer/best_lr.csv")
  }
  parts, short, all_depths = [], [], set()
  for variant in ("postnorm", "deepnorm"):
    cp = [r for r in rows if r["variant"] == variant and r["depth_param"] == "completep"]
    # above the base depth (at 6 layers CompleteP's runs are sp's)
    depths = sorted({int(r["num_layers"]) for r in cp} - {6})
    if not depths:
      continue
    all_depths |= set(depths)
    text, lrs = [], {}
    for param, name in (("sp", "sp"), ("completep", "CompleteP")):
      cells = lr_cells_of([r for r in rows if r["depth_param"] == param])
      # sp's survival cells (12 seeds) stand for the grid's in the edge: kept escapes
      kept = kept_cells(cells) if param == "sp" else cells
      edges = " / ".join(edge(kept, variant, d) for d in depths)
      lrs[name] = " / ".join(edge_lr(edge(kept, variant, d)) for d in depths)
      losses = []
      for d in depths:
        b = best.get((variant, param, d))
        # the rule's own verdict at the best lr, not the margin worked out again here
        trained = b and status.TRAINED in cells.get((variant, d, float(b["grid_best_lr"])), [])
        losses.append(f"{float(b['grid_best_loss']):.3f}" if trained else "-")
      text.append(f"{name} {edges} (best loss {' / '.join(losses)})")
    parts.append(f"{variant_label(variant)}: " + ", ".join(text))
    short.append(
      f"{variant_label(variant)} {lrs['sp']} under both"
      if len(set(lrs.values())) == 1
      else f"{variant_label(variant)} " + ", ".join(f"{n} {t}" for n, t in lrs.items())
    )
  if not parts:
    return None
  at = " / ".join(str(d) for d in sorted(all_depths))
  seeds = "seed 0, 0-2 at some cells"
  return Claim(
    "CompleteP moves Post-LN's edge",
    f"largest lr whose escape lasts on some seed at {at} layers: " + "; ".join(parts),
    f"1,000 steps, no warmup, constant lr 2.5e-4 to 1.6e-2; {seeds}; stdlib; "
    + tokens_note("docs/depth_transfer/runs/postnorm-completep-L24-lr0.002-s0"),
    "[figure](docs/depth_transfer/postnorm.png), `docs/depth_transfer/results.csv`",
    f"largest lr that trains at {at} layers: " + "; ".join(short),
    f"1,000 steps; {seeds}",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  140: row_depth_transfer,
  150: row_completep_loss,
  160: row_param_edges,
}


# Numbers in docs/depth_transfer/README.md's prose and hand-typed tables, from the CSVs
# scripts/depth_transfer.py writes (best_lr.csv, slopes.csv, results.csv, runs/results_seeds.csv)
# and sp's rows of the loss-vs-lr grid (docs/lr_sensitivity/).
README = os.path.join(ROOT, "docs", "depth_transfer", "README.md")
BEST_LR = "docs/depth_transfer/best_lr.csv"
SLOPES = "docs/depth_transfer/slopes.csv"
RESULTS = "docs/depth_transfer/results.csv"
SP_RESULTS = "docs/lr_sensitivity/results.csv"  # sp's runs are the loss-vs-lr grid's
SEED_SPREADS = (
  "docs/depth_transfer/runs/results_seeds.csv",
  "docs/lr_sensitivity/runs/results_seeds.csv",
)
PARAM_LABELS = {"sp": "sp", "depth_mup": "depth-muP", "completep": "CompleteP"}


def sig_lr(lr: float, digits: int = 3) -> str:
  """'4.13e-3', '3.10e-3' (3 significant digits), '5.0e-3' (2): a fitted best lr."""
  mantissa, exponent = f"{lr:.{digits - 1}e}".split("e")
  return f"{mantissa}e{int(exponent)}"


def _best(variant: str, param: str, depth: int) -> dict[str, str]:
  return next(
    r
    for r in read(BEST_LR)
    if (r["variant"], r["depth_param"], int(r["num_layers"])) == (variant, param, depth)
  )


def grid_lr(variant: str, param: str, depth: int) -> str:
  """'4e-3': a cell's lowest-loss grid lr (best_lr.csv)."""
  return lr_text(float(_best(variant, param, depth)["grid_best_lr"]))


def grid_loss(variant: str, param: str, depth: int) -> str:
  """'1.682': a cell's loss at its best grid lr, the seeds' mean where several ran."""
  return f"{float(_best(variant, param, depth)['grid_best_loss']):.3f}"


def vertex_lr(column: str, variant: str, param: str, depth: int, digits: int = 3) -> str:
  """'4.13e-3': a cell's fitted best lr (best_lr.csv's best_lr_3pt or best_lr_5pt)."""
  return sig_lr(float(_best(variant, param, depth)[column]), digits)


def grid_lrs(variant: str, param: str) -> str:
  """'4e-3 at every depth' when one grid lr is the best at every depth of best_lr.csv, else
  '4e-3, 4e-3 and 8e-3 at 6, 12 and 24 layers'."""
  rows = sorted(
    (r for r in read(BEST_LR) if (r["variant"], r["depth_param"]) == (variant, param)),
    key=lambda r: int(r["num_layers"]),
  )
  lrs = [lr_text(float(r["grid_best_lr"])) for r in rows]
  if len(set(lrs)) == 1:
    return f"{lrs[0]} at every depth"
  depths = [r["num_layers"] for r in rows]
  return f"{', '.join(lrs[:-1])} and {lrs[-1]} at {', '.join(depths[:-1])} and {depths[-1]} layers"


def vertex_span(variant: str, param: str) -> str:
  """'3.0e-3 to 3.7e-3': the lowest and highest 5-point best lr over depths, 2 digits."""
  lrs = [
    float(r["best_lr_5pt"])
    for r in read(BEST_LR)
    if (r["variant"], r["depth_param"]) == (variant, param) and r["best_lr_5pt"]
  ]
  return f"{sig_lr(min(lrs), 2)} to {sig_lr(max(lrs), 2)}"


def _slope(variant: str, param: str, fit: str) -> dict[str, str]:
  return next(
    r for r in read(SLOPES) if (r["variant"], r["depth_param"], r["fit"]) == (variant, param, fit)
  )


def slope(variant: str, param: str, fit: str) -> str:
  """'+0.390 +- 0.037': a slope of log2(best lr) on log2(L) and its +- (slopes.csv)."""
  r = _slope(variant, param, fit)
  return f"{float(r['slope']):+.3f} +- {float(r['slope_se']):.3f}"


def slope_value(variant: str, param: str, fit: str, digits: int) -> str:
  """'-0.2': the slope alone, `digits` decimals."""
  return f"{float(_slope(variant, param, fit)['slope']):.{digits}f}"


def slope_se(variant: str, param: str, fit: str) -> str:
  """'0.224': the slope's +- alone."""
  return f"{float(_slope(variant, param, fit)['slope_se']):.3f}"


def outcome_count(outcome: str, variant: str, param: str, depth: int, lr: float) -> str:
  """'2 of 3': a cell's runs with that outcome (sp's from the loss-vs-lr grid's results.csv,
  the others' from this study's)."""
  rows = read(SP_RESULTS) if param == "sp" else read(RESULTS)
  runs = [
    r
    for r in rows
    if r["variant"] == variant
    and r.get("depth_param", "sp") == param
    and int(r["num_layers"]) == depth
    and float(r["opt.lr"]) == lr
  ]
  return f"{sum(r['outcome'] == outcome for r in runs)} of {len(runs)}"


def largest_seed_spread() -> str:
  """'0.033 in standard deviation (sp at 6 layers and 8e-3)': the largest seed spread of a
  Pre-LN cell of this study's grid (lrs to 1.6e-2), over both results_seeds.csv files."""
  cells = [
    r
    for path in SEED_SPREADS
    for r in read(path)
    if r["variant"] == "prenorm" and float(r["opt.lr"]) <= 1.6e-2 and r["final_eval_std"]
  ]
  top = max(cells, key=lambda r: float(r["final_eval_std"]))
  label = PARAM_LABELS[top.get("model.depth_param") or "sp"]
  return (
    f"{float(top['final_eval_std']):.3f} in standard deviation ({label} at "
    f"{top['num_layers']} layers and {lr_text(float(top['opt.lr']))})"
  )


RUNS = "docs/depth_transfer/runs"


def _wall_seconds() -> dict[str, float]:
  return wall_seconds(RUNS)


def wall_median(depth: int) -> str:
  """'13': the median wall time, in minutes, of this study's runs at a depth (runs/)."""
  walls = [v for n, v in _wall_seconds().items() if re.search(rf"-L{depth}-", n)]
  return f"{round(statistics.median(walls) / 60)}"


# The Pre-LN table's rows (parametrization, depth), and the other cells the prose cites.
PRENORM_CELLS = [(p, d) for p in ("sp", "depth_mup", "completep") for d in (12, 24, 48)] + [
  ("sp", 6)
]
_P = functools.partial
DOC_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"depth_transfer.{kind}:prenorm:{p}:{d}": (README, _P(fn, "prenorm", p, d))
    for p, d in PRENORM_CELLS
    for kind, fn in (
      ("grid_lr", grid_lr),
      ("grid_loss", grid_loss),
      ("lr3pt", _P(vertex_lr, "best_lr_3pt")),
      ("lr5pt", _P(vertex_lr, "best_lr_5pt")),
    )
  },
  **{
    f"depth_transfer.grid_loss:{v}:{p}:{d}": (README, _P(grid_loss, v, p, d))
    for v, p, d in (
      ("prenorm", "completep", 6),
      ("postnorm", "completep", 6),
      ("postnorm", "completep", 12),
      ("postnorm", "completep", 24),
      ("deepnorm", "sp", 12),
      ("deepnorm", "completep", 12),
    )
  },
  **{
    f"depth_transfer.lr5pt=2:prenorm:depth_mup:{d}": (
      README,
      _P(vertex_lr, "best_lr_5pt", "prenorm", "depth_mup", d, 2),
    )
    for d in (12, 24, 48)
  },
  **{
    f"depth_transfer.lr3pt:postnorm:completep:{d}": (
      README,
      _P(vertex_lr, "best_lr_3pt", "postnorm", "completep", d),
    )
    for d in (6, 12, 24)
  },
  "depth_transfer.grid_lrs:prenorm:completep": (README, _P(grid_lrs, "prenorm", "completep")),
  "depth_transfer.grid_lrs:postnorm:completep": (README, _P(grid_lrs, "postnorm", "completep")),
  "depth_transfer.lr5pt_span:prenorm:completep": (README, _P(vertex_span, "prenorm", "completep")),
  **{
    f"depth_transfer.slope:{v}:{p}:{fit}": (README, _P(slope, v, p, fit))
    for v, p, fit in [("prenorm", p, f) for p in PARAM_LABELS for f in ("3pt", "5pt")]
    + [("postnorm", "completep", "3pt")]
  },
  "depth_transfer.slope_se:prenorm:sp:3pt": (README, _P(slope_se, "prenorm", "sp", "3pt")),
  "depth_transfer.slope=1:prenorm:sp:3pt": (README, _P(slope_value, "prenorm", "sp", "3pt", 1)),
  "depth_transfer.slope=2:prenorm:sp:5pt": (README, _P(slope_value, "prenorm", "sp", "5pt", 2)),
  **{
    f"depth_transfer.trained:postnorm:{p}:{d}:{lr_text(lr)}": (
      README,
      _P(outcome_count, status.TRAINED, "postnorm", p, d, lr),
    )
    for p, d, lr in (
      ("sp", 12, 5e-4),
      ("sp", 12, 1e-3),
      ("sp", 24, 1.25e-4),
      ("completep", 12, 2e-3),
    )
  },
  "depth_transfer.largest_seed_spread": (README, largest_seed_spread),
  **{f"depth_transfer.wall_median:{d}": (README, _P(wall_median, d)) for d in (12, 24, 48)},
}
