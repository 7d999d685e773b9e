"""Test setup: 8 fake CPU devices, set before JAX is imported anywhere; `run_script` and
`read_csv`."""

import csv
import os
import subprocess
import sys

import pytest

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


@pytest.fixture
def run_script():
  """run(argv, timeout=120, **env): argv from the repository root, output captured.

  A `.py` first argument runs with this Python. The child sees one CPU device and LLVM
  without optimizations (it compiles in a third of the time; the numbers these runs print
  need only be finite), plus `env`.
  """

  def run(argv: list[str], timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    if argv[0].endswith(".py"):
      argv = [sys.executable, *argv]
    child_env = dict(
      os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_backend_optimization_level=0", **env
    )
    return subprocess.run(
      argv, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=timeout
    )

  return run


@pytest.fixture
def read_csv():
  """read(path): the rows of a CSV file, as dicts of strings."""

  def read(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
      return list(csv.DictReader(f))

  return read
