"""Why the gate moves Post-LN's edge, measured: the first 300 steps of plain Post-LN, gated
attention and the 0.5-scale control at the 12-layer lr 1e-3 cell (configs/sweeps/
gate_mechanism.py) -> docs/stabilizers/mechanism.csv and mechanism.png
(resnorm_jax/analysis/gate_mechanism.py). No JAX here.

python scripts/gate_mechanism.py [--runs=docs/stabilizers/mechanism] [--out_dir=docs/stabilizers]
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.analysis import gate_mechanism


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default="docs/stabilizers/mechanism")
  parser.add_argument("--out_dir", default="docs/stabilizers")
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"--runs={args.runs}: no such folder")
  runs = gate_mechanism.collect(args.runs)
  os.makedirs(args.out_dir, exist_ok=True)
  if not runs:
    sys.exit(f"no finished run of configs/sweeps/gate_mechanism.py under {args.runs}")
  table = gate_mechanism.write_table(
    os.path.join(args.out_dir, "mechanism.csv"), gate_mechanism.table(runs)
  )
  figure = gate_mechanism.plot(runs, os.path.join(args.out_dir, "mechanism.png"))
  for run in runs:
    first = gate_mechanism.escape_step(run)
    print(f"{run['arm']} seed {run['seed']}: first passage {first if first else 'none by 300'}")
  print(f"{len(runs)} runs -> {table}, {figure}")


if __name__ == "__main__":
  main()
