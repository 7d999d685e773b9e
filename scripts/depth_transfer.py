"""Does the best lr transfer across depth? Tables and figures of the depth-parametrization
sweep (configs/sweeps/depth_transfer.py) beside standard parametrization's loss-vs-lr runs.

python scripts/depth_transfer.py [--runs=docs/depth_transfer/runs] \
    [--sp_runs=docs/lr_sensitivity/runs] [--out_dir=docs/depth_transfer]

Every curve is compared on the sweep's lrs (configs/sweeps/depth_transfer.py LRS; sp's runs
at other lrs are left out) and, at the base depth, sp's runs stand for every
parametrization (they are the same runs bit for bit). Writes into --out_dir:
  results.csv   a row per finished run (lr_sweep_rows.py's columns + depth_param)
  best_lr.csv   a row per (variant, parametrization, depth): the grid's best lr and loss, the
                fitted best lr (parabola in log2 lr through the lowest point and 1 or 2
                neighbours each side: 3pt, 5pt) and the standard error of its log2; empty
                where the lowest point is at the grid's end
  slopes.csv    d log2(best lr) / d log2(L) per (variant, parametrization), with its s.e.
  contrast.csv  CompleteP minus sp for Pre-LN: the OLS slopes on seed-0 curves with their
                difference, its s.e. and a bootstrap interval over seeds; at 24 layers the
                seed-mean best lr and loss on the lrs both ran with every seed
  <variant>.png loss against lr per parametrization (depth as colour) and best lr against depth
The rules are resnorm_jax/analysis/depth_transfer.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from configs.sweeps import depth_transfer as grid
from resnorm_jax.analysis import depth_contrast, depth_transfer_figure, lr_sweep_rows
from resnorm_jax.analysis import depth_transfer as dt  # (no JAX)
from resnorm_jax.files import csv_table


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "depth_transfer", "runs"))
  parser.add_argument("--sp_runs", default=os.path.join("docs", "lr_sensitivity", "runs"))
  parser.add_argument("--out_dir", default=os.path.join("docs", "depth_transfer"))
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs}")
  parametrized = dt.rows_of(args.runs)
  variants = sorted({r["variant"] for r in parametrized})
  depths = (grid.BASE_DEPTH, *grid.DEPTHS, *grid.LATE_DEPTHS)
  sp = [r for r in dt.rows_of(args.sp_runs, depths) if r["variant"] in variants]
  on_grid = lambda r: any(abs(r["opt.lr"] / lr - 1) < 1e-6 for lr in grid.LRS)
  rows = dt.with_base_depth([r for r in sp + parametrized if on_grid(r)], grid.BASE_DEPTH)
  os.makedirs(args.out_dir, exist_ok=True)
  table = dt.best_lr_table(rows)
  slopes = dt.depth_slopes(table)
  slope = depth_contrast.slope_contrast(rows)
  contrast = ([slope] if slope else []) + depth_contrast.seeded_contrast(rows, 24)
  columns = (*lr_sweep_rows.RESULT_COLUMNS, "depth_param")
  tables = {
    "results.csv": (rows, columns),
    "best_lr.csv": (table, dt.BEST_COLUMNS),
    "slopes.csv": (slopes, dt.SLOPE_COLUMNS),
    "contrast.csv": (contrast, depth_contrast.CONTRAST_COLUMNS),
  }
  paths = [
    csv_table.write_csv(os.path.join(args.out_dir, name), t, cols, extrasaction="ignore")
    for name, (t, cols) in tables.items()
  ]
  for variant in variants:
    mine = [r for r in rows if r["variant"] == variant]
    out = os.path.join(args.out_dir, f"{variant}.png")
    mine_table = [t for t in table if t["variant"] == variant]
    paths.append(depth_transfer_figure.plot_transfer(mine, mine_table, variant, out))
  print("\n".join(dt.describe(table, slopes)))
  print("\n".join(paths))


if __name__ == "__main__":
  main()
