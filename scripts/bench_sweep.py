"""Sweep throughput: the same grid of small points run one at a time (--jobs=1, each on
every core) and pinned one per core (--jobs=auto), timed side by side in one run.

python scripts/bench_sweep.py [--points=8] [--steps=150] [--layers=6] [--out=FILE.json]

Prints the wall time of each, their ratio, and the largest relative difference between the
two sweeps' final losses (float32 rounding: single- and multi-threaded XLA:CPU sum in
different orders).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from resnorm_jax.config import cli
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.runs import record_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_sweep(grid: str, sweep_dir: str, jobs: str) -> float:
  t0 = time.time()
  subprocess.run(
    [
      sys.executable,
      "scripts/sweep.py",
      f"--grid={grid}",
      f"--sweep_dir={sweep_dir}",
      f"--jobs={jobs}",
      "--progress_every=0",
    ],
    cwd=ROOT,
    check=True,
    capture_output=True,
    text=True,
  )
  return time.time() - t0


def losses(sweep_dir: str, names: list[str]) -> list[float]:
  return [
    json.load(open(os.path.join(sweep_dir, n, record_files.SUMMARY)))["final_eval_loss"]
    for n in names
  ]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--points", type=int, default=8)
  parser.add_argument("--steps", type=int, default=150)
  parser.add_argument("--layers", type=int, default=6)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  names = [f"p{i}" for i in range(args.points)]
  with tempfile.TemporaryDirectory() as tmp:
    grid = os.path.join(tmp, "grid.py")
    over = {"model.num_layers": args.layers, "train.steps": args.steps, "diag.per_layer": False}
    points = [
      {"config": "configs/postnorm_96L.py", "name": n, "overrides": {**over, "seed": i}}
      for i, n in enumerate(names)
    ]
    with open_nofollow(grid, "w") as f:
      f.write(f"GRID = {points!r}\n".replace("false", "False"))
    seq = run_sweep(grid, os.path.join(tmp, "seq"), "1")
    par = run_sweep(grid, os.path.join(tmp, "par"), "auto")
    pairs = zip(
      losses(os.path.join(tmp, "seq"), names), losses(os.path.join(tmp, "par"), names), strict=True
    )
    diff = max(abs(a - b) / abs(a) for a, b in pairs)
  cores = len(os.sched_getaffinity(0))
  result = {
    "points": args.points,
    "layers": args.layers,
    "steps": args.steps,
    "cores": cores,
    "sequential_seconds": round(seq, 1),
    "jobs_auto_seconds": round(par, 1),
    "speedup": round(seq / par, 2),
    "max_rel_loss_diff": diff,
  }
  print(json.dumps(result))
  if args.out:
    cli.write_json(args.out, result)


if __name__ == "__main__":
  main()
