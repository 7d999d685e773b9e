"""A run resumed from its checkpoints is the run that never stopped: extended, stopped by
SIGTERM and resumed bit for bit; kill -9 loses at most the steps since the last checkpoint;
BatchNorm's running averages come back; a diverged run keeps its last finite checkpoint; a
second signal exits at once. Compared with one uninterrupted reference run
(conftest.py's checkpoint_reference), every value but the wall-clock ones."""

import glob
import json
import os
import shlex
import signal
import socket
import subprocess
import sys

import checkpoint_runs as runs
import jax
import numpy as np
import pytest

from configs import smoke
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.train import checkpoint as ckpt_lib

# --- resume equivalence ------------------------------------------------------------------


@pytest.mark.slow  # training processes
@pytest.mark.long  # four runs in processes
def test_extend_finished_run_then_sigterm_then_resume_is_bit_identical(
  checkpoint_env, checkpoint_reference, tmp_path
):
  """20 steps (finished) -> extended to 40 and SIGTERM'd after step 27 -> resumed to 40."""
  workdir = str(tmp_path / "run")
  runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS // 2))
  assert runs.summary(workdir)["status"] == "completed" and runs.summary(workdir)["steps"] == 20

  interrupted = runs.ok(
    runs.train(checkpoint_env, workdir, runs.STEPS, signal_at=(26, signal.SIGTERM))
  )
  assert "resuming from step 20" in interrupted.stdout
  assert "signal 15: saving a checkpoint" in interrupted.stdout
  summary = runs.summary(workdir)
  assert summary["status"] == "interrupted" and summary["steps"] == 27
  assert runs.ckpt_steps(workdir)[-1] == 27  # saved at the step it stopped, mid log interval
  assert [r["step"] for r in runs.rows(workdir)] == [5, 10, 15, 20, 25]
  # The exact command that resumes it: the same arguments, with --workdir.
  (line,) = [ln for ln in interrupted.stdout.splitlines() if ln.strip().startswith("resume:")]
  resume = shlex.split(line.split(":", 1)[1])
  assert resume[:3] == ["python", "-m", "experiments.train"]
  assert resume[-1] == f"--workdir={workdir}"
  assert f"--config.train.steps={runs.STEPS}" in resume and runs.COMMON[0] in resume

  resumed = runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS))
  assert "resuming from step 27" in resumed.stdout
  assert (
    runs.summary(workdir)["status"] == "completed" and runs.summary(workdir)["steps"] == runs.STEPS
  )

  # Run once more: finished, so nothing is trained and nothing rewritten.
  files = sorted(f for f in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, f)))
  before = {f: open(os.path.join(workdir, f), "rb").read() for f in files}
  again = runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS))
  assert f"already completed at step {runs.STEPS}: nothing to do" in again.stdout
  after = sorted(f for f in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, f)))
  assert after == files
  assert {f: open(os.path.join(workdir, f), "rb").read() for f in files} == before

  assert runs.rows(workdir) == runs.rows(checkpoint_reference)


@pytest.mark.slow  # training processes
@pytest.mark.long  # runs in processes
def test_kill9_loses_at_most_the_steps_since_the_last_checkpoint(
  checkpoint_env, checkpoint_reference, tmp_path
):
  """SIGKILL right after the step-21 save started (maybe mid-write), then resume."""
  workdir = str(tmp_path / "run")
  killed = runs.train(checkpoint_env, workdir, runs.STEPS, signal_at=(21, signal.SIGKILL))
  assert killed.returncode == -signal.SIGKILL
  assert not os.path.exists(os.path.join(workdir, "summary.json"))
  committed = runs.ckpt_steps(workdir)
  assert committed[-1] in (14, 21), committed  # 21 unless its async write was cut short
  # The killed run's lock file is left behind, naming it; the kernel released its lock.
  lock = os.path.join(workdir, workdir_lib.LOCK_FILE)
  assert json.load(open(lock))["host"] == socket.gethostname()

  resumed = runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS))
  assert f"resuming from step {committed[-1]}" in resumed.stdout
  assert not glob.glob(os.path.join(workdir, "ckpt", f"*{ckpt_lib.TMP_MARKER}*"))
  assert runs.rows(workdir) == runs.rows(checkpoint_reference)
  assert not os.path.exists(lock)  # the resumed run took it over and removed it at its end


@pytest.mark.slow  # reference: a training process
@pytest.mark.long  # runs and a resume of BatchNorm
def test_batchnorm_running_averages_are_in_the_checkpoint(checkpoint_reference):
  state, meta, step = runs.restore(checkpoint_reference)
  assert step == runs.STEPS
  leaves = jax.tree_util.tree_flatten_with_path(state.model_state)[0]
  means = [np.asarray(x) for p, x in leaves if "mean" in jax.tree_util.keystr(p)]
  variances = [np.asarray(x) for p, x in leaves if "var" in jax.tree_util.keystr(p)]
  assert means and variances, [jax.tree_util.keystr(p) for p, _ in leaves]
  # Initialized to 0 and 1; after 40 training steps they have moved.
  assert all(np.abs(m).max() > 1e-3 for m in means)
  assert all(np.abs(v - 1).max() > 1e-3 for v in variances)
  assert meta["interval_losses"] == []  # 40 is a log boundary


# --- divergence and signals ----------------------------------------------------------------


@pytest.mark.slow  # training processes
def test_diverged_run_keeps_the_last_finite_checkpoint(checkpoint_env, tmp_path):
  """SGD at a ramping lr on a norm-free model blows up after a few steps."""
  workdir = str(tmp_path / "run")
  every = 4
  runs.ok(
    runs.train(
      checkpoint_env,
      workdir,
      40,
      "--config.model.norm=none",
      "--config.model.norm_position=none",
      "--config.opt.name=sgd",
      "--config.opt.lr=10.0",
      "--config.opt.warmup_steps=120",
      "--config.train.log_every=1",
      f"--config.train.checkpoint_every={every}",
      common=(),
    )
  )
  assert runs.summary(workdir)["status"] == "diverged"
  rows = runs.rows(workdir)
  bad = [r["step"] for r in rows if not np.isfinite(r["train/loss"])]
  assert bad, rows
  first_bad = bad[0]
  # The refused step leaves the state at first_bad - 1; had the loop saved on divergence,
  # a checkpoint at that step would exist. Make sure this run can tell the difference.
  assert (first_bad - 1) % every, f"diverged at {first_bad}: choose another checkpoint_every"
  last_good = (first_bad - 1) // every * every
  assert last_good > 0, f"diverged at {first_bad}, before the first checkpoint"
  assert runs.ckpt_steps(workdir)[-1] == last_good
  assert all(np.isfinite(r["train/loss"]) for r in rows if r["step"] <= last_good)
  config = smoke.get_config()
  config.model.norm, config.model.norm_position, config.opt.name = "none", "none", "sgd"
  config.opt.lr, config.opt.warmup_steps = 10.0, 120
  state, _, step = runs.restore(workdir, config, common=False)
  assert step == last_good
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state))


SECOND_SIGNAL = """
import os, signal, sys, time
from resnorm_jax.train.preemption import StopSignals
with StopSignals() as signals:
  os.kill(os.getpid(), signal.SIGTERM)
  print("first:", signals.received, flush=True)
  os.kill(os.getpid(), signal.SIGINT)
  time.sleep(30)
  print("survived the second signal", flush=True)
"""


@pytest.mark.slow  # a training process
def test_second_signal_exits_at_once(checkpoint_env):
  proc = subprocess.run(
    [sys.executable, "-c", SECOND_SIGNAL],
    cwd=runs.ROOT,
    env=checkpoint_env,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert "signal 15: saving a checkpoint" in proc.stdout and "first: 15" in proc.stdout
  assert "survived" not in proc.stdout
  assert proc.returncode == -signal.SIGINT  # the OS default action: immediate
