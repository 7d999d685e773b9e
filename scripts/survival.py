"""Escape probabilities with 95% intervals and Kaplan-Meier survival curves of escape times,
from a folder of runs made by configs/sweeps/survival.py.

python scripts/survival.py [--runs=docs/survival/runs] [--out_dir=docs/survival] [--horizon=1500]
  [--only=REGEX] [--baseline=docs/survival/runs:^postnorm-L12-lr0.001-s]

--only keeps the --runs folders whose name REGEX matches: the survival protocol's runs of a
folder that also holds another protocol's (docs/stabilizers/runs: the loss-vs-lr curves).

Writes into --out_dir:
  runs.csv      a row per finished run: first passage below the margin, each relapse, the
                fraction of evals below, the project's escape step, the passage at margins
                0.05 / 0.1 / 0.2, and for a run that never escaped its late slope with its
                standard error and trend (falling / flat / rising at 2 standard errors)
  cells.csv     a row per cell (variant, depth, lr): k of n runs escaped by --horizon steps,
                the exact (Clopper-Pearson) 95% interval, the Kaplan-Meier escape probability
                by the longest run's last step with its 95% interval (runs extended past the
                horizon count there), relapses, and the count at each margin; with
                --baseline, kept_p_vs_baseline: Fisher's exact test (two-sided) of the
                escapes kept to the end against the baseline cell of the same depth and lr
  survival.png  a column per cell: each seed's eval curve against its eval set's no-context
                loss, and the Kaplan-Meier curve with its band
The rules are resnorm_jax/analysis/survival.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import survival, survival_figure  # (no JAX)
from resnorm_jax.files import csv_table


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "survival", "runs"))
  parser.add_argument("--out_dir", default=os.path.join("docs", "survival"))
  parser.add_argument("--horizon", type=int, default=1500, help="steps every run reached")
  parser.add_argument("--only", default="", metavar="REGEX", help="--runs' folders matching")
  parser.add_argument(
    "--baseline",
    action="append",
    default=[],
    metavar="DIR:REGEX",
    help="also the finished runs under DIR whose folder name REGEX matches, as cells of their "
    "own beside --runs' (a comparison cell run by another sweep); repeatable",
  )
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs} (the survival sweep has not started)")
  rows = survival.finished_runs(args.runs, args.only or None)
  if not rows:
    only = f" matching {args.only!r}" if args.only else ""
    sys.exit(f"no finished run under {args.runs}{only}")
  for spec in args.baseline:
    folder, sep, pattern = spec.partition(":")
    if not sep or not os.path.isdir(folder) or not pattern:
      sys.exit(f"--baseline={spec!r}: expected DIR:REGEX with DIR a folder of runs")
    extra = survival.finished_runs(folder, pattern)
    if not extra:
      sys.exit(f"--baseline={spec!r}: no finished run under {folder} matches {pattern!r}")
    rows = sorted(rows + extra, key=survival.cell_key_and_seed)
  cells = survival.cells(rows, args.horizon)
  columns = list(survival.CELL_COLUMNS)
  if args.baseline:
    folders = tuple(spec.partition(":")[0] for spec in args.baseline)
    baselines = {r["variant"] for r in rows if r["_dir"].startswith(folders)}
    survival.compare_kept(cells, baselines)
    columns.append("kept_p_vs_baseline")
  os.makedirs(args.out_dir, exist_ok=True)
  out = {name: os.path.join(args.out_dir, name) for name in ("runs.csv", "cells.csv")}
  paths = [  # a missing value or None written empty, columns beyond the table's left out
    csv_table.write_csv(out["runs.csv"], rows, survival.RUN_COLUMNS, extrasaction="ignore"),
    csv_table.write_csv(out["cells.csv"], cells, columns, extrasaction="ignore"),
    survival_figure.plot_survival(args.runs, rows, os.path.join(args.out_dir, "survival.png")),
  ]
  for c in cells:
    print(
      f"{c['variant']} L{c['num_layers']} lr {c['lr']}: escaped by step {c['horizon']} on "
      f"{c['escaped']} of {c['seeds']} (p {c['p_escape']}, 95% {c['ci_lo']}-{c['ci_hi']}); "
      f"relapsed {c['relapsed_runs']}"
    )
  print(f"{len(rows)} finished runs -> {', '.join(paths)}")


if __name__ == "__main__":
  main()
