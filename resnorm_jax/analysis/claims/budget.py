"""The README's row of the budget test (docs/lr_sensitivity/budget.csv; the analysis is
resnorm_jax/analysis/budget.py): stuck, not slow."""

from __future__ import annotations

import collections
import functools
import os

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  RESULTS_MD_NAME,
  ROOT,
  Claim,
  read,
  run_summary,
  step_text,
  tokens_note,
)
from resnorm_jax.analysis.claims.reproductions_facts import (
  eval_no_context,
  eval_range,
  evals_between,
)
from resnorm_jax.runs import status


def row_budget() -> Claim:
  rows = [r for r in read("docs/lr_sensitivity/budget.csv") if r["variant"] == "postnorm"]
  held = [r for r in rows if r["outcome"] == status.STUCK and r["late_trend"]]
  count = collections.Counter(r["late_trend"] for r in held)
  steps = max(int(r["steps"]) for r in held)
  return Claim(
    "Stuck, not slow: the plateau does not drain",
    f"of {len(held)} Post-LN runs still on the plateau at step {steps:,}, the late slope is "
    f"flat on {count['flat']}, rising on {count['rising']}, falling on {count['falling']} "
    "(2 standard errors robust to autocorrelated evals); none diverged",
    "3,000 steps, 12-24 layers, no warmup or DeepNet's; 1-3 seeds; stdlib; "
    + tokens_note("docs/lr_sensitivity/budget/runs/postnorm-L24-const-lr0.00025-w0-s0"),
    "[curves](docs/lr_sensitivity/budget_curves.png), `docs/lr_sensitivity/budget.csv`",
    f"of {len(held)} Post-LN runs on the plateau at step {steps:,}: {count['falling']} "
    f"falling, {count['flat']} flat, {count['rising']} rising; none diverged",
    f"{steps:,} steps, 12-24 layers; 1-3 seeds",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  30: row_budget,
}


BUDGET = "docs/lr_sensitivity/budget.csv"
BUDGET_RUNS = "docs/lr_sensitivity/budget/runs"


def below_range(names: tuple[str, ...]) -> str:
  """'0.03-0.04': how far below the no-context loss (`baseline`) the budget runs `names` end
  (budget.csv's final eval loss), the least and the most, 2 decimals."""
  rows = {r["name"]: r for r in read(BUDGET)}
  below = [float(rows[n]["baseline"]) - float(rows[n]["final_eval_loss"]) for n in names]
  lo, hi = f"{min(below):.2f}", f"{max(below):.2f}"
  return lo if lo == hi else f"{lo}-{hi}"


def eval_min(run: str) -> str:
  """'3.297': a run's lowest periodic eval, 3 decimals."""
  return f"{min(evals_between(run, 0)):.3f}"


def evals_range(runs: tuple[str, ...], start: int, end: int | None = None) -> str:
  """'3.295-3.321': the lowest and highest periodic eval of budget runs from step `start` to
  `end` (the last when None), 3 decimals."""
  values = [v for r in runs for v in evals_between(f"{BUDGET_RUNS}/{r}", start, end)]
  return f"{min(values):.3f}-{max(values):.3f}"


def _curve(run: str) -> tuple[list[int], list[float]]:
  from resnorm_jax.analysis.lr_sweep_rows import eval_curve

  return eval_curve(os.path.join(ROOT, run))


def lowest(run: str) -> str:
  """'3.281 at step 800': a budget run's lowest periodic eval, 3 decimals, and its step."""
  steps, losses = _curve(f"{BUDGET_RUNS}/{run}")
  low = min(range(len(losses)), key=losses.__getitem__)
  return f"{losses[low]:.3f} at step {step_text(steps[low])}"


def slope(name: str) -> str:
  """'0.002': a budget run's late slope (budget.csv), 3 decimals."""
  return f"{float(next(r for r in read(BUDGET) if r['name'] == name)['late_slope']):.3f}"


def plateau_slopes(variant: str = "postnorm") -> str:
  """'-0.005 to 0.027': the least and the most late slope of a variant's budget runs still on
  the plateau, 3 decimals."""
  slopes = [
    float(r["late_slope"])
    for r in read(BUDGET)
    if r["variant"] == variant and r["outcome"] == status.STUCK
  ]
  return f"{min(slopes):.3f} to {max(slopes):.3f}"


def diverged_step(name: str) -> str:
  """'940': a budget run's `diverged_step` ('none' when empty)."""
  value = next(r for r in read(BUDGET) if r["name"] == name)["diverged_step"]
  return step_text(int(float(value)) if value else None)


def short_of(names: tuple[str, ...], loss: float) -> str:
  """'0.16-0.17': how far above `loss` the budget runs `names` end, 2 decimals."""
  rows = {r["name"]: r for r in read(BUDGET)}
  gaps = [float(rows[n]["final_eval_loss"]) - loss for n in names]
  lo, hi = f"{min(gaps):.2f}", f"{max(gaps):.2f}"
  return lo if lo == hi else f"{lo}-{hi}"


def _metrics(run: str) -> list[dict]:
  from resnorm_jax.runs.metrics_file import read_metrics

  return read_metrics(os.path.join(ROOT, run, "metrics.jsonl"))


def train_loss_at(run: str, step: int) -> str:
  """'6.583': a budget run's logged train loss at `step`, 3 decimals."""
  row = next(r for r in _metrics(f"{BUDGET_RUNS}/{run}") if r.get("step") == step)
  return f"{float(row['train/loss']):.3f}"


def wall_minutes(run: str) -> str:
  """'96': a budget run's wall time in whole minutes (summary.json)."""
  return f"{run_summary(f'{BUDGET_RUNS}/{run}')['wall_seconds'] / 60:.0f}"


# (run, step): the periodic evals the page states
EVAL_AT = (
  *(("postnorm-L24-const-lr0.000125-w0-s0", s) for s in (1000, 2000, 3000)),
  *(("postnorm-L24-const-lr0.000125-w0-s1", s) for s in (1000, 2000, 3000)),
  *(("prenorm-L24-const-lr0.00025-w0-s0", s) for s in (1000, 2000, 3000)),
  *(("postnorm-L18-invsqrt-lr0.001-w200-s1", s) for s in (3000,)),
  *(("postnorm-L18-invsqrt-lr0.001-w200-s2", s) for s in (3000,)),
  ("postnorm-L24-invsqrt-lr0.001-w200-s0", 1100),
  ("postnorm-L12-const-lr0.0005-w0-s1", 2500),
)
LOWEST = (
  "postnorm-L24-const-lr0.00025-w0-s0",
  "postnorm-L24-const-lr0.000125-w0-s0",
  "postnorm-L24-const-lr0.000125-w0-s1",
  "postnorm-L18-invsqrt-lr0.001-w200-s1",
  "postnorm-L18-invsqrt-lr0.001-w200-s2",
  "postnorm-L12-const-lr0.0005-w0-s1",
)
SPIKE = "postnorm-L24-const-lr0.00025-w0-s1"
_L24_125 = ("postnorm-L24-const-lr0.000125-w0-s0", "postnorm-L24-const-lr0.000125-w0-s1")

_L18 = ("postnorm-L18-invsqrt-lr0.001-w200-s1", "postnorm-L18-invsqrt-lr0.001-w200-s2")
_L1000 = os.path.join(BUDGET_RUNS, "deepnorm-L1000-const-lr0.001-w0-s0")

# Numbers in docs/results.md's prose computed here (resnorm_jax.analysis.claims.readme).
FACTS: dict[str, doc_sections.Fact] = {
  "budget.below:postnorm-L24-const-lr0.000125-w0-s0..1": (
    RESULTS_MD_NAME,
    functools.partial(
      below_range,
      ("postnorm-L24-const-lr0.000125-w0-s0", "postnorm-L24-const-lr0.000125-w0-s1"),
    ),
  ),
  **{
    f"budget.eval_min:{n}": (RESULTS_MD_NAME, functools.partial(eval_min, f"{BUDGET_RUNS}/{n}"))
    for n in _L18
  },
  "budget.eval_no_context:postnorm-L18": (
    RESULTS_MD_NAME,
    functools.partial(eval_no_context, f"{BUDGET_RUNS}/{_L18[0]}"),
  ),
  **{
    f"budget.eval:{run}:{step}": (
      RESULTS_MD_NAME,
      functools.partial(eval_range, f"{BUDGET_RUNS}/{run}", step, step, 3),
    )
    for run, step in EVAL_AT
  },
  **{f"budget.lowest:{run}": (RESULTS_MD_NAME, functools.partial(lowest, run)) for run in LOWEST},
  **{
    f"budget.eval_min:{n}": (RESULTS_MD_NAME, functools.partial(eval_min, f"{BUDGET_RUNS}/{n}"))
    for n in ("postnorm-L24-const-lr0.00025-w0-s1", "postnorm-L24-const-lr0.00025-w0-s2")
  },
  "budget.evals:postnorm-L24-const-lr0.00025-w0-s0:1050-3000": (
    RESULTS_MD_NAME,
    functools.partial(evals_range, ("postnorm-L24-const-lr0.00025-w0-s0",), 1050, 3000),
  ),
  "budget.evals:postnorm-L18-invsqrt:1000-": (
    RESULTS_MD_NAME,
    functools.partial(evals_range, _L18, 1000),
  ),
  "budget.evals:postnorm-L24-invsqrt-lr0.001-w200-s0:300-3000": (
    RESULTS_MD_NAME,
    functools.partial(evals_range, ("postnorm-L24-invsqrt-lr0.001-w200-s0",), 300, 3000),
  ),
  "budget.evals:postnorm-L12-const-lr0.001:500-": (
    RESULTS_MD_NAME,
    functools.partial(
      evals_range, ("postnorm-L12-const-lr0.001-w0-s0", "postnorm-L12-const-lr0.001-w0-s1"), 500
    ),
  ),
  "budget.evals:postnorm-L12-const-lr0.0005-w0-s1:500-": (
    RESULTS_MD_NAME,
    functools.partial(evals_range, ("postnorm-L12-const-lr0.0005-w0-s1",), 500),
  ),
  **{
    f"budget.slope:{n}": (RESULTS_MD_NAME, functools.partial(slope, n))
    for n in (
      "postnorm-L24-invsqrt-lr0.001-w200-s0",
      "deepnorm-L1000-const-lr0.001-w0-s0",
      "prenorm-L24-const-lr0.00025-w0-s0",
      "postnorm-L24-const-lr0.000125-w0-s1",
    )
  },
  "budget.plateau_slopes:postnorm": (RESULTS_MD_NAME, plateau_slopes),
  f"budget.diverged:{SPIKE}": (RESULTS_MD_NAME, functools.partial(diverged_step, SPIKE)),
  **{
    f"budget.train_loss:{SPIKE}:{step}": (
      RESULTS_MD_NAME,
      functools.partial(train_loss_at, SPIKE, step),
    )
    for step in (930, 940, 950)
  },
  "budget.short_of_seed2:postnorm-L24-const-lr0.000125": (
    RESULTS_MD_NAME,
    lambda: short_of(
      _L24_125,
      float(run_summary("docs/lr_sensitivity/runs/postnorm-L24-lr0.000125-s2")["final_eval_loss"]),
    ),
  ),
  "budget.wall_minutes:deepnorm-L1000": (
    RESULTS_MD_NAME,
    functools.partial(wall_minutes, "deepnorm-L1000-const-lr0.001-w0-s0"),
  ),
  "budget.eval_range:deepnorm-L1000": (
    RESULTS_MD_NAME,
    functools.partial(eval_range, _L1000, 0, None, 3),
  ),
  "budget.eval_no_context:deepnorm-L1000": (
    RESULTS_MD_NAME,
    functools.partial(eval_no_context, _L1000),
  ),
}
