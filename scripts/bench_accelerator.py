"""One config's train step timed on this host's chips, beside the compiler's estimate.

python scripts/bench_accelerator.py --config=configs/prenorm_96L.py:paper [--steps=20]
    [--warmup=3] [--out=bench.json] [--noestimate] [--config.model.attention=cudnn ...]

On a TPU VM: compiles, warms up, times --steps steps as the loop runs them and prints the
measured step time, tokens/s and MFU (analytic model FLOPs over the chips' nominal bf16
peak), then the TPU cost model's estimate of the same program and the ratio of the two. On a
GPU host: the measurement, and a line saying the GPU compiler gives no estimate. On a CPU (the
tests, at smoke scale): MFU against the dense matmul rate measured in the same process.
What is measured and how: resnorm_jax/hardware/accelerator.py and bench.py.
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

_ESTIMATE = flags.DEFINE_bool(
  "estimate", True, "On a TPU, also compile for the cost model's estimate (two compiles)."
)


def main(argv):
  bench_flags.check(argv, "configs/prenorm_96L.py:paper")
  logging.set_verbosity(logging.WARNING)
  from resnorm_jax.hardware import accelerator  # imports JAX: after flags, so --help is fast

  try:
    r = accelerator.measure(
      _CONFIG.value, steps=_STEPS.value, warmup=_WARMUP.value, with_estimate=_ESTIMATE.value
    )
  except ValueError as e:
    cli.fail(str(e))
  bench_flags.report(r, accelerator.table, ROOT)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
