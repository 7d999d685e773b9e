"""Pre-LN's loss-vs-lr curve with each stabilizer (docs/stabilizers/), beside Pre-LN's own.

python scripts/stabilizer_curves.py [--runs=docs/stabilizers/runs] \
    [--baseline=docs/lr_sensitivity/runs] [--out_dir=docs/stabilizers]

Reads the finished `prenorm-<stabilizer>-L<depth>-lr<lr>-s<seed>` run folders of --runs (the
grid configs/sweeps/stabilizers.py's CURVES: the loss-vs-lr protocol, 1,000 steps, constant
lr, no warmup) and plain Pre-LN's runs of the loss-vs-lr grid at the same depths, seeds and
budget (--baseline), and writes into --out_dir:
  curves.csv   a row per (stabilizer, depth, lr, seed): final eval loss and outcome, Pre-LN's
               at the same depth, lr and seed, and the difference (stabilizer minus Pre-LN);
               plain Pre-LN's own points at those depths as the rows of stabilizer `none`
  curves.png   final eval loss against lr, a panel per depth, a line per stabilizer and
               Pre-LN's in black
and prints docs/stabilizers/README.md's tables (its generated sections, which
`python scripts/claims.py --write` writes from the committed curves.csv): per depth with a
stabilizer, a markdown table of the final eval losses (lrs across; under plain Pre-LN's seed-0
row, its seeds' range where more than one ran) with each curve's best lr (`<=` or `>=` where it
is the lowest or highest lr run); Muon's own 6-layer curve; Muon's curves across depth under
sp and CompleteP; and, where a stabilizer has more than one seed at a point, its seeds' range
beside plain Pre-LN's seeds there. A point still running, or not run, is a blank cell. No JAX
here. The rows and tables: resnorm_jax/analysis/stabilizer_curves.py; the figure:
resnorm_jax/analysis/stabilizer_curves_figure.py.
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import stabilizer_curves as sc
from resnorm_jax.analysis.stabilizer_curves_figure import plot


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--runs", default=os.path.join("docs", "stabilizers", "runs"))
  p.add_argument("--baseline", default=os.path.join("docs", "lr_sensitivity", "runs"))
  p.add_argument("--out_dir", default=os.path.join("docs", "stabilizers"))
  args = p.parse_args()
  for path in (args.runs, args.baseline):
    if not os.path.isdir(path):
      sys.exit(f"no run folder at {path}")
  rows = sc.stabilizer_rows(args.runs)
  if not rows:
    sys.exit(f"no finished prenorm-<stabilizer>-L<depth>-lr<lr>-s<seed> run under {args.runs}")
  out = sc.table(rows, sc.baseline_rows(args.baseline, {r["num_layers"] for r in rows}))
  path = os.path.join(args.out_dir, "curves.csv")
  sc.write_csv(path, out)
  print(path, plot(out, os.path.join(args.out_dir, "curves.png")))
  curves = {r["num_layers"] for r in out if r["stabilizer"] not in ("none", *sc.PARAMETRIZED)}
  for depth in sorted(curves):
    print(f"\n{depth} layers, seed 0:\n{sc.markdown(out, depth)}")
  for title, text in (
    ("Muon's own curve, 6 layers, seed 0", sc.muon_curve_markdown(out)),
    ("Muon across depth, sp and CompleteP, seed 0", sc.muon_depth_markdown(out)),
    ("Where a curve has more than one seed", sc.seeds_markdown(out)),
  ):
    if text:
      print(f"\n{title}:\n{text}")


if __name__ == "__main__":
  main()
