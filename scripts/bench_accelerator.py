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
import sys

from absl import app, flags, logging

from resnorm_jax.config import cli  # (no JAX import)
from resnorm_jax.hardware.bench_flags import CONFIG as _CONFIG
from resnorm_jax.hardware.bench_flags import OUT as _OUT
from resnorm_jax.hardware.bench_flags import STEPS as _STEPS
from resnorm_jax.hardware.bench_flags import WARMUP as _WARMUP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ESTIMATE = flags.DEFINE_bool(
  "estimate", True, "On a TPU, also compile for the cost model's estimate (two compiles)."
)


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if _CONFIG.value is None:
    cli.fail("--config=FILE is required (e.g. configs/prenorm_96L.py:paper)")
  if _STEPS.value < 1 or _WARMUP.value < 0:
    cli.fail(f"--steps must be >= 1 and --warmup >= 0 (got {_STEPS.value}, {_WARMUP.value})")
  logging.set_verbosity(logging.WARNING)
  from resnorm_jax.hardware import accelerator  # imports JAX: after flags, so --help is fast

  try:
    r = accelerator.measure(
      _CONFIG.value, steps=_STEPS.value, warmup=_WARMUP.value, with_estimate=_ESTIMATE.value
    )
  except ValueError as e:
    cli.fail(str(e))
  r["command"] = " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
  print(accelerator.table(r), flush=True)
  if _OUT.value:
    cli.write_json(_OUT.value, r)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
