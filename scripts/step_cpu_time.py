"""The train step's process CPU time and wall time per step, for a core shared with other jobs.

XLA_FLAGS=--xla_cpu_multi_thread_eigen=false taskset -c 1 python scripts/step_cpu_time.py \
    --config=configs/postnorm_96L.py --config.model.num_layers=12 [--steps=30] [--out=FILE]

On a core that other processes share, a wall-time median (scripts/benchmark.py) measures the
sharing; the process's CPU time per step is what the step costs the core, the time a run
takes on a core of its own. Times the loop's compiled step (run_setup.build), each step
blocked, after 3 untimed steps. Single-threaded XLA (the flag above, as `--jobs=auto` runs a
sweep point) makes process CPU time the step's own work.
"""

from __future__ import annotations

import json
import os
import time

from absl import app, flags, logging

from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.hardware.bench_flags import CONFIG, OUT, STEPS, WARMUP


def main(argv) -> None:
  del argv
  logging.set_verbosity(logging.WARNING)
  import jax
  import numpy as np

  from resnorm_jax.train import run_setup

  c = CONFIG.value
  s = run_setup.build(c)
  batch_at = run_setup.batches(s).train
  compiled = s.lower_step().compile()
  state = s.init_state()
  for i in range(WARMUP.value):
    state, _ = compiled(state, batch_at(i))
  jax.block_until_ready(state)
  wall, cpu = [], []
  for i in range(WARMUP.value, WARMUP.value + STEPS.value):
    batch = batch_at(i)
    jax.block_until_ready(batch)
    w0, c0 = time.perf_counter(), time.process_time()
    state, metrics = compiled(state, batch)
    jax.block_until_ready((state, metrics))
    wall.append(time.perf_counter() - w0)
    cpu.append(time.process_time() - c0)
  m = c.model
  result = {
    "config": c.name,
    "model": {k: m[k] for k in ("num_layers", "d_model", "num_heads", "d_ff")},
    "params": s.num_params,
    "steps": STEPS.value,
    "cpu_s": {"median": float(np.median(cpu)), "mean": float(np.mean(cpu)), "min": min(cpu)},
    "wall_s": {"median": float(np.median(wall)), "mean": float(np.mean(wall))},
    "metrics": sorted(metrics),
    "loadavg_1min": os.getloadavg()[0],
  }
  print(json.dumps(result, indent=1))
  if OUT.value:
    with open_nofollow(OUT.value, "w") as f:
      json.dump(result, f, indent=1)


if __name__ == "__main__":
  flags.mark_flag_as_required("config")
  app.run(main)
