"""The mechanism figure and table from the per-layer runs of configs/sweeps/mechanism.py.

python scripts/mechanism.py [--runs=docs/mechanism/runs] [--out_dir=docs/mechanism]

Writes into --out_dir:
  mechanism.csv  a row per run and logged step: train loss, the model update, the first and
                 last layers' gradient norms and their ratio, the FFN norm's input RMS at the
                 first, middle and last layer
  mechanism.png  those over training, one colour per variant, and the norm input RMS per layer
                 at a few steps, a panel per variant
The rules are resnorm_jax/analysis/mechanism.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import mechanism  # (no JAX)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "mechanism", "runs"))
  parser.add_argument("--out_dir", default=os.path.join("docs", "mechanism"))
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs} (configs/sweeps/mechanism.py has not run)")
  runs = mechanism.finished_runs(args.runs)
  if not runs:
    sys.exit(f"no finished run under {args.runs}")
  rows = [row for d in runs for row in mechanism.table_rows(d)]
  if not rows:
    sys.exit(f"no per-layer diagnostics in {args.runs} (run with diag.per_layer=true)")
  print(mechanism.write_csv(os.path.join(args.out_dir, "mechanism.csv"), rows))
  print(mechanism.plot(runs, os.path.join(args.out_dir, "mechanism.png")))


if __name__ == "__main__":
  main()
