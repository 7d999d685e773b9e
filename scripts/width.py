"""Loss against lr by width: tables and figures of the width sweep's runs.

python scripts/width.py [--runs=docs/width/runs] [--reference=docs/lr_sensitivity/results.csv]
    [--out_dir=docs/width] [--width_param=sp|mup]

Reads every finished run folder of --runs (configs/sweeps/width.py: 12 layers at d_model 128
and 256; running and interrupted points are left out, so a sweep still landing gives partial
curves) and the d_model-64 column from the loss-vs-lr grid's --reference table (its 12-layer
rows of the same variants), and writes into --out_dir. With --width_param=mup it reads the
muP runs alone (tier 4, whose d_model-64 column is run, not taken from the sp grid) and
writes into docs/width/mup/:
  results.csv  a row per run: docs/lr_sensitivity/results.csv's columns, then d_model,
               num_heads and the failure-kind diagnostics (attn_logit_max_first/_peak,
               output_logit_rms_first/_peak: first logged value and largest over training;
               empty for runs that did not log them)
  edges.csv    a row per (variant, width): best lr and loss, boundary lr (largest within 0.1
               nats of the best), failing lr (smallest above the best on the plateau) and
               how its runs failed (stuck or diverged), LR sensitivity from 5 lrs
  curves.png   capped final eval loss against lr, a panel per variant, a colour per width
               (under muP a second row: sp's runs of the same variants and widths)
  edges.png    best and failing lr against width, a line per variant
The rules are resnorm_jax/analysis/width.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import (
  lr_axis,  # (no JAX)
  width,
)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "width", "runs"))
  parser.add_argument("--reference", default=os.path.join("docs", "lr_sensitivity", "results.csv"))
  parser.add_argument("--out_dir", help="default docs/width, docs/width/mup under muP")
  parser.add_argument("--width_param", default="sp", choices=sorted(width.WIDTH_PARAMS))
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs}")
  mup = args.width_param == "mup"
  out_dir = args.out_dir or os.path.join("docs", "width", *(["mup"] if mup else []))
  rows = width.run_rows(args.runs, args.width_param)
  if mup and not rows:
    sys.exit(f"no finished muP run in {args.runs} (configs/sweeps/width.py, tier 4)")
  variants = sorted({r["variant"] for r in rows}) or list(width.VARIANTS)
  reference = [] if mup else width.reference_rows(args.reference, variants)
  rows = sorted(reference + rows, key=width.row_order)
  sp = []  # under muP, sp's runs of the same variants at the same widths: the reference row
  if mup:
    sp = width.run_rows(args.runs, "sp") + width.reference_rows(args.reference, variants)
    widths_run = {r["d_model"] for r in rows}
    sp = sorted(
      [r for r in sp if r["variant"] in variants and r["d_model"] in widths_run],
      key=width.row_order,
    )
  paths = width.write_outputs(rows, out_dir, args.width_param, sp)
  widths = sorted({r["d_model"] for r in rows})
  print(f"{len(rows)} finished runs ({len(reference)} from {args.reference}), widths {widths}")
  for t in width.edge_table(rows):
    print(lr_axis.edge_line(t, f"d_model {t['d_model']}"))
  for path in paths.values():
    print(path)


if __name__ == "__main__":
  main()
