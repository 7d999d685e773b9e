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
