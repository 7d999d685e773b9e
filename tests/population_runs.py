"""The members and the child processes of the population tests (tests/test_population_run.py,
tests/test_sweep_vmap.py): three points where lr alone and seed alone differ, a Python child
run with a test's environment, JSON written and read."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STABLE = [(1e-3, 0), (4e-3, 0), (1e-3, 1)]  # (lr, seed): lr alone and seed alone differ


def write_json(path, obj) -> str:
  with open(path, "w") as f:
    json.dump(obj, f)
  return str(path)


def ok(proc):
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return proc


def child_env(cache_dir) -> dict:
  """The environment of a test's child processes: CPU, XLA's quickest compile, and one
  compilation cache (`cache_dir`) their programs share."""
  return {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_backend_optimization_level=0",
    "JAX_COMPILATION_CACHE_DIR": str(cache_dir),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
  }


def python(env, args, **extra_env):
  return subprocess.run(
    [sys.executable, *args],
    cwd=ROOT,
    env={**env, **extra_env},
    capture_output=True,
    text=True,
    timeout=600,
  )


def read_json(workdir, name):
  with open(os.path.join(workdir, name)) as f:
    return json.load(f)
