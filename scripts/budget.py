"""When, if ever, each seed of a long run escaped the plateau: a budget table and survival plot.

python scripts/budget.py [--runs=docs/lr_sensitivity/budget/runs] [--out_dir=docs/lr_sensitivity]

Reads every finished run folder of --runs (variant from its sweep_point.json's config, depth, lr,
warmup, schedule, seed and budget from its config.json; escape_step from its summary, or from
its curve when the summary predates it) and writes into --out_dir:
  budget.csv  a row per run: variant, num_layers, lr, warmup, schedule, seed, steps,
              escape_step (empty: never escaped), final_eval_loss, baseline, outcome
  budget.png  the fraction of seeds escaped against step, a line per setting
  budget_curves.png  each run's periodic eval loss against step, a panel per cell
The rules are resnorm_jax/analysis/budget.py's, lr_sweep_rows.py's and outcome.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import (
  budget,  # (no JAX)
  lr_sweep_rows,
)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "lr_sensitivity", "budget", "runs"))
  parser.add_argument("--out_dir", default=os.path.join("docs", "lr_sensitivity"))
  parser.add_argument(
    "--mark_step", type=int, default=1000, help="a vertical line: the loss-vs-lr sweep's budget"
  )
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs} (the budget runs have not started)")
  rows = lr_sweep_rows.finished_rows(args.runs)
  paths = budget.write_budget(rows, args.out_dir, args.runs, mark_step=args.mark_step)
  escaped = sum(r["escape_step"] is not None for r in rows)
  print(f"{len(rows)} finished runs, {escaped} escaped -> {', '.join(paths.values())}")


if __name__ == "__main__":
  main()
