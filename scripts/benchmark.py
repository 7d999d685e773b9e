"""Speed and memory of one config's train step: compile time, step time, tokens/s, MFU, memory.

python scripts/benchmark.py --config=configs/prenorm_96L.py [--config.model.num_layers=24 ...]
    [--steps=20] [--warmup=3] [--out=bench.json] [--matmul_size=0] [--max_memory_gib=0]

What is measured, and how (the loop's own setup, step pattern and data path): the
docstring of resnorm_jax/hardware/bench.py. If the ahead-of-time memory estimate exceeds the limit
(--max_memory_gib; 0: the device's memory on GPU/TPU, 16 GiB of host RAM on CPU), nothing
runs and the estimate is reported, as with --compile_only.
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from resnorm_jax.config import cli  # (no JAX import)
from resnorm_jax.hardware import bench_flags
from resnorm_jax.hardware.bench_flags import CONFIG as _CONFIG
from resnorm_jax.hardware.bench_flags import STEPS as _STEPS
from resnorm_jax.hardware.bench_flags import WARMUP as _WARMUP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_MATMUL = flags.DEFINE_integer("matmul_size", 0, "n of the n x n matmul rate; 0: by platform.")
_MAX_MEM = flags.DEFINE_float(
  "max_memory_gib",
  0.0,
  "Do not run a step whose AOT memory estimate exceeds this; 0: the device's memory on "
  "GPU/TPU, bench.CPU_MEMORY_LIMIT_GIB (16 GiB) on CPU.",
)
_SYNC = flags.DEFINE_bool("sync", True, "Also time blocked steps (step vs host data time).")
_COMPILE_ONLY = flags.DEFINE_bool("compile_only", False, "Stop after compiling (no steps).")


def main(argv):
  bench_flags.check(argv, "configs/prenorm_96L.py")
  logging.set_verbosity(logging.WARNING)  # JAX logs each backend it cannot start at INFO
  from resnorm_jax.hardware import bench  # imports JAX: after flags, so --help stays fast

  try:
    r = bench.benchmark(
      _CONFIG.value,
      steps=_STEPS.value,
      warmup=_WARMUP.value,
      matmul_size=_MATMUL.value,
      max_memory_gib=_MAX_MEM.value,
      sync=_SYNC.value,
      compile_only=_COMPILE_ONLY.value,
    )
  except ValueError as e:
    cli.fail(str(e))
  bench_flags.report(r, bench.table, ROOT)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
