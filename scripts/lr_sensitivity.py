"""Loss against lr over depth, and LR sensitivity, of an lr sweep's finished runs.

python scripts/lr_sensitivity.py [--runs=docs/lr_sensitivity/runs] [--out_dir=docs/lr_sensitivity]

Reads every run folder of --runs (variant from its sweep_point.json's config, depth, lr, seed
and budget from its config.json; running and interrupted points are left out, so a sweep still
landing gives partial curves) and writes into --out_dir:
  results.csv      a row per finished run: axes, final eval loss, baseline, capped loss,
                   outcome, escape_step, diverged_step
  sensitivity.csv  a row per (variant, depth): LR sensitivity (Wortsman et al. 2023: the mean
                   over lrs of the seed-mean final eval loss capped at the baseline, minus its
                   best), best lr and loss, boundary lr (the largest within 0.1 nats of the
                   best); empty, with a note, for a curve of fewer than 5 lrs; a curve
                   missing some of the sweep's lrs is noted as partial
  curves.png       capped final eval loss against lr, a panel per depth and family of variants
                   (lr_figures.FAMILIES), a colour and a marker per variant
  sensitivity.png  LR sensitivity and boundary lr against depth, a line per variant
  contrasts.csv    configs/sweeps/literature.py's SEED_CONTRAST: one variant minus another in
                   final eval loss, over seeds at its lr (Welch interval) and seed 0 at each lr
  literature.png   curves.png for the 2025-26 variants (configs/sweeps/literature.py) beside
                   Pre-LN, Post-LN and hyper-connections, at the depths they were run
The rules are resnorm_jax/analysis/lr_sensitivity.py's, the rows lr_sweep_rows.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import os
import sys

from configs.sweeps import literature  # (no JAX)
from resnorm_jax.analysis import (
  lr_figures,  # (no JAX)
  lr_sensitivity,
  lr_sweep_rows,
)
from resnorm_jax.files import csv_table

# The 2025-26 variants, as their sweep grid names them, and the three they are read against:
# Pre-LN (most are Pre-LN-based), Post-LN, hyper-connections (mHC's direct contrast).
LITERATURE = literature.VARIANTS
CONTRASTS = ("prenorm", "postnorm", "hyperconn")


def literature_rows(rows: list[dict]) -> list[dict]:
  """The rows of literature.png: those variants and their contrasts at the depths where one of
  LITERATURE has a finished run."""
  depths = {r["num_layers"] for r in rows if r["variant"] in LITERATURE}
  keep = set(LITERATURE) | set(CONTRASTS)
  return [r for r in rows if r["variant"] in keep and r["num_layers"] in depths]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default=os.path.join("docs", "lr_sensitivity", "runs"))
  parser.add_argument("--out_dir", default=os.path.join("docs", "lr_sensitivity"))
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"no run folder at {args.runs}")
  rows = lr_sweep_rows.finished_rows(args.runs)
  grid = lr_sweep_rows.grid_lrs(args.runs)
  paths = lr_figures.write_outputs(rows, args.out_dir, grid)
  if literature_rows(rows):
    out = os.path.join(args.out_dir, "literature.png")
    paths["literature.png"] = lr_figures.plot_curves(
      literature_rows(rows), out, lr_figures.FAMILIES
    )
  (variant, versus), depth, lr, _ = literature.SEED_CONTRAST
  contrast = lr_sensitivity.seed_contrast(rows, variant, versus, depth, lr)
  if contrast:
    out = os.path.join(args.out_dir, "contrasts.csv")
    columns = lr_sensitivity.CONTRAST_COLUMNS
    paths["contrasts.csv"] = csv_table.write_csv(out, contrast, columns, extrasaction="ignore")
  table = lr_sensitivity.sensitivity_table(rows, grid=grid)
  print(f"{len(rows)} finished runs, {len(table)} curves ({lr_sweep_rows.setting_title(rows)})")
  for t in table:
    value = t["lr_sensitivity"]
    text = f"{value:.3f}, boundary lr {t['boundary_lr']}" if value is not None else ""
    text = "; ".join(x for x in (text, t["note"]) if x)
    print(f"  {t['variant']} {t['num_layers']} layers: {text}")
  for path in paths.values():
    print(path)


if __name__ == "__main__":
  main()
