"""Test setup: 8 fake CPU devices, LLVM without optimizations and one XLA compilation cache for
the whole run, set before JAX is imported anywhere; the tiny model the unit tests build (TINY,
tiny_config, tiny_model: `from conftest import ...`); the `run_script` and `read_csv` fixtures."""

import csv
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

# Once: pytest-xdist's workers inherit the environment this sets in the controlling process
# and load this file again before they import JAX. 8 fake CPU devices, and LLVM without its
# optimizations: it compiles the tests' programs in about a third of the time (a smoke train
# step: 3.0 s instead of 8.0 on a loaded core), and no test compares a value with one compiled
# under other flags (the golden losses are recorded and checked with the same LLVM flag, in
# processes of their own with one device).
TEST_XLA_FLAGS = ("--xla_force_host_platform_device_count=8", "--xla_backend_optimization_level=0")
_flags = os.environ.get("XLA_FLAGS", "").split()
os.environ["XLA_FLAGS"] = " ".join(_flags + [f for f in TEST_XLA_FLAGS if f not in _flags])
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache for the run: the workers and every process a test starts
# (they inherit the environment) compile each tiny program once, not once per process; a run
# of configs/smoke.py goes from 16 to 7 CPU-seconds when its programs are cached. Programs
# are keyed by their HLO, flags and devices, so a cached one is the one XLA would compile.
# A folder made here is the run's own and removed at its end; one set by the caller is kept.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="resnorm_jax_tests_xla_")
  os.environ["RESNORM_TEST_CACHE_OWNER"] = str(os.getpid())
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # every program
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_unconfigure(config):
  """The cache folder goes with the process that made it (the xdist controller, or the one
  pytest process)."""
  if os.environ.get("RESNORM_TEST_CACHE_OWNER") == str(os.getpid()):
    shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


# vocab = max_seq_len = d_model = d_ff: every table and kernel shares one shape ([8, 8],
# [2, 8, 8]), so the random initializers compile twice, not five times (seconds each here).
TINY = dict(vocab_size=8, num_layers=2, d_model=8, num_heads=2, d_ff=8, max_seq_len=8)


def tiny_config(shape: dict = TINY, **model):
  """The ModelConfig of configs/base.py with the model at `shape`, then `model`'s keys."""
  from configs import base
  from resnorm_jax.model.config_types import model_config_from

  c = base.get_config()
  c.model.update(shape)
  c.model.update(model)
  return model_config_from(c)


def tiny_model(shape: dict = TINY, **model):
  """The Transformer of tiny_config(shape, **model), parameters from seed 0."""
  from flax import nnx

  from resnorm_jax.model.transformer import Transformer

  return Transformer(tiny_config(shape, **model), rngs=nnx.Rngs(params=0))


def pytest_addoption(parser):
  parser.addoption(
    "--long",
    action="store_true",
    help="also run the tests marked `long` (skipped without it); `--long -m long` runs only them",
  )


def pytest_collection_modifyitems(config, items):
  """A test that takes `run_script` starts a process: it is `slow` without saying so. A `long`
  test is `slow` too, and skipped, saying how to run it, unless `--long` is given."""
  skip_long = pytest.mark.skip(reason="a long check: run with --long (CONTRIBUTING.md#tests)")
  run_long = config.getoption("--long")
  for item in items:
    if "run_script" in getattr(item, "fixturenames", ()):
      item.add_marker(pytest.mark.slow)
    if item.get_closest_marker("long"):
      item.add_marker(pytest.mark.slow)
      if not run_long:
        item.add_marker(skip_long)


@pytest.fixture
def run_script():
  """run(argv, timeout=120, **env): argv from the repository root, output captured.

  A `.py` first argument runs with this Python. The child sees one CPU device and LLVM
  without optimizations (it compiles in a third of the time; the numbers these runs print
  need only be finite), plus `env`. Every test that takes this fixture is marked `slow`.
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


def write_run_folder(run, records=None, *, curve: str = "metrics.jsonl", **files) -> str:
  """A run folder as a run and its sweep leave it, the one fake every test writes: each `files`
  entry (sweep_point, config, summary) written as <name>.json and `records`, when given, as
  `curve` (metrics.jsonl, or docs/runs/'s curve.jsonl excerpt), one JSON row per line."""
  import json
  import os

  run = str(run)
  os.makedirs(run, exist_ok=True)
  for name, obj in files.items():
    with open(os.path.join(run, f"{name}.json"), "w") as f:
      json.dump(obj, f)
  if records is not None:
    with open(os.path.join(run, curve), "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in records)
  return run


def fake_run(workdir, summary: dict, config: dict | None = None, point: dict | None = None) -> str:
  """A finished run folder as the sweep tests fake it: summary.json (completed, 2 steps,
  unigram entropy 3.3, unless `summary` says otherwise), and config.json (with its resolved
  depth) and sweep_point.json when given."""
  files = {"summary": {"status": "completed", "unigram_entropy": 3.3, "steps": 2, **summary}}
  if config is not None:
    files["config"] = {**config, "resolved_model": {"num_layers": config["model"]["num_layers"]}}
  if point is not None:
    files["sweep_point"] = point
  return write_run_folder(workdir, **files)


@pytest.fixture(scope="session")
def checkpoint_env(tmp_path_factory):
  """The checkpoint tests' subprocess environment: CPU, one persistent compilation cache."""
  cache = tmp_path_factory.mktemp("jax_cache")
  return {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "JAX_COMPILATION_CACHE_DIR": str(cache),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
  }


@pytest.fixture(scope="session")
def checkpoint_reference(checkpoint_env, tmp_path_factory):
  """An uninterrupted checkpoint_runs.STEPS-step run of the checkpoint tests' config: the
  metrics every resumed run must reproduce (tests/test_checkpoint_*.py)."""
  import checkpoint_runs as runs

  workdir = str(tmp_path_factory.mktemp("reference"))
  runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS))
  rows = runs.rows(workdir)
  assert [r["step"] for r in rows] == list(range(5, runs.STEPS + 1, 5))
  assert runs.ckpt_steps(workdir) == [35, 40]  # keep_checkpoints=2
  return workdir


def fill_disk_at_metrics_row(monkeypatch, from_step: int) -> None:
  """A full disk met by metrics.jsonl: MetricWriter.write raises ENOSPC (naming no file, as
  file.write does) for every row from `from_step` on."""
  import errno

  from resnorm_jax.train.writers import MetricWriter

  write = MetricWriter.write

  def full_disk(self, step, metrics):
    if step >= from_step:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    write(self, step, metrics)

  monkeypatch.setattr(MetricWriter, "write", full_disk)
