"""The numbers in docs/results.md's and the docs pages' prose that read the loss-vs-lr grid
(docs/lr_sensitivity/): its cells' counts, losses, evals and late slopes, as facts
(`FACTS`, checked by scripts/claims.py). The README rows are lr_sensitivity.py's. No JAX.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  MAIN,
  RESULTS_MD_NAME,
  ROOT,
  lr_text,
  read,
  run_summary,
  step_text,
)
from resnorm_jax.analysis.claims.lr_sensitivity import valueres_contrast, valueres_seed0_below
from resnorm_jax.analysis.claims.reproductions_facts import (
  eval_no_context,
  eval_range,
  evals_between,
)
from resnorm_jax.runs import status

GRID = "docs/lr_sensitivity/results.csv"
GRID_RUNS = "docs/lr_sensitivity/runs"


def _grid(variant: str, depth: int) -> list[dict[str, str]]:
  return [r for r in read(GRID) if r["variant"] == variant and int(r["num_layers"]) == depth]


def grid_count(variant: str, depth: int, lr: float, outcome: str = status.TRAINED) -> str:
  """'2 of 3': the grid's runs of one cell (variant, depth, lr; every seed) with that outcome."""
  runs = [r for r in _grid(variant, depth) if float(r["opt.lr"]) == lr]
  return f"{sum(r['outcome'] == outcome for r in runs)} of {len(runs)}"


def _seed_losses(variant: str, depth: int, lo: float, hi: float, seed: int) -> dict[float, float]:
  """{lr: final eval loss} of one seed's grid runs at lrs from `lo` to `hi`."""
  return {
    float(r["opt.lr"]): float(r["final_eval_loss"])
    for r in _grid(variant, depth)
    if int(r["seed"]) == seed and lo <= float(r["opt.lr"]) <= hi
  }


def grid_loss_range(variant: str, depth: int, lo: float, hi: float, seed: int = 0) -> str:
  """'3.249-3.263': the lowest and highest final eval loss of a seed's runs at lrs `lo`-`hi`."""
  losses = _seed_losses(variant, depth, lo, hi, seed).values()
  return f"{min(losses):.3f}-{max(losses):.3f}"


def grid_best_loss(variant: str, depth: int, seed: int = 0) -> str:
  """'1.765': a seed's lowest final eval loss over the grid's lrs at one depth."""
  return f"{min(_seed_losses(variant, depth, 0, float('inf'), seed).values()):.3f}"


def depth_shift(variants: Sequence[str], lo: float, hi: float, lower: bool) -> str:
  """'0.01-0.07': how much lower (`lower`) or higher the 48-layer curves end than the 24-layer
  ones at each lr from `lo` to `hi` both ran (seed 0), over `variants`: the range, 2 decimals."""
  gaps = []
  for v in variants:
    deep, shallow = _seed_losses(v, 48, lo, hi, 0), _seed_losses(v, 24, lo, hi, 0)
    gaps += [(shallow[lr] - deep[lr]) * (1 if lower else -1) for lr in deep if lr in shallow]
  return f"{min(gaps):.2f}-{max(gaps):.2f}"


def grid_eval_range(variant: str, depth: int, lo: float, hi: float, start: int) -> str:
  """'3.298-3.325': the lowest and highest periodic eval from step `start` on over a depth's
  seed-0 runs at lrs `lo`-`hi` (their folders under docs/lr_sensitivity/runs/), 3 decimals."""
  values = [
    v
    for r in _grid(variant, depth)
    if int(r["seed"]) == 0 and lo <= float(r["opt.lr"]) <= hi
    for v in evals_between(os.path.join(GRID_RUNS, r["name"]), start)
  ]
  return f"{min(values):.3f}-{max(values):.3f}"


def cell_range(variant: str, depths: tuple[int, ...], lr: float) -> str:
  """'3.250-3.259': the lowest and highest final eval loss of a cell's runs (every seed) at
  `depths`."""
  losses = [
    float(r["final_eval_loss"])
    for d in depths
    for r in _grid(variant, d)
    if float(r["opt.lr"]) == lr
  ]
  return f"{min(losses):.3f}-{max(losses):.3f}"


def grid_escape_steps(variant: str, depths: tuple[int, ...], lr: float) -> str:
  """'50': the escape steps of a cell's runs (every seed) at `depths`, each once, in order
  ('50 or 100'; 'none' for a run that never escaped)."""
  steps = {
    r["escape_step"] or "none"
    for d in depths
    for r in _grid(variant, d)
    if float(r["opt.lr"]) == lr
  }
  numbers = sorted(int(x) for x in steps if x != "none")
  return " or ".join([step_text(x) for x in numbers] + (["none"] if "none" in steps else []))


def evals_at(runs: tuple[str, ...], step: int) -> str:
  """'3.21-3.31': the lowest and highest periodic eval of grid runs at one step, 2 decimals."""
  values = [v for r in runs for v in evals_between(os.path.join(GRID_RUNS, r), step, step)]
  lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
  return lo if lo == hi else f"{lo}-{hi}"


def eval_below(run: str, step: int) -> str:
  """'0.065': how far a run's periodic eval at `step` is below its eval set's no-context loss,
  3 decimals."""
  (value,) = evals_between(run, step, step)
  return f"{float(run_summary(run)['periodic_eval_no_context_loss']) - value:.3f}"


def _seed0(variant: str, depth: int, lo: float, hi: float) -> list[dict[str, str]]:
  """A depth's seed-0 grid rows at lrs from `lo` to `hi`, in lr order."""
  rows = [
    r for r in _grid(variant, depth) if int(r["seed"]) == 0 and lo <= float(r["opt.lr"]) <= hi
  ]
  return sorted(rows, key=lambda r: float(r["opt.lr"]))


def lr_losses(variant: str, depth: int, lo: float, hi: float) -> str:
  """'2.290, 2.159, 2.023': seed 0's final eval losses at lrs `lo`-`hi`, in lr order."""
  return ", ".join(f"{float(r['final_eval_loss']):.3f}" for r in _seed0(variant, depth, lo, hi))


def seeds_slash(prefix: str, seeds: int = 3) -> str:
  """'1.733 / 1.682 / 1.724': the final eval losses of a grid cell's seeds 0 to `seeds` - 1
  (run folders `<prefix>-s<seed>` under docs/lr_sensitivity/runs), in seed order."""
  return " / ".join(
    f"{float(run_summary(os.path.join(GRID_RUNS, f'{prefix}-s{k}'))['final_eval_loss']):.3f}"
    for k in range(seeds)
  )


def grid_evals_at(cells: tuple[tuple[str, int, float, float], ...], step: int) -> str:
  """'3.315-3.332': the lowest and highest periodic eval at `step` over the seed-0 runs of
  `cells` ((variant, depth, lowest lr, highest lr) each), 3 decimals."""
  values = [
    v
    for cell in cells
    for r in _seed0(*cell)
    for v in evals_between(os.path.join(GRID_RUNS, r["name"]), step, step)
  ]
  return f"{min(values):.3f}-{max(values):.3f}"


def grid_lowest_range(variant: str, depth: int, lo: float, hi: float) -> str:
  """'3.298-3.301': over seed 0's runs at lrs `lo`-`hi`, the range of each run's lowest
  periodic eval, 3 decimals."""
  lows = [
    min(evals_between(os.path.join(GRID_RUNS, r["name"]), 0))
    for r in _seed0(variant, depth, lo, hi)
  ]
  return f"{min(lows):.3f}-{max(lows):.3f}"


def _curve(run: str) -> tuple[list[int], list[float]]:
  from resnorm_jax.analysis.lr_sweep_rows import eval_curve

  return eval_curve(os.path.join(ROOT, run))


def eval_lowest(run: str) -> str:
  """'3.273 at step 950': a run's lowest periodic eval, 3 decimals, and its step."""
  steps, losses = _curve(run)
  low = min(range(len(losses)), key=losses.__getitem__)
  return f"{losses[low]:.3f} at step {step_text(steps[low])}"


SENSITIVITY = "docs/lr_sensitivity/sensitivity.csv"


def _sensitivity(variant: str, depth: int) -> dict[str, str]:
  return next(
    r for r in read(SENSITIVITY) if r["variant"] == variant and int(r["num_layers"]) == depth
  )


def sensitivity_triple(variant: str, depth: int) -> str:
  """'9 / 1.759 / 0.379': a curve's lrs that train / best loss / LR sensitivity
  (sensitivity.csv)."""
  r = _sensitivity(variant, depth)
  return f"{r['lrs_trained']} / {float(r['best_loss']):.3f} / {float(r['lr_sensitivity']):.3f}"


def sensitivity_value(variant: str, depths: tuple[int, ...], column: str = "lr_sensitivity") -> str:
  """'0.375', or '0.379-0.433' over several depths: a sensitivity.csv column, 3 decimals."""
  values = [float(_sensitivity(variant, d)[column]) for d in depths]
  lo, hi = f"{min(values):.3f}", f"{max(values):.3f}"
  return lo if lo == hi else f"{lo}-{hi}"


def plateau_lrs(variant: str, depths: tuple[int, ...]) -> str:
  """'3 of 9': how many of a curve's lrs do not train (sensitivity.csv), 'a / b of 9' should
  the depths disagree."""
  rows = [_sensitivity(variant, d) for d in depths]
  off = sorted({int(r["n_lrs"]) - int(r["lrs_trained"]) for r in rows})
  return f"{' / '.join(map(str, off))} of {rows[0]['n_lrs']}"


def variant_gap(variant: str, other: str, depth: int, lrs: tuple[float, ...]) -> str:
  """'0.01-0.02': how much `other`'s seed-0 final eval loss exceeds `variant`'s at each of
  `lrs` (negative: it is below), the least and the most, 2 decimals."""
  a = _seed_losses(variant, depth, min(lrs), max(lrs), 0)
  b = _seed_losses(other, depth, min(lrs), max(lrs), 0)
  gaps = [b[lr] - a[lr] for lr in lrs]
  lo, hi = f"{min(gaps):.2f}", f"{max(gaps):.2f}"
  return lo if lo == hi else f"{lo}-{hi}"


GRID_LRS = (1.25e-4, 3.2e-2)  # the grid's 9 lrs (the left-edge brackets below it excluded)


def _selection(name: str) -> list[dict[str, str]]:
  """The grid runs a late-slope census counts: 'trained' (Post-LN, Pre-LN, DeepNorm trained
  runs at lrs up to 8e-3), 'plateau' (their runs on the plateau), 'prenorm_right' (Pre-LN at
  1.6e-2 and 3.2e-2); the 9 grid lrs only."""
  rows = [
    r
    for r in read(GRID)
    if r["variant"] in MAIN and GRID_LRS[0] <= float(r["opt.lr"]) <= GRID_LRS[1]
  ]
  if name == status.TRAINED:
    return [r for r in rows if r["outcome"] == status.TRAINED and float(r["opt.lr"]) <= 8e-3]
  if name == "plateau":
    return [r for r in rows if r["outcome"] == status.STUCK]
  return [r for r in rows if r["variant"] == "prenorm" and float(r["opt.lr"]) >= 1.6e-2]


def trend_count(selection: str, trend: str | None = None) -> str:
  """'49': the runs of a census selection with that late trend (all of them when None)."""
  return str(sum(trend is None or r["late_trend"] == trend for r in _selection(selection)))


def all_falling(selection: str) -> str:
  """'all 88': the runs of a selection falling late, 'all n' when every one is."""
  rows = _selection(selection)
  k = sum(r["late_trend"] == "falling" for r in rows)
  return f"all {k}" if k == len(rows) else f"{k} of the {len(rows)}"


def max_slope(selection: str) -> str:
  """'-0.130': the largest (least falling) late slope of a selection, 3 decimals."""
  return f"{max(float(r['late_slope']) for r in _selection(selection)):.3f}"


def slope_value(name: str) -> str:
  """'-0.071': one grid run's late slope, 3 decimals."""
  return f"{float(_row(GRID, name)['late_slope']):.3f}"


# (run under docs/lr_sensitivity/runs, step): the periodic evals the page states
EVAL_AT = (
  ("prenorm-L24-lr0.016-s0", 550),
  ("prenorm-L24-lr0.016-s0", 800),
  ("postnorm-L24-lr6.25e-05-s0", 1000),
  ("postnorm-L24-lr3.125e-05-s0", 1000),
  ("postnorm-L48-lr6.25e-05-s0", 1000),
  ("postnorm-L48-lr3.125e-05-s0", 1000),
  ("postnorm-L24-lr0.000125-s1", 450),
  ("postnorm-L24-lr0.000125-s1", 950),
  ("postnorm-L48-lr0.000125-s0", 300),
  *(("prenorm-L6-lr0.004-s0", s) for s in (500, 750, 1000)),
  *(("prenorm-L12-lr0.004-s0", s) for s in (500, 750, 1000)),
  ("postnorm-L12-lr0.0005-s1", 200),
  ("postnorm-L12-lr0.0005-s1", 800),
  ("postnorm-L6-lr0.004-s0", 100),
  ("postnorm-L6-lr0.004-s0", 350),
  ("postnorm-L6-lr0.004-s0", 750),
  ("deepnorm-L6-lr0.008-s0", 50),
)
ABOVE_EDGE = ("deepnorm-L6-lr0.008-s0", "deepnorm-L12-lr0.008-s0", "postnorm-L6-lr0.004-s0")

INTERVENTIONS = "docs/interventions/results.csv"


def _row(path: str, name: str) -> dict[str, str]:
  return next(r for r in read(path) if r["name"] == name)


def late_slope(path: str, name: str) -> str:
  """'0.561 +- 0.127': a run's late slope (nats per 1,000 steps) and its standard error, from
  a results CSV's `late_slope` and `late_slope_se`."""
  row = _row(path, name)
  return f"{float(row['late_slope']):.3f} +- {float(row['late_slope_se']):.3f}"


def late_trend(path: str, name: str) -> str:
  """'rising': a run's late trend (`late_trend`) in a results CSV."""
  return _row(path, name)["late_trend"]


def late_trends(names: tuple[str, ...]) -> str:
  """'falling': the late trends of several grid runs, each once ('falling / flat' when they
  differ)."""
  return " / ".join(sorted({late_trend(GRID, n) for n in names}))


_PLAIN = ("prenorm-L24-lr0.016-s0", "prenorm-L24-lr0.032-s0")
_INTERVENED = tuple(
  f"prenorm-{k}-L24-lr{lr}-s0" for lr in ("0.016", "0.032") for k in ("qknorm", "zloss")
)
_LEFT = tuple(f"postnorm-L{d}-lr{lr}-s0" for d in (24, 48) for lr in ("6.25e-05", "3.125e-05"))
_TRENDS = (
  *((GRID, n) for n in (*_PLAIN, "prenorm-L24-lr0.032-s1", "prenorm-L24-lr0.032-s2", *_LEFT)),
  (GRID, "hybridnorm-L6-lr0.008-s0"),
  *((INTERVENTIONS, n) for n in _INTERVENED),
)

# Numbers in docs/results.md's prose computed here (resnorm_jax.analysis.claims.readme).
FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"lr_sensitivity.eval:{run}:{step}": (
      RESULTS_MD_NAME,
      functools.partial(eval_range, os.path.join(GRID_RUNS, run), step, step, 3),
    )
    for run, step in EVAL_AT
  },
  **{
    f"lr_sensitivity.sensitivity:{v}:L{d}": (
      RESULTS_MD_NAME,
      functools.partial(sensitivity_triple, v, d),
    )
    for v, depths in (
      ("prenorm", (6, 12, 24, 48)),
      ("deepnorm", (6, 12, 24, 48)),
      ("postnorm", (6, 12)),
    )
    for d in depths
  },
  **{
    f"lr_sensitivity.sensitivity_value:{v}:L{'-'.join(map(str, ds))}": (
      RESULTS_MD_NAME,
      functools.partial(sensitivity_value, v, ds),
    )
    for v in ("prenorm", "deepnorm")
    for ds in ((48,), (6, 12, 24))
  },
  **{
    f"lr_sensitivity.lr_losses:{v}:L{d}:{lr_text(lo)}-{lr_text(hi)}": (
      RESULTS_MD_NAME,
      functools.partial(lr_losses, v, d, lo, hi),
    )
    for v, d, lo, hi in (
      ("prenorm", 48, 1.25e-4, 3.2e-2),
      ("deepnorm", 48, 1.25e-4, 4e-3),
      ("deepnorm", 48, 8e-3, 3.2e-2),
      ("postnorm", 48, 1.25e-4, 3.2e-2),
    )
  },
  **{
    f"lr_sensitivity.seeds:{prefix}": (RESULTS_MD_NAME, functools.partial(seeds_slash, prefix))
    for prefix in (
      "deepnorm-L24-lr0.002",
      "deepnorm-L24-lr0.008",
      "prenorm-L24-lr0.004",
      "prenorm-L24-lr0.032",
    )
  },
  **{
    f"lr_sensitivity.sensitivity_value:{v}:L6": (
      RESULTS_MD_NAME,
      functools.partial(sensitivity_value, v, (6,)),
    )
    for v in (
      "sandwich",
      "subln",
      "hyperconn",
      "dyt",
      "postnorm",
      "deepnorm",
      "prenorm",
      "denseformer",
      "valueres",
      "mhc",
      "derf",
      "hybridnorm",
    )
  },  # fmt: skip
  "lr_sensitivity.best_loss_mean:deepnorm:L6": (
    RESULTS_MD_NAME,
    functools.partial(sensitivity_value, "deepnorm", (6,), "best_loss"),
  ),
  "lr_sensitivity.mhc_divided.diverged_steps": (RESULTS_MD_NAME, lambda: mhc_divided_steps()),
  "lr_sensitivity.gap:mhc-below-prenorm:L24": (
    RESULTS_MD_NAME,
    functools.partial(variant_gap, "mhc", "prenorm", 24, (2e-3, 4e-3, 8e-3)),
  ),
  "lr_sensitivity.gap:derf-above-prenorm:L24": (
    RESULTS_MD_NAME,
    functools.partial(variant_gap, "prenorm", "derf", 24, (2e-3, 4e-3)),
  ),
  **{
    f"lr_sensitivity.trend_count:{sel}:{t or 'all'}": (
      RESULTS_MD_NAME,
      functools.partial(trend_count, sel, t),
    )
    for sel, trends in (
      ("plateau", (None, "flat", "falling", "rising")),
      ("prenorm_right", (None, "rising", "flat", "falling")),
    )
    for t in trends
  },
  "lr_sensitivity.all_falling:trained": (
    RESULTS_MD_NAME,
    functools.partial(all_falling, status.TRAINED),
  ),
  "lr_sensitivity.max_slope:trained": (
    RESULTS_MD_NAME,
    functools.partial(max_slope, status.TRAINED),
  ),
  "lr_sensitivity.max_slope:plateau": (RESULTS_MD_NAME, functools.partial(max_slope, "plateau")),
  **{
    f"lr_sensitivity.slope:{n}": (RESULTS_MD_NAME, functools.partial(slope_value, n))
    for n in (
      "postnorm-L24-lr0.000125-s1",
      "postnorm-L48-lr0.000125-s0",
      "postnorm-L12-lr0.0005-s1",
    )
  },
  "lr_sensitivity.plateau_lrs:deepnorm": (
    RESULTS_MD_NAME,
    functools.partial(plateau_lrs, "deepnorm", (6, 12, 24, 48)),
  ),
  "lr_sensitivity.loss_range:postnorm:L24": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "postnorm", 24, 1.25e-4, 3.2e-2),
  ),
  "lr_sensitivity.loss_range:deepnorm:L24:from8e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "deepnorm", 24, 8e-3, 3.2e-2),
  ),
  "lr_sensitivity.evals_at_50:L48:plateau": (
    RESULTS_MD_NAME,
    functools.partial(
      grid_evals_at, (("postnorm", 48, 2e-3, 3.2e-2), ("deepnorm", 48, 8e-3, 3.2e-2)), 50
    ),
  ),
  "lr_sensitivity.evals_at_50:L48:postnorm_to_1e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_evals_at, (("postnorm", 48, 1.25e-4, 1e-3),), 50),
  ),
  "lr_sensitivity.lowest_range:postnorm:L24:5e-4-1.6e-2": (
    RESULTS_MD_NAME,
    functools.partial(grid_lowest_range, "postnorm", 24, 5e-4, 1.6e-2),
  ),
  **{
    f"lr_sensitivity.lowest:{run}": (
      RESULTS_MD_NAME,
      functools.partial(eval_lowest, os.path.join(GRID_RUNS, run)),
    )
    for run in ("postnorm-L24-lr0.000125-s0", "postnorm-L24-lr0.00025-s0")
  },
  "lr_sensitivity.eval_range:deepnorm-L24-lr0.004-s2:50-1000": (
    RESULTS_MD_NAME,
    functools.partial(eval_range, os.path.join(GRID_RUNS, "deepnorm-L24-lr0.004-s2"), 50, 1000, 3),
  ),
  "lr_sensitivity.eval_range:postnorm-L48-lr0.000125-s0:500-": (
    RESULTS_MD_NAME,
    functools.partial(
      eval_range, os.path.join(GRID_RUNS, "postnorm-L48-lr0.000125-s0"), 500, None, 3
    ),
  ),
  **{
    f"xiong_rescue.eval:stdlib-L24-constant-lr0.00025-w0-s0:{step}": (
      RESULTS_MD_NAME,
      functools.partial(
        eval_range, "docs/xiong_rescue/runs/stdlib-L24-constant-lr0.00025-w0-s0", step, step, 3
      ),
    )
    for step in (750, 1000)
  },
  "lr_sensitivity.eval_at_1000:above_edge": (
    RESULTS_MD_NAME,
    functools.partial(evals_at, ABOVE_EDGE, 1000),
  ),
  "lr_sensitivity.eval_below:postnorm-L12-lr0.0005-s1:800": (
    RESULTS_MD_NAME,
    functools.partial(eval_below, os.path.join(GRID_RUNS, "postnorm-L12-lr0.0005-s1"), 800),
  ),
  "lr_sensitivity.cell_range:deepnorm:L6-12:8e-3": (
    RESULTS_MD_NAME,
    functools.partial(cell_range, "deepnorm", (6, 12), 8e-3),
  ),
  "lr_sensitivity.escape_steps:deepnorm:L6-12:4e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_escape_steps, "deepnorm", (6, 12), 4e-3),
  ),
  **{
    f"lr_sensitivity.late_slope:{n}": (RESULTS_MD_NAME, functools.partial(late_slope, p, n))
    for p, n in _TRENDS
    if n.endswith("-s0") and not n.startswith("hybridnorm")
  },
  **{
    f"lr_sensitivity.late_trend:{n}": (RESULTS_MD_NAME, functools.partial(late_trend, p, n))
    for p, n in _TRENDS
    if n not in _LEFT
  },
  "lr_sensitivity.late_trend:left_edge": (RESULTS_MD_NAME, functools.partial(late_trends, _LEFT)),
  "lr_sensitivity.late_trend:hybridnorm-L24": (
    RESULTS_MD_NAME,
    functools.partial(
      late_trends, tuple(f"hybridnorm-L24-lr{lr}-s0" for lr in ("0.002", "0.004", "0.008"))
    ),
  ),
  **{
    f"lr_sensitivity.count:{o}:{v}:L{d}:{lr_text(lr)}": (
      RESULTS_MD_NAME,
      functools.partial(grid_count, v, d, lr, o),
    )
    for o, v, d, lr in (
      (status.TRAINED, "postnorm", 6, 2e-3),
      (status.TRAINED, "postnorm", 6, 4e-3),
      (status.TRAINED, "postnorm", 12, 5e-4),
      (status.TRAINED, "postnorm", 12, 1e-3),
      (status.TRAINED, "postnorm", 24, 1.25e-4),
      (status.STUCK, "postnorm", 24, 1.25e-4),
      (status.TRAINED, "deepnorm", 6, 4e-3),
      (status.TRAINED, "deepnorm", 12, 4e-3),
      (status.TRAINED, "deepnorm", 24, 4e-3),
      (status.TRAINED, "deepnorm", 24, 2e-3),
      (status.TRAINED, "deepnorm", 6, 8e-3),
      (status.TRAINED, "deepnorm", 12, 8e-3),
      (status.TRAINED, "deepnorm", 24, 8e-3),
      (status.TRAINED, "prenorm", 6, 4e-3),
      (status.TRAINED, "prenorm", 12, 4e-3),
      (status.TRAINED, "prenorm", 24, 4e-3),
      (status.TRAINED, "prenorm", 6, 3.2e-2),
      (status.TRAINED, "prenorm", 12, 3.2e-2),
      (status.TRAINED, "prenorm", 24, 3.2e-2),
    )
  },
  **{
    f"lr_sensitivity.best_loss:{v}:L{d}": (RESULTS_MD_NAME, functools.partial(grid_best_loss, v, d))
    for v in ("prenorm",)
    for d in (6, 12, 24)
  },
  "lr_sensitivity.loss_range:postnorm:L48": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "postnorm", 48, 1.25e-4, 3.2e-2),
  ),
  "lr_sensitivity.loss_range:deepnorm:L48:from8e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "deepnorm", 48, 8e-3, 3.2e-2),
  ),
  "lr_sensitivity.eval_range:postnorm:L48:from500": (
    RESULTS_MD_NAME,
    functools.partial(grid_eval_range, "postnorm", 48, 1.25e-4, 3.2e-2, 500),
  ),
  "lr_sensitivity.depth48.lower_to_2e-3": (
    RESULTS_MD_NAME,
    functools.partial(depth_shift, ("prenorm", "deepnorm"), 0, 2e-3, True),
  ),
  "lr_sensitivity.depth48.higher_at_4e-3": (
    RESULTS_MD_NAME,
    functools.partial(depth_shift, ("prenorm", "deepnorm"), 4e-3, 4e-3, False),
  ),
  **{
    f"lr_sensitivity.eval_range:{run}:{a}-{b}": (
      RESULTS_MD_NAME,
      functools.partial(eval_range, os.path.join(GRID_RUNS, run), a, b, 3),
    )
    for run, a, b in (
      ("deepnorm-L6-lr0.008-s0", 50, 150),
      ("deepnorm-L24-lr0.008-s2", 50, 50),
      ("postnorm-L6-lr0.004-s0", 100, 550),
    )
  },
  "lr_sensitivity.eval_no_context": (
    RESULTS_MD_NAME,
    lambda: eval_no_context(os.path.join(GRID_RUNS, "postnorm-L48-lr0.00025-s0")),
  ),
  "valueres.L24.seed0.below_prenorm": (RESULTS_MD_NAME, valueres_seed0_below),
  "valueres.L24.lr4e-3.minus_prenorm": (
    RESULTS_MD_NAME,
    lambda: valueres_contrast() or "not run on 2 or more seeds each",
  ),
}


# docs/lr_sensitivity/mhc_divided_sinkhorn/: the two mHC grid points as first run, with the
# exp-then-divide Sinkhorn; its README's prose reads their summary.json.
MHC_DIVIDED_README = os.path.join(
  ROOT, "docs", "lr_sensitivity", "mhc_divided_sinkhorn", "README.md"
)
MHC_DIVIDED_RUNS = (
  "docs/lr_sensitivity/mhc_divided_sinkhorn/mhc-L6-lr0.016-s0",
  "docs/lr_sensitivity/mhc_divided_sinkhorn/mhc-L6-lr0.032-s0",
)


def mhc_divided_steps() -> str:
  """'413 and 66': the divided-Sinkhorn runs' `diverged_step`, in MHC_DIVIDED_RUNS' order."""
  return " and ".join(step_text(run_summary(r).get("diverged_step")) for r in MHC_DIVIDED_RUNS)


def mhc_divided_train_losses() -> str:
  """'2.408 and 2.796': the divided-Sinkhorn runs' `final_train_loss` (the last logged)."""
  return " and ".join(f"{float(run_summary(r)['final_train_loss']):.3f}" for r in MHC_DIVIDED_RUNS)


# Numbers in docs/lr_sensitivity/mhc_divided_sinkhorn/README.md's prose.
DOC_FACTS: dict[str, doc_sections.Fact] = {
  "lr_sensitivity.mhc_divided.diverged_steps": (MHC_DIVIDED_README, mhc_divided_steps),
  "lr_sensitivity.mhc_divided.final_train_losses": (MHC_DIVIDED_README, mhc_divided_train_losses),
}
