"""Loss curves of several runs on one PNG, or a depth x variant stability map of a sweep.

python scripts/plot_curves.py runs/a runs/b 'runs/sweeps/seeds/*' [--out=curves.png]
python scripts/plot_curves.py --stability_map=runs/sweeps/stability_map/results.csv [--out=F]
python scripts/plot_curves.py --boundary=RESULTS.csv[,SEED1_RESULTS.csv,...] [--out=F]
python scripts/plot_curves.py --seeds=band|lines RUN_DIRS_OR_GLOBS [--panels=P] [--out=F]

Curves: each run (a folder with metrics.jsonl or curve.jsonl; globs are expanded) in its own
color: train loss solid, eval loss dots, and its no-context baseline (summary.json: the
held-out unigram cross-entropy, the loss of a model that learned nothing about context)
dashed. Stability map: one cell per (variant, depth) from a sweep's results.csv, colored by
status (trained, stuck, diverged, ...) and annotated with the final eval loss (the mean when
several runs share a cell, e.g. seeds). Boundary: the largest peak lr at which each variant
trained, against depth, one line per variant (solid without warmup, dashed with), from a
stability-boundary sweep's results.csv (several, comma-separated, for extra seeds: an lr trains
when most of its seeds did); it also writes boundary.csv, boundary.md and results.csv (every
run it counted, all seeds; not in a sweep folder, whose results.csv is the sweep's) beside the
figure. Seeds: the eval loss of runs over seeds, a panel per corpus, depth or both
(--panels=corpus|layers|corpus_layers), the end-of-run eval marked at the last step and the
no-context loss dashed: `band` draws runs that differ only in their seed (name without its
-s<seed> suffix) as one mean line with a min-max band, `lines` every run as its own line (its
variant's colour, its seed's line style).
No JAX here.
"""

from __future__ import annotations

import glob
import os

from resnorm_jax.analysis.boundary import plot_boundary
from resnorm_jax.analysis.loss_curves import plot_curves
from resnorm_jax.analysis.seed_plots import plot_seed_bands, plot_seed_lines
from resnorm_jax.analysis.stability_map import plot_stability_map, read_results
from resnorm_jax.config import cli  # (no JAX)
from resnorm_jax.runs import record_files
from resnorm_jax.runs.curves import expand_runs


def _define_flags() -> None:
  from absl import flags

  flags.DEFINE_string("out", None, "PNG to write (default curves.png / next to results.csv).")
  flags.DEFINE_string("stability_map", None, "A sweep's results.csv: draw the stability map.")
  flags.DEFINE_string(
    "boundary",
    None,
    "A boundary sweep's results.csv, or several comma-separated (one per seed): max lr vs "
    "depth; an lr trains when most of its seeds did.",
  )
  flags.DEFINE_string("title", "", "Figure title.")
  flags.DEFINE_enum(
    "seeds",
    None,
    ["band", "lines"],
    "Eval loss over seeds: one arm per setting with a min-max band over its seeds (band), or "
    "one line per run in its variant's colour and its seed's style (lines).",
  )
  flags.DEFINE_enum(
    "panels",
    None,
    ["corpus", "layers", "corpus_layers"],
    "With --seeds: a panel per corpus, depth or both (default: band corpus, lines both).",
  )


def main(argv: list[str]) -> int:
  from absl import flags

  f = flags.FLAGS
  patterns = argv[1:]
  if f.boundary:
    paths = [p for p in f.boundary.split(",") if p]
    try:
      rows = [r for path in paths for r in read_results(path)]
    except (OSError, ValueError) as e:
      cli.fail(str(e))
    out = f.out or os.path.join(os.path.dirname(paths[0]), "boundary.png")
    # Every counted run of all the seeds in one table beside the figure, unless the figure
    # sits in a sweep folder (one of the inputs', or any holding sweep points): a sweep's own
    # results.csv is its collector's, left alone.
    folder = os.path.dirname(os.path.abspath(out))
    points = os.path.join(folder, "results.csv")
    in_sweep = glob.glob(os.path.join(glob.escape(folder), "*", record_files.POINT))
    if in_sweep or points in {os.path.abspath(p) for p in paths}:
      points = None
    print(plot_boundary(rows, out, f.title, points=points))
    return 0
  if bool(patterns) == bool(f.stability_map):
    cli.fail("give run folders (or globs) for curves, or --stability_map=results.csv; not both")
  if f.stability_map:
    try:
      rows = read_results(f.stability_map)
    except (OSError, ValueError) as e:
      cli.fail(str(e))
    out = f.out or os.path.join(os.path.dirname(f.stability_map), "stability_map.png")
    print(plot_stability_map(rows, out, f.title))
    return 0
  runs = expand_runs(patterns)
  if not runs:
    cli.fail(f"no run folder with a metrics.jsonl or curve.jsonl matches {patterns}")
  if f.seeds:
    plot, panels = {
      "band": (plot_seed_bands, "corpus"),
      "lines": (plot_seed_lines, "corpus_layers"),
    }[f.seeds]
    print(plot(runs, f.out or "seeds.png", f.title, panels=f.panels or panels))
    return 0
  if f.panels:
    cli.fail("--panels goes with --seeds=band or --seeds=lines")
  print(plot_curves(runs, f.out or "curves.png", f.title))
  return 0


if __name__ == "__main__":
  from absl import app

  _define_flags()
  app.run(main)
