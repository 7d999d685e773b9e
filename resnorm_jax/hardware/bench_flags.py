"""The flags the benchmark entry points share (scripts/benchmark.py, compare_steps.py,
profile_step.py): defined once here, so no script imports another. No JAX import. Only
entry points import this module (it defines absl flags when imported)."""

from absl import flags
from ml_collections import config_flags

CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
STEPS = flags.DEFINE_integer("steps", 20, "Timed steps (each of the loop and sync passes).")
WARMUP = flags.DEFINE_integer("warmup", 3, "Untimed steps after compiling.")
OUT = flags.DEFINE_string("out", "", "Write the results as JSON to this file.")


def check(argv, example: str) -> None:
  """The shared flags' checks, before JAX starts: one line and exit 2 on bad input."""
  from resnorm_jax.config import cli

  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if CONFIG.value is None:
    cli.fail(f"--config=FILE is required (e.g. {example})")
  if STEPS.value < 1 or WARMUP.value < 0:
    cli.fail(f"--steps must be >= 1 and --warmup >= 0 (got {STEPS.value}, {WARMUP.value})")


def report(result: dict, table, root: str) -> None:
  """Records the command line in `result`, prints `table(result)`, writes --out's JSON."""
  import os
  import sys

  from resnorm_jax.config import cli

  result["command"] = " ".join([os.path.relpath(sys.argv[0], root), *sys.argv[1:]])
  print(table(result), flush=True)
  if OUT.value:
    cli.write_json(OUT.value, result)
