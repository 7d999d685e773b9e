"""One run per workdir and one experiment: the lock, run identity, completed runs (no JAX;
the end-to-end runs are in test_checkpoint_*.py)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from resnorm_jax.config import cli, same_experiment
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs import workdir_lock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Holds the lock of argv[1] until its stdin closes.
HOLDER = """
import sys
from resnorm_jax.runs import workdir
with workdir.hold(sys.argv[1]):
  print("held", flush=True)
  sys.stdin.read()
"""


def _changed(recorded: dict, config: dict) -> list[str]:
  return same_experiment.changed_keys(recorded, config, same_experiment.WORKDIR)


def _config(spec: str, **overrides) -> dict:
  config = cli.load_config_file(os.path.join(ROOT, spec))
  config.update_from_flattened_dict(overrides)
  return json.loads(json.dumps(config.to_dict(), default=str))


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


@pytest.mark.slow  # a lock-holding process
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


@pytest.mark.slow  # lock-holding processes
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


def test_a_symlinked_lock_file_is_refused_and_its_target_left_unchanged(tmp_path):
  """A `.lock` linked to a file elsewhere: that file was truncated and overwritten with the
  holder's JSON. The link is never followed: refused (exit status 2), the target as it was."""
  workdir = tmp_path / "run"
  workdir.mkdir()
  target = tmp_path / "precious.txt"
  target.write_text("data that is not the lock's\n")
  os.symlink(target, workdir / workdir_lib.LOCK_FILE)
  with pytest.raises(workdir_lock.SymlinkedLock) as e, workdir_lib.hold(str(workdir)):
    pass
  assert isinstance(e.value, ValueError)  # the entry point's exit status 2
  assert f"{workdir / workdir_lib.LOCK_FILE} is a symbolic link (to '{target}')" in str(e.value)
  assert target.read_text() == "data that is not the lock's\n"
  assert os.path.islink(workdir / workdir_lib.LOCK_FILE)  # left for its owner to remove
  dangling = tmp_path / "dangling"
  dangling.mkdir()
  os.symlink(tmp_path / "nowhere", dangling / workdir_lib.LOCK_FILE)  # O_CREAT would make it
  with pytest.raises(workdir_lock.SymlinkedLock), workdir_lib.hold(str(dangling)):
    pass
  assert not (tmp_path / "nowhere").exists()


def test_a_url_workdir_is_not_locked(capsys):
  with workdir_lib.hold("gs://bucket/run") as path:
    assert path is None
  assert "not locked against a second run" in capsys.readouterr().out


# --- run identity --------------------------------------------------------------------------


def test_another_named_config_is_another_experiment():
  """Same model, data and seed: xiong_rescue:smoke is not postnorm_96L:smoke."""
  postnorm = _config("configs/postnorm_96L.py:smoke")
  xiong = _config("configs/xiong_rescue.py:smoke")
  assert _changed(postnorm, xiong) == ["name", "opt.warmup_steps"]
  renamed = _config("configs/postnorm_96L.py:smoke", name="other")
  assert _changed(postnorm, renamed) == ["name"]


def test_a_rerun_may_extend_the_run_and_change_logging_or_layout_only():
  recorded = _config("configs/smoke.py")
  same = {
    "train.steps": 400,
    "train.log_every": 1,
    "train.checkpoint_every": 3,
    "diag.per_layer": False,
    "model.remat": "full",
    "mesh.data": 2,
  }
  assert _changed(recorded, _config("configs/smoke.py", **same)) == []
  other = _config("configs/smoke.py", **{"opt.lr": 2e-3, "seed": 1, "train.batch_size": 4})
  assert _changed(recorded, other) == ["opt.lr", "seed", "train.batch_size"]


def test_config_json_from_before_a_schema_change_is_the_same_experiment():
  """A key added since (at its default) and a key that moved (at its new place)."""
  config = _config("configs/smoke.py")
  old = json.loads(json.dumps(config))
  del old["model"]["hyperconn_rate"]
  old["train"]["dtype"] = old["model"].pop("dtype")
  old["resolved_model"], old["data_split"] = {"alpha": 1.0}, {"method": "tail"}
  assert _changed(old, config) == []
  changed = _config("configs/smoke.py", **{"model.hyperconn_rate": 2})
  assert _changed(old, changed) == ["model.hyperconn_rate"]


def test_another_experiment_is_refused_naming_the_keys(tmp_path):
  cli.write_json(str(tmp_path / "config.json"), _config("configs/postnorm_96L.py:smoke"))
  workdir_lib.check_same_experiment(str(tmp_path), _config("configs/postnorm_96L.py:smoke"))
  with pytest.raises(ValueError) as e:
    workdir_lib.check_same_experiment(str(tmp_path), _config("configs/xiong_rescue.py:smoke"))
  msg = str(e.value)
  assert "name ('postnorm_96L-smoke' -> 'xiong_rescue-smoke')" in msg
  assert "opt.warmup_steps (0 -> 2)" in msg and "new --workdir" in msg
  workdir_lib.check_same_experiment(str(tmp_path / "empty"), {"name": "x"})  # holds none


# --- completed runs --------------------------------------------------------------------------


def _completed(tmp_path, steps=20, status="completed") -> str:
  cli.write_json(str(tmp_path / "summary.json"), {"status": status, "steps": steps})
  return str(tmp_path)


def test_a_completed_run_is_recognised_without_its_checkpoints(tmp_path):
  workdir = _completed(tmp_path)
  summary = workdir_lib.completed_summary(workdir, 20, has_checkpoint=False)
  assert summary == {"status": "completed", "steps": 20}
  assert workdir_lib.completed_summary(workdir, 30, has_checkpoint=True) is None  # extend it
  with pytest.raises(ValueError, match=r"completed at step 20 but no checkpoint.*30"):
    workdir_lib.completed_summary(workdir, 30, has_checkpoint=False)  # nothing to extend from
  for has_checkpoint in (True, False):  # never shortened, with or without its checkpoints
    with pytest.raises(ValueError, match=r"completed at step 20: train.steps=10 is shorter"):
      workdir_lib.completed_summary(workdir, 10, has_checkpoint=has_checkpoint)


@pytest.mark.parametrize("status", ["interrupted", "diverged"])
def test_an_unfinished_run_is_left_to_its_checkpoint(tmp_path, status):
  workdir = _completed(tmp_path, status=status)
  assert workdir_lib.completed_summary(workdir, 20, has_checkpoint=False) is None
  assert workdir_lib.completed_summary(str(tmp_path / "none"), 20, has_checkpoint=False) is None
