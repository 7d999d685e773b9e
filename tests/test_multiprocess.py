"""Two CPU processes on this machine train like one process, and resume like one.

Each process is `python -m experiments.train ... --config.dist.*` with one fake CPU device;
jax.distributed connects them (gloo CPU collectives, this JAX's default) into a 2-device
mesh with the parameters and optimizer state sharded across the processes (fsdp=2), so
every step all-gathers and reduce-scatters between them and every checkpoint is written
collectively by both. The reference is one process on one device with the same global batch.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 3  # steps per launch: the 2-process run stops at N and resumes to 2N
RTOL = 1e-5  # float32; observed differences ~1e-7 (all-reduce order)
TIMEOUT = 240
COMMON = [
  "--config=configs/smoke.py",
  "--config.train.log_every=1",
  f"--config.train.checkpoint_every={N}",
  f"--config.train.eval_every={N}",
  "--config.train.eval_batches=1",
  # The first launch ends at step N: its eval there is an end-of-run one, which would use
  # final_eval_tokens (more batches) where the reference's is periodic. One batch for both.
  "--config.train.final_eval_tokens=1",
  "--config.diag.per_layer=false",
]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _env(cache_dir: str) -> dict:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  # One device per process; lowest backend optimization: the compile dominates these runs.
  env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1 --xla_backend_optimization_level=0"
  # The resumed launch compiles the same programs: read them from a persistent cache.
  env["JAX_COMPILATION_CACHE_DIR"] = cache_dir
  env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  return env


# experiments.train with a hook in the data pipeline: every step sleeps TEST_STEP_SLEEP
# seconds (a stand-in for a real step's length), and the process whose environment has
# TEST_SIGNAL_AT=step:signum sends itself that signal when it builds that step's batch.
HOOKED_TRAIN = """
import os, time
from resnorm_jax.data import batches
at = os.environ.get("TEST_SIGNAL_AT")
get_batch = batches.get_batch
def hooked(*args, **kwargs):
  time.sleep(float(os.environ.get("TEST_STEP_SLEEP", "0")))
  if at and kwargs["step"] == int(at.split(":")[0]):
    os.kill(os.getpid(), int(at.split(":")[1]))
  return get_batch(*args, **kwargs)
batches.get_batch = hooked
from absl import app
from experiments import train
from resnorm_jax.config import cli
app.run(train.main, flags_parser=cli.parse_flags_or_exit)
"""


def _start(args: list[str], env: dict, log: str, hooked: bool = False) -> subprocess.Popen:
  out = open(log, "w")
  entry = ["-c", HOOKED_TRAIN] if hooked else ["-m", "experiments.train"]
  return subprocess.Popen(
    [sys.executable, *entry, *COMMON, *args],
    cwd=ROOT,
    env=env,
    stdout=out,
    stderr=subprocess.STDOUT,
  )


def _launch_pair(
  workdir: str,
  steps: int,
  env: dict,
  tag: str,
  extra: tuple[str, ...] = (),
  env1: dict | None = None,
) -> list[subprocess.Popen]:
  """Two processes of one run; process 1 gets `env1` on top of `env` (and the data hook)."""
  port = _free_port()
  return [
    _start(
      [
        f"--workdir={workdir}",
        f"--config.train.steps={steps}",
        "--config.mesh.data=1",
        "--config.mesh.fsdp=-1",
        f"--config.dist.coordinator_address=127.0.0.1:{port}",
        "--config.dist.num_processes=2",
        f"--config.dist.process_id={i}",
        *extra,
      ],
      {**env, **(env1 or {})} if i == 1 else env,
      f"{workdir}.{tag}.p{i}.log",
      hooked=env1 is not None,
    )
    for i in range(2)
  ]


def _wait(procs: list[subprocess.Popen], logs: list[str], codes=(0,)) -> None:
  """Waits for all; kills the rest if one fails (a lone peer would wait for its partner).

  `codes`: the exit status expected of each process (one value: the same for all).
  """
  codes = codes * len(procs) if len(codes) == 1 else codes
  deadline = time.time() + TIMEOUT
  try:
    while any(p.poll() is None for p in procs):
      # Stop early only on an exit nobody expected: a process that ends as planned (a peer
      # killed on purpose) must leave the others time to end on their own.
      unexpected = any(p.poll() not in (None, c) for p, c in zip(procs, codes, strict=True))
      if time.time() > deadline or unexpected:
        break
      time.sleep(0.2)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  for p, log, code in zip(procs, logs, codes, strict=True):
    assert p.returncode == code, f"{log} (exit {p.returncode}):\n" + open(log).read()[-3000:]


def _losses(workdir: str) -> tuple[list[int], np.ndarray, dict]:
  rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
  evals = {r["step"]: r["eval/loss"] for r in rows if "eval/loss" in r}
  return [r["step"] for r in rows], np.array([r["train/loss"] for r in rows]), evals


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """(single-process workdir, 2-process workdir, 2-process logs of both launches)."""
  tmp = tmp_path_factory.mktemp("mp")
  single, multi = str(tmp / "single"), str(tmp / "multi")
  env = _env(str(tmp / "jax_cache"))
  # The 1-process reference runs alongside the first 2-process launch.
  ref = _start([f"--workdir={single}", f"--config.train.steps={2 * N}"], env, single + ".log")
  first = _launch_pair(multi, N, env, "first")
  _wait([*first, ref], [f"{multi}.first.p0.log", f"{multi}.first.p1.log", single + ".log"])
  first_steps = _losses(multi)[0]
  second = _launch_pair(multi, 2 * N, env, "second")  # both processes restart, resume at N
  logs = [f"{multi}.second.p{i}.log" for i in range(2)]
  _wait(second, logs)
  return single, multi, first_steps, [open(log).read() for log in logs]


@pytest.mark.slow  # runs fixture: two-process and one-process training
@pytest.mark.long  # two processes, three runs
def test_two_processes_match_one_and_resume(runs):
  single, multi, first_steps, second_logs = runs
  ref_steps, ref_losses, ref_evals = _losses(single)
  steps, losses, evals = _losses(multi)
  print(f"\n1 process : {ref_losses.tolist()} eval {ref_evals}")
  print(f"2 processes: {losses.tolist()} eval {evals} (resumed at step {N})")
  assert first_steps == list(range(1, N + 1))
  assert ref_steps == steps == list(range(1, 2 * N + 1))  # process 0 alone wrote each line
  assert ref_losses[-1] < ref_losses[0] - 0.2  # it trains
  np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
  assert sorted(evals) == sorted(ref_evals) == [N, 2 * N]
  np.testing.assert_allclose(
    [evals[k] for k in (N, 2 * N)], [ref_evals[k] for k in (N, 2 * N)], rtol=RTOL
  )
  for i, log in enumerate(second_logs):
    assert f"resuming from step {N}" in log, f"process {i} did not resume:\n{log[-2000:]}"
    assert "'fsdp': 2" in log  # one mesh over both processes' devices


@pytest.mark.slow  # the runs fixture's processes
@pytest.mark.long  # the runs fixture: two processes
def test_process_zero_writes_checkpoints_shared(runs):
  """Process 0 alone writes summary and TensorBoard; both write their checkpoint shards."""
  _, multi, _, _ = runs
  summary = json.load(open(os.path.join(multi, "summary.json")))
  assert summary["status"] == "completed" and summary["steps"] == 2 * N
  events = [f for f in os.listdir(multi) if f.startswith("events.out.tfevents.")]
  assert len([f for f in events if not f.endswith(".hparams")]) == 2  # one per launch
  assert len([f for f in events if f.endswith(".hparams")]) == 1  # the last launch's
  state = os.path.join(multi, "ckpt", str(2 * N), "state")
  assert {"ocdbt.process_0", "ocdbt.process_1"} <= set(os.listdir(state))


# --- jax.distributed.initialize: when, and with what -----------------------------------------

_ENV = (
  "JAX_COORDINATOR_ADDRESS",
  "TPU_WORKER_HOSTNAMES",
  "MEGASCALE_COORDINATOR_ADDRESS",
  "SLURM_NTASKS",
  "SLURM_PROCID",
  "SLURM_STEP_NODELIST",
  "OMPI_COMM_WORLD_SIZE",
  "OMPI_COMM_WORLD_RANK",
)


@pytest.mark.parametrize(
  "initialize, dist, env, expected",
  [
    ("auto", {}, {}, None),  # a plain single-process run
    ("auto", {"coordinator_address": "h:1", "num_processes": 2, "process_id": 1}, {},
     {"coordinator_address": "h:1", "num_processes": 2, "process_id": 1,
      "cluster_detection_method": "deactivate"}),
    ("auto", {}, {"SLURM_NTASKS": "16", "SLURM_PROCID": "3", "SLURM_STEP_NODELIST": "n[1-2]"}, {}),
    ("auto", {}, {"SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n1"}, None),
    ("auto", {}, {"SLURM_NTASKS": "16"}, None),  # an sbatch shell, not an srun step
    ("auto", {}, {"JAX_COORDINATOR_ADDRESS": "h:1"}, {}),
    ("false", {}, {"SLURM_NTASKS": "16", "SLURM_PROCID": "3", "SLURM_STEP_NODELIST": "n1"}, None),
    ("true", {}, {}, {}),  # TPU VM: everything from the metadata server
  ],
)  # fmt: skip
def test_distributed_initialize(monkeypatch, initialize, dist, env, expected):
  import jax

  from configs import base
  from resnorm_jax.train import sharding

  calls = []
  monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
  monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
  for key in _ENV:
    monkeypatch.delenv(key, raising=False)
  for key, value in env.items():
    monkeypatch.setenv(key, value)
  cfg = base.get_config().dist
  cfg.initialize = initialize
  for key, value in dist.items():
    setattr(cfg, key, value)
  assert sharding.maybe_initialize_distributed(cfg) is (expected is not None)
  assert calls == ([] if expected is None else [expected])


def test_distributed_initialize_refuses_bad_value():
  from configs import base
  from resnorm_jax.train import sharding

  cfg = base.get_config().dist
  cfg.initialize = "yes"
  with pytest.raises(ValueError, match="auto, true, false"):
    sharding.maybe_initialize_distributed(cfg)


# --- a signal to one process: every process stops at one step ---------------------------------

STOP_STEPS = 30
# Periodic checkpoints and evals out of the way: the interruption's is the only checkpoint.
STOP_ARGS = (
  "--config.train.checkpoint_every=1000",
  "--config.train.eval_every=1000",
  "--config.train.log_every=5",
)


@pytest.mark.slow  # two training processes
@pytest.mark.long  # two processes, three runs
def test_sigterm_to_one_process_stops_both_at_one_step_then_resumes_exactly(tmp_path):
  env = _env(str(tmp_path / "jax_cache"))
  env["TEST_STEP_SLEEP"] = "0.05"  # both processes: steps as long as the agreement needs
  ref, multi = str(tmp_path / "ref"), str(tmp_path / "multi")
  single = _start(
    [f"--workdir={ref}", f"--config.train.steps={STOP_STEPS}", *STOP_ARGS], env, ref + ".log"
  )
  pair = _launch_pair(
    multi, STOP_STEPS, env, "first", STOP_ARGS, env1={"TEST_SIGNAL_AT": f"4:{signal.SIGTERM}"}
  )
  logs = [f"{multi}.first.p{i}.log" for i in range(2)]
  _wait([*pair, single], [*logs, ref + ".log"])
  summary = json.load(open(os.path.join(multi, "summary.json")))
  stopped = summary["steps"]
  print(f"\nSIGTERM to process 1 at step 4: both stopped after step {stopped}")
  assert summary["status"] == "interrupted" and 4 < stopped < STOP_STEPS
  assert sorted(int(n) for n in os.listdir(os.path.join(multi, "ckpt")) if n.isdigit()) == [
    stopped
  ]  # one checkpoint, written by both processes together, at the agreed step
  state = os.path.join(multi, "ckpt", str(stopped), "state")
  assert {"ocdbt.process_0", "ocdbt.process_1"} <= set(os.listdir(state))
  for log in logs:
    text = open(log).read()
    assert f"interrupted (interrupted) at step {stopped}:" in text, log
    assert "thread=save_finalize] Reached preemption" not in text  # the loop alone asks
  # The same command again resumes there and ends where one uninterrupted process does.
  second = _launch_pair(multi, STOP_STEPS, env, "second", STOP_ARGS)
  _wait(second, [f"{multi}.second.p{i}.log" for i in range(2)])
  for i in range(2):
    assert f"resuming from step {stopped}" in open(f"{multi}.second.p{i}.log").read()
  ref_steps, ref_losses, _ = _losses(ref)
  steps, losses, _ = _losses(multi)
  assert steps == ref_steps and steps[-1] == STOP_STEPS
  np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
  assert json.load(open(os.path.join(multi, "summary.json")))["status"] == "completed"


@pytest.mark.slow  # two training processes
@pytest.mark.long  # two processes
def test_kill9_of_one_process_ends_the_other_with_a_message(tmp_path):
  env = _env(str(tmp_path / "jax_cache"))
  env["TEST_STEP_SLEEP"] = "0.05"
  multi = str(tmp_path / "multi")
  start = time.time()
  pair = _launch_pair(
    multi,
    STOP_STEPS,
    env,
    "kill",
    (*STOP_ARGS, "--config.dist.heartbeat_timeout_seconds=20"),
    env1={"TEST_SIGNAL_AT": f"4:{signal.SIGKILL}"},
  )
  logs = [f"{multi}.kill.p{i}.log" for i in range(2)]
  _wait(pair, logs, codes=(3, -signal.SIGKILL))  # preemption.EXIT_PEER_FAILED
  elapsed = time.time() - start
  survivor = open(logs[0]).read()
  print(f"\nkill -9 of process 1: process 0 exited after {elapsed:.0f} s (launch included)")
  assert "error: process 0 of 2: a step failed" in survivor
  assert "another process died" in survivor and "run the same command again" in survivor
  assert elapsed < TIMEOUT / 2
