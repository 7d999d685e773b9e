"""One run per workdir: the lock and completed runs (the end-to-end runs are in
test_checkpoint.py)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from resnorm_jax import cli
from resnorm_jax import workdir as workdir_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Holds the lock of argv[1] until its stdin closes.
HOLDER = """
import sys
from resnorm_jax import workdir
with workdir.hold(sys.argv[1]):
  print("held", flush=True)
  sys.stdin.read()
"""


# --- the lock ------------------------------------------------------------------------------


def test_a_held_workdir_is_refused_naming_the_holder(tmp_path):
  with workdir_lib.hold(str(tmp_path)) as path:
    info = json.load(open(path))
    assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
    # flock locks an open file: a second open, even in this process, is another holder.
    with pytest.raises(workdir_lib.WorkdirInUse) as e, workdir_lib.hold(str(tmp_path)):
      pass
    assert f"pid {os.getpid()} on host {socket.gethostname()}, started " in str(e.value)
    assert isinstance(e.value, ValueError)  # the entry point's exit status 2
  assert not os.path.exists(path)  # released and removed
  with workdir_lib.hold(str(tmp_path)):  # free again
    pass


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
  """The kernel drops a dead process's flock: its file (as kill -9 leaves it) is taken over."""
  holder = subprocess.Popen(
    [sys.executable, "-c", HOLDER, str(tmp_path)],
    cwd=ROOT,
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(workdir_lib.WorkdirInUse, match=f"pid {holder.pid} "):
      with workdir_lib.hold(str(tmp_path)):
        pass
  finally:
    holder.kill()
    holder.wait()
  lock = tmp_path / workdir_lib.LOCK_FILE
  assert json.loads(lock.read_text())["pid"] == holder.pid  # left behind by the kill
  with workdir_lib.hold(str(tmp_path)):
    assert json.loads(lock.read_text())["pid"] == os.getpid()


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_with_two_processes_process_0_locks_and_both_refuse_a_busy_workdir(tmp_path):
  """Process 0 finds the workdir held by another run: both processes exit 2 at once (the
  other one never locks: it would refuse every two-process run, test_multiprocess.py)."""
  workdir = str(tmp_path / "run")
  os.makedirs(workdir)
  holder = subprocess.Popen(
    [sys.executable, "-c", HOLDER, workdir],
    cwd=ROOT,
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
  )
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1")
  dist = [f"--config.dist.coordinator_address=127.0.0.1:{_free_port()}"]
  dist += ["--config.dist.num_processes=2", "--config.mesh.data=1", "--config.mesh.fsdp=-1"]
  logs = [open(tmp_path / f"p{i}.log", "w+") for i in range(2)]
  try:
    assert holder.stdout.readline().strip() == "held"
    procs = [
      subprocess.Popen(
        [sys.executable, "-m", "experiments.train", "--config=configs/smoke.py"]
        + [f"--workdir={workdir}", *dist, f"--config.dist.process_id={i}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
      )
      for i, log in enumerate(logs)
    ]
    for p in procs:
      try:
        p.wait(timeout=180)
      except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
  finally:
    holder.kill()
    holder.wait()
  out = []
  for log in logs:
    log.seek(0)
    out.append(log.read())
    log.close()
  assert [p.returncode for p in procs] == [2, 2], out
  assert f"in use by another run (pid {holder.pid} on host" in out[0], out[0]
  assert "in use by another run (process 0)" in out[1], out[1]
  assert "compiled in" not in out[0] + out[1]


def test_a_url_workdir_is_not_locked(capsys):
  with workdir_lib.hold("gs://bucket/run") as path:
    assert path is None
  assert "not locked against a second run" in capsys.readouterr().out


# --- completed runs --------------------------------------------------------------------------


def _completed(tmp_path, steps=20, status="completed") -> str:
  cli.write_json(str(tmp_path / "summary.json"), {"status": status, "steps": steps})
  return str(tmp_path)


def test_a_completed_run_is_recognised_without_its_checkpoints(tmp_path):
  workdir = _completed(tmp_path)
  summary = workdir_lib.completed_summary(workdir, 20, has_checkpoint=False)
  assert summary == {"status": "completed", "steps": 20}
  assert workdir_lib.completed_summary(workdir, 30, has_checkpoint=True) is None  # extend it
  for steps in (30, 10):  # no checkpoint to train it to another length from
    with pytest.raises(ValueError, match=rf"completed at step 20 but no checkpoint.*{steps}"):
      workdir_lib.completed_summary(workdir, steps, has_checkpoint=False)


@pytest.mark.parametrize("status", ["interrupted", "diverged"])
def test_an_unfinished_run_is_left_to_its_checkpoint(tmp_path, status):
  workdir = _completed(tmp_path, status=status)
  assert workdir_lib.completed_summary(workdir, 20, has_checkpoint=False) is None
  assert workdir_lib.completed_summary(str(tmp_path / "none"), 20, has_checkpoint=False) is None
