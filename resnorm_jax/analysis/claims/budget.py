"""The README's row of the budget test (docs/lr_sensitivity/budget.csv; the analysis is
resnorm_jax/analysis/budget.py): stuck, not slow."""

from __future__ import annotations

import collections

from resnorm_jax.analysis.claims.docs_data import Claim, read, tokens_note
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
