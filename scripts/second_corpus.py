"""Loss against lr on a second corpus beside the stdlib one: tables and figure of the
second-corpus sweep's runs.

python scripts/second_corpus.py [--runs=docs/second_corpus/runs]
    [--reference=docs/lr_sensitivity/results.csv] [--out_dir=docs/second_corpus]

Reads every finished run folder of --runs (configs/sweeps/second_corpus.py: 12 layers on tiny
Shakespeare; running and interrupted points are left out, so a sweep still landing gives
partial curves) and the stdlib column from the loss-vs-lr grid's --reference table (its
12-layer rows of the same variants), and writes into --out_dir:
  results.csv  a row per run, docs/lr_sensitivity/results.csv's columns ('data' the corpus)
  edges.csv    a row per (variant, corpus): best lr and loss, boundary lr (largest within
               0.1 nats of the best), failing lr (smallest above the best on the plateau) and
               how its runs failed, LR sensitivity from 5 lrs
  curves.png   capped final eval loss against lr, a panel per variant, a colour per corpus
The rules are resnorm_jax/analysis/lr_axis.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import (
  corpus,  # (no JAX)
  lr_axis,
  lr_sweep_rows,
)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "second_corpus", "runs"))
  parser.add_argument("--reference", default=os.path.join("docs", "lr_sensitivity", "results.csv"))
  parser.add_argument("--out_dir", default=os.path.join("docs", "second_corpus"))
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs}")
  rows = lr_sweep_rows.finished_rows(args.runs)
  variants = sorted({r["variant"] for r in rows}) or ["postnorm", "prenorm", "deepnorm"]
  reference = corpus.reference_rows(args.reference, variants)
  paths = corpus.write_outputs(reference + rows, args.out_dir)
  print(f"{len(rows)} finished runs, {len(reference)} stdlib rows from {args.reference}")
  for t in lr_axis.edge_table(reference + rows, corpus.AXIS):
    print(lr_axis.edge_line(t, f"on {t['data']}"))
  for path in paths.values():
    print(path)


if __name__ == "__main__":
  main()
