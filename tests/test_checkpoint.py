"""Checkpoints that never lose a run: resume, signals, kill -9, damage, refusal, divergence,
two runs in one workdir, a completed run without its checkpoints.

Most tests run `python -m experiments.train` on the smoke config in a subprocess and compare
metrics.jsonl with one uninterrupted reference run, bit for bit (every value but
tokens_per_second). The resume runs use model.norm=batchnorm, so the running averages must
come back too: eval/loss is computed with them. Subprocesses share a persistent
compilation cache, so each distinct program compiles once per session. The resume policy's
rules on their own, without a run, are tests/test_resume_policy.py.
"""

import glob
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from batchnorm_smoke import abstract_state as _abstract
from batchnorm_smoke import config as _config

from configs import smoke
from resnorm_jax.config import same_experiment
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import checkpoint_integrity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 40
# checkpoint_every=7 is not a multiple of log_every=5: resumes start mid log interval.
COMMON = (
  "--config.model.norm=batchnorm",
  "--config.train.log_every=5",
  "--config.train.eval_every=20",
  "--config.train.checkpoint_every=7",
  # A run extended past its end evaluated there as an end-of-run eval (final_eval_tokens:
  # more batches) where the uninterrupted reference's eval is periodic: one size for both.
  "--config.train.final_eval_tokens=1",
)
# Runs experiments.train, sending signal SIGNUM to itself when the batch of step AT is built
# (i.e. while step AT+1 is being prepared): a real signal at a chosen step, no polling race.
# TEST_STEP_SLEEP=S makes each batch take S seconds more (a longer run, same numbers).
# TEST_ENOSPC_FROM=N: every checkpoint save from step N on fails with ENOSPC (a full disk),
# in orbax's background thread, where a real one fails.
HOOKED_TRAIN = """
import errno, os, sys, time
from orbax.checkpoint._src.handlers import json_checkpoint_handler as jch
from resnorm_jax.data import batches
full_from = int(os.environ.get("TEST_ENOSPC_FROM", "0"))
save_fn = jch.JsonCheckpointHandler._save_fn
async def full_disk(self, x, directory):
  step = directory.parent.name.split(".")[0]
  if full_from and step.isdigit() and int(step) >= full_from:
    raise OSError(errno.ENOSPC, "No space left on device", str(directory / "metadata"))
  return await save_fn(self, x, directory)
jch.JsonCheckpointHandler._save_fn = full_disk
at, signum = (int(v) for v in os.environ.get("TEST_SIGNAL_AT", "-1:0").split(":"))
pause = float(os.environ.get("TEST_STEP_SLEEP", "0"))
get_batch = batches.get_batch
def hooked(*args, **kwargs):
  time.sleep(pause)
  if kwargs["step"] == at:
    os.kill(os.getpid(), signum)
  return get_batch(*args, **kwargs)
batches.get_batch = hooked
from absl import app
from experiments import train
from resnorm_jax.config import cli
app.run(train.main, flags_parser=cli.parse_flags_or_exit)
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
  cache = tmp_path_factory.mktemp("jax_cache")
  return {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "JAX_COMPILATION_CACHE_DIR": str(cache),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
  }


def _command(workdir, steps, *extra, hooked=False, common=COMMON):
  args = [
    f"--config={os.path.join(ROOT, 'configs', 'smoke.py')}",
    f"--workdir={workdir}",
    f"--config.train.steps={steps}",
    *common,
    *extra,
  ]
  entry = ["-c", HOOKED_TRAIN] if hooked else ["-m", "experiments.train"]
  return [sys.executable, *entry, *args]


def _train(env, workdir, steps, *extra, signal_at=None, enospc_from=None, common=COMMON):
  """Runs a training subprocess to its end; returns the CompletedProcess (text output)."""
  hooked = signal_at is not None or enospc_from is not None
  cmd = _command(workdir, steps, *extra, hooked=hooked, common=common)
  env = dict(env)
  if signal_at is not None:
    env["TEST_SIGNAL_AT"] = f"{signal_at[0]}:{int(signal_at[1])}"
  if enospc_from is not None:
    env["TEST_ENOSPC_FROM"] = str(enospc_from)
  return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _ok(proc):
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return proc


def _rows(workdir):
  """metrics.jsonl without the wall-clock fields and the end-of-run evals (a run extended
  past its first end has one at that step, which a run to the end at once has not)."""
  rows = read_metrics(os.path.join(workdir, "metrics.jsonl"))
  skip = ("tokens_per_second", "step_seconds", "eval/final_loss")
  return [{k: v for k, v in r.items() if k not in skip} for r in rows]


def _summary(workdir):
  with open(os.path.join(workdir, "summary.json")) as f:
    return json.load(f)


def _hashes(workdir):
  """{path under workdir: sha256} of every file, and every folder (None)."""
  out = {}
  for folder, dirs, files in os.walk(workdir):
    for name in dirs:
      out[os.path.relpath(os.path.join(folder, name), workdir)] = None
    for name in files:
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, workdir)] = hashlib.sha256(f.read()).hexdigest()
  return out


def _ckpt_steps(workdir):
  d = os.path.join(workdir, "ckpt")
  return sorted(int(n) for n in os.listdir(d) if n.isdigit())


@pytest.fixture(scope="module")
def reference(env, tmp_path_factory):
  """An uninterrupted STEPS-step run: the metrics every resumed run must reproduce."""
  workdir = str(tmp_path_factory.mktemp("reference"))
  _ok(_train(env, workdir, STEPS))
  rows = _rows(workdir)
  assert [r["step"] for r in rows] == list(range(5, STEPS + 1, 5))
  assert _ckpt_steps(workdir) == [35, 40]  # keep_checkpoints=2
  return workdir


def _copy(src, dst):
  shutil.copytree(src, dst)
  return str(dst)


def _run_dict(config, common=True):
  """The config as the loop hands it to a restore: the run's config with the data's fingerprint
  added (None for the stdlib corpus); with `common`, COMMON's end-of-run eval size. A restore
  checks the full config the checkpoint recorded, so it must be the run's."""
  config = config.copy_and_resolve_references()
  if common:
    config.train.final_eval_tokens = 1
  return {**config.to_dict(), "data_fingerprint": None}


def _restore(workdir, config=None, common=True):
  config = config or _config()
  checkpointer = ckpt_lib.Checkpointer(os.path.join(workdir, "ckpt"))
  try:
    return checkpointer.restore_latest(_abstract(config), _run_dict(config, common))
  finally:
    checkpointer.close()


# --- resume equivalence ------------------------------------------------------------------


@pytest.mark.slow  # training processes
@pytest.mark.long  # four runs in processes
def test_extend_finished_run_then_sigterm_then_resume_is_bit_identical(env, reference, tmp_path):
  """20 steps (finished) -> extended to 40 and SIGTERM'd after step 27 -> resumed to 40."""
  workdir = str(tmp_path / "run")
  _ok(_train(env, workdir, STEPS // 2))
  assert _summary(workdir)["status"] == "completed" and _summary(workdir)["steps"] == 20

  interrupted = _ok(_train(env, workdir, STEPS, signal_at=(26, signal.SIGTERM)))
  assert "resuming from step 20" in interrupted.stdout
  assert "signal 15: saving a checkpoint" in interrupted.stdout
  summary = _summary(workdir)
  assert summary["status"] == "interrupted" and summary["steps"] == 27
  assert _ckpt_steps(workdir)[-1] == 27  # saved at the step it stopped, mid log interval
  assert [r["step"] for r in _rows(workdir)] == [5, 10, 15, 20, 25]
  # The exact command that resumes it: the same arguments, with --workdir.
  (line,) = [ln for ln in interrupted.stdout.splitlines() if ln.strip().startswith("resume:")]
  resume = shlex.split(line.split(":", 1)[1])
  assert resume[:3] == ["python", "-m", "experiments.train"]
  assert resume[-1] == f"--workdir={workdir}"
  assert f"--config.train.steps={STEPS}" in resume and COMMON[0] in resume

  resumed = _ok(_train(env, workdir, STEPS))
  assert "resuming from step 27" in resumed.stdout
  assert _summary(workdir)["status"] == "completed" and _summary(workdir)["steps"] == STEPS

  # Run once more: finished, so nothing is trained and nothing rewritten.
  files = sorted(f for f in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, f)))
  before = {f: open(os.path.join(workdir, f), "rb").read() for f in files}
  again = _ok(_train(env, workdir, STEPS))
  assert f"already completed at step {STEPS}: nothing to do" in again.stdout
  after = sorted(f for f in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, f)))
  assert after == files
  assert {f: open(os.path.join(workdir, f), "rb").read() for f in files} == before

  assert _rows(workdir) == _rows(reference)


@pytest.mark.slow  # training processes
@pytest.mark.long  # runs in processes
def test_kill9_loses_at_most_the_steps_since_the_last_checkpoint(env, reference, tmp_path):
  """SIGKILL right after the step-21 save started (maybe mid-write), then resume."""
  workdir = str(tmp_path / "run")
  killed = _train(env, workdir, STEPS, signal_at=(21, signal.SIGKILL))
  assert killed.returncode == -signal.SIGKILL
  assert not os.path.exists(os.path.join(workdir, "summary.json"))
  committed = _ckpt_steps(workdir)
  assert committed[-1] in (14, 21), committed  # 21 unless its async write was cut short
  # The killed run's lock file is left behind, naming it; the kernel released its lock.
  lock = os.path.join(workdir, workdir_lib.LOCK_FILE)
  assert json.load(open(lock))["host"] == socket.gethostname()

  resumed = _ok(_train(env, workdir, STEPS))
  assert f"resuming from step {committed[-1]}" in resumed.stdout
  assert not glob.glob(os.path.join(workdir, "ckpt", f"*{ckpt_lib.TMP_MARKER}*"))
  assert _rows(workdir) == _rows(reference)
  assert not os.path.exists(lock)  # the resumed run took it over and removed it at its end


@pytest.mark.slow  # reference: a training process
@pytest.mark.long  # runs and a resume of BatchNorm
def test_batchnorm_running_averages_are_in_the_checkpoint(reference):
  state, meta, step = _restore(reference)
  assert step == STEPS
  leaves = jax.tree_util.tree_flatten_with_path(state.model_state)[0]
  means = [np.asarray(x) for p, x in leaves if "mean" in jax.tree_util.keystr(p)]
  variances = [np.asarray(x) for p, x in leaves if "var" in jax.tree_util.keystr(p)]
  assert means and variances, [jax.tree_util.keystr(p) for p, _ in leaves]
  # Initialized to 0 and 1; after 40 training steps they have moved.
  assert all(np.abs(m).max() > 1e-3 for m in means)
  assert all(np.abs(v - 1).max() > 1e-3 for v in variances)
  assert meta["interval_losses"] == []  # 40 is a log boundary


# --- damaged checkpoints ---------------------------------------------------------------------


def _biggest_data_file(step_dir):
  files = glob.glob(os.path.join(step_dir, "state", "**", "d", "*"), recursive=True)
  return max(files, key=os.path.getsize)


def _truncate(step_dir):
  path = _biggest_data_file(step_dir)
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def _flip_one_bit(step_dir):
  """A silent corruption: orbax restores this without complaint (no checksums)."""
  path = _biggest_data_file(step_dir)
  with open(path, "r+b") as f:
    f.seek(os.path.getsize(path) // 2)
    byte = f.read(1)[0]
    f.seek(-1, os.SEEK_CUR)
    f.write(bytes([byte ^ 0x10]))


def _flipped_bit_in_meta(step_dir):
  """best_eval_loss's first digit with its lowest bit flipped: still valid JSON, another
  number (the issue's 4.4561 -> 0.4561 was one such flip)."""
  path = os.path.join(step_dir, "meta", "metadata")
  text = open(path).read()
  at = text.index('"best_eval_loss": ') + len('"best_eval_loss": ')
  assert text[at].isdigit()
  with open(path, "w") as f:
    f.write(text[:at] + chr(ord(text[at]) ^ 1) + text[at + 1 :])


def _no_commit_marker(step_dir):
  os.remove(os.path.join(step_dir, ckpt_lib.COMMIT_MARKER))


def _garbled_meta(step_dir):
  with open(os.path.join(step_dir, "meta", "metadata"), "w") as f:
    f.write('{"leaves": ')


@pytest.mark.slow  # reference: a training process
@pytest.mark.parametrize(
  "damage", [_truncate, _flip_one_bit, _flipped_bit_in_meta, _no_commit_marker, _garbled_meta]
)
def test_damaged_latest_checkpoint_falls_back_to_previous(reference, tmp_path, capsys, damage):
  workdir = _copy(reference, tmp_path / "run")
  damage(os.path.join(workdir, "ckpt", "40"))
  config = _config()
  checkpointer = ckpt_lib.Checkpointer(os.path.join(workdir, "ckpt"))
  state, meta, step = checkpointer.restore_latest(_abstract(config), _run_dict(config))
  out = capsys.readouterr().out
  assert step == 35
  assert "checkpoint at step 40 is damaged" in out and "resuming from step 35" in out
  assert os.listdir(os.path.join(workdir, "ckpt", ckpt_lib.DAMAGED_DIR))[0].startswith("40-")
  # Moved aside, so the resumed run can save step 40 again (orbax refuses steps <= latest).
  assert checkpointer.save(state.replace(step=state.step + 5), meta)
  checkpointer.close()
  assert _ckpt_steps(workdir) == [35, 40]


@pytest.mark.slow  # reference: a training process
def test_a_flipped_bit_in_the_metadata_is_reported_and_skipped(reference, tmp_path, capsys):
  """The resumed run took best_eval_loss from meta: 4.4561 became 0.4561 without a word."""
  workdir = _copy(reference, tmp_path / "run")
  _flipped_bit_in_meta(os.path.join(workdir, "ckpt", "40"))
  _, meta, step = _restore(workdir)
  out = capsys.readouterr().out
  assert step == 35
  (eval_20,) = [r["eval/loss"] for r in _rows(reference) if r["step"] == 20]
  assert meta["summary"]["best_eval_loss"] == eval_20  # the only eval before step 35
  (line,) = [ln for ln in out.splitlines() if "step 40 is damaged" in ln]
  assert "meta does not match its sha256" in line


def test_meta_from_before_checksums_is_read_and_a_lost_checksum_is_damage():
  meta = {"leaves": {}, "summary": {"best_eval_loss": 4.4561}}
  checkpoint_integrity.check_meta(meta)  # written before checksums: read as it is
  sealed = checkpoint_integrity.sealed(meta)
  checkpoint_integrity.check_meta(json.loads(json.dumps(sealed)))  # what a save writes reads back
  for damaged in (
    {**sealed, "summary": {"best_eval_loss": 0.4561}},
    # the key's name hit
    {k: v for k, v in sealed.items() if k != checkpoint_integrity.META_CHECKSUM},
  ):
    with pytest.raises(ValueError, match="sha256"):
      checkpoint_integrity.check_meta(damaged)


@pytest.mark.slow  # training processes
@pytest.mark.long  # runs in processes; a real full disk: test_edge_faults
def test_full_disk_fails_the_run_in_one_line_and_the_same_command_resumes_it(
  env, reference, tmp_path
):
  """Every save from step 21 on fails in orbax's thread (ENOSPC). It used to be noticed at
  the next save (step 28, a whole interval later), with ~460 lines of tracebacks, exit 2
  (bad input), no summary.json and metrics.jsonl ahead of every checkpoint."""
  workdir = str(tmp_path / "run")
  proc = _train(env, workdir, STEPS, enospc_from=21)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 1, out[-3000:]
  assert "Traceback" not in out, out[-3000:]
  (line,) = [ln for ln in out.splitlines() if ln.startswith("error: ")]
  assert "saving the checkpoint of step 21 failed: No space left on device" in line
  assert "/ckpt/21." in line and "MB free of" in line and "resumes from step 14" in line
  summary = _summary(workdir)
  assert summary["status"] == "failed" and summary["steps"] == 14
  assert 21 < summary["failed_at_step"] < 28  # at the step after the save ended
  assert _ckpt_steps(workdir) == [7, 14]
  assert [r["step"] for r in _rows(workdir)] == [5, 10]  # never ahead of checkpoint 14
  (resume,) = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("resume:")]
  assert resume.strip().endswith(f"--workdir={workdir}")

  resumed = _ok(_train(env, workdir, STEPS))  # space freed
  assert "resuming from step 14" in resumed.stdout
  assert _rows(workdir) == _rows(reference)
  assert _summary(workdir)["status"] == "completed"


def _renamed(workdir, old, new, *, record_step=True):
  """ckpt/<old> renamed ckpt/<new>; without `record_step`, its meta as one written before the
  step was recorded (no step, no checksum)."""
  step_dir = os.path.join(workdir, "ckpt", str(old))
  if not record_step:
    path = os.path.join(step_dir, "meta", "metadata")
    meta = json.load(open(path))
    for key in (ckpt_lib.STEP, *checkpoint_integrity.META_VERSION[:1]):
      meta.pop(key)
    meta.pop(checkpoint_integrity.META_CHECKSUM)
    with open(path, "w") as f:
      json.dump(meta, f)
  os.rename(step_dir, os.path.join(workdir, "ckpt", str(new)))


@pytest.mark.slow  # reference: a training process
@pytest.mark.parametrize("record_step", [True, False])
def test_a_renamed_checkpoint_folder_is_damage_not_a_resume_from_its_name(
  reference, tmp_path, capsys, record_step
):
  """ckpt/40 renamed 50 resumed "from step 50" with the state of step 40: rows no run has.
  The step its meta records (or, in a meta from before it did, the state's) decides."""
  workdir = _copy(reference, tmp_path / "run")
  _renamed(workdir, 40, 50, record_step=record_step)
  _, _, step = _restore(workdir)
  out = capsys.readouterr().out
  assert step == 35
  (line,) = [ln for ln in out.splitlines() if "step 50 is damaged" in ln]
  assert "it holds the state of step 40, not 50: the folder was renamed" in line
  assert os.listdir(os.path.join(workdir, "ckpt", ckpt_lib.DAMAGED_DIR))[0].startswith("50-")
  only = _copy(reference, tmp_path / "only")  # no intact one left: refused, not restarted
  shutil.rmtree(os.path.join(only, "ckpt", "35"))
  _renamed(only, 40, 50, record_step=record_step)
  with pytest.raises(ckpt_lib.CheckpointError, match=r"step 50: .*state of step 40, not 50"):
    _restore(only)


@pytest.mark.slow  # reference: a training process
def test_unfinished_save_is_ignored_and_removed(reference, tmp_path, capsys):
  workdir = _copy(reference, tmp_path / "run")
  ckpt = os.path.join(workdir, "ckpt")
  os.rename(os.path.join(ckpt, "40"), os.path.join(ckpt, f"40{ckpt_lib.TMP_MARKER}-123"))
  _, _, step = _restore(workdir)
  assert step == 35
  assert "removing unfinished checkpoint 40.orbax-checkpoint-tmp-123" in capsys.readouterr().out
  assert sorted(os.listdir(ckpt)) == ["35"]


@pytest.mark.slow  # reference: a training process
def test_all_checkpoints_damaged_is_refused_not_restarted(reference, tmp_path):
  workdir = _copy(reference, tmp_path / "run")
  _flip_one_bit(os.path.join(workdir, "ckpt", "40"))
  _no_commit_marker(os.path.join(workdir, "ckpt", "35"))
  with pytest.raises(ckpt_lib.CheckpointError, match=r"none of the checkpoints.*\[35, 40\]"):
    _restore(workdir)


# --- refusal -------------------------------------------------------------------------------


@pytest.mark.slow  # training processes
def test_changed_model_is_refused_with_the_key_and_exit_2(env, reference, tmp_path):
  workdir = _copy(reference, tmp_path / "run")
  before = {n: open(os.path.join(workdir, n)).read() for n in ("config.json", "metrics.jsonl")}
  proc = _train(env, workdir, STEPS, "--config.model.num_layers=3")
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "model.num_layers (2 -> 3)" in proc.stderr
  after = {n: open(os.path.join(workdir, n)).read() for n in before}
  assert after == before  # nothing written
  assert _ckpt_steps(workdir) == [35, 40]


@pytest.mark.slow  # training processes
@pytest.mark.long  # runs in processes
def test_an_edited_corpus_is_refused_on_resume_naming_the_file(env, tmp_path):
  """A text corpus edited under the same path (same size) resumed silently: two corpora in
  one run. Now refused before anything compiles or is written, naming the file; the
  fingerprint is in config.json, in a section the sweeps do not compare."""
  corpus = tmp_path / "corpus.txt"
  shutil.copy(os.path.join(ROOT, "data", "tinyshakespeare.txt"), corpus)
  workdir = str(tmp_path / "run")
  data = ("--config.data.source=text", f"--config.data.path={corpus}")
  _ok(_train(env, workdir, 10, *data))
  recorded = json.load(open(os.path.join(workdir, "config.json")))["data_files"]
  assert list(recorded["files"]) == [str(corpus)]
  assert "data_files" in same_experiment.RECORDED_NOT_CONFIG
  text = corpus.read_bytes()
  corpus.write_bytes(text[:1000] + text[1000:1001].swapcase() + text[1001:])
  before = _hashes(workdir)
  proc = _train(env, workdir, 20, *data)
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  (line,) = proc.stderr.strip().splitlines()
  assert "the data changed since the checkpoint of step 10" in line
  assert f"{corpus} (sha256 " in line
  assert "compiled in" not in proc.stdout
  assert _hashes(workdir) == before
  corpus.write_bytes(text)  # put back: the run goes on
  assert "resuming from step 10" in _ok(_train(env, workdir, 20, *data)).stdout


@pytest.mark.slow  # training processes
def test_completed_run_without_its_checkpoints_is_never_retrained(env, reference, tmp_path):
  """ckpt/ deleted: the same command does nothing; extending it is refused, not restarted."""
  workdir = _copy(reference, tmp_path / "run")
  shutil.rmtree(os.path.join(workdir, "ckpt"))
  before = _hashes(workdir)
  again = _ok(_train(env, workdir, STEPS))
  assert f"already completed at step {STEPS}: nothing to do" in again.stdout
  assert _hashes(workdir) == before  # every file byte-identical, no ckpt/ created

  extend = _train(env, workdir, STEPS + 10)
  assert extend.returncode == 2, extend.stdout[-2000:] + extend.stderr[-2000:]
  assert f"completed at step {STEPS} but no checkpoint to train it to" in extend.stderr
  assert "starting from step 0" not in extend.stdout
  assert _hashes(workdir) == before


@pytest.mark.slow  # training processes
@pytest.mark.parametrize("steps", [STEPS, STEPS + 10])
def test_another_config_in_a_completed_workdir_is_refused(env, reference, tmp_path, steps):
  """Same model, data and seed under another name: not "already completed" with the other
  run's numbers (STEPS), nor a resume of its checkpoint (STEPS + 10)."""
  workdir = _copy(reference, tmp_path / "run")
  before = _hashes(workdir)
  proc = _train(env, workdir, steps, "--config.name=xiong_rescue")
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "differing keys: name ('smoke' -> 'xiong_rescue')" in proc.stderr
  assert "already completed" not in proc.stdout and "resuming" not in proc.stdout
  assert _hashes(workdir) == before  # nothing written, checkpoints included


@pytest.mark.slow  # training processes
@pytest.mark.long  # two runs in processes; the lock itself: test_workdir
def test_second_run_in_a_live_workdir_exits_2_naming_the_holder(env, reference, tmp_path):
  """The same command twice at once: the second is refused before compiling, the first
  completes as if alone (its config, every logged value of the reference)."""
  workdir = str(tmp_path / "run")
  first = subprocess.Popen(
    _command(workdir, STEPS, hooked=True),
    cwd=ROOT,
    env={**env, "TEST_STEP_SLEEP": "0.5"},  # about 20 s of training
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  try:
    deadline = time.time() + 240
    while not os.path.exists(os.path.join(workdir, "metrics.jsonl")):  # it is training
      assert first.poll() is None and time.time() < deadline, first.communicate()[0][-3000:]
      time.sleep(0.2)
    config = open(os.path.join(workdir, "config.json"), "rb").read()
    t0 = time.time()
    second = _train(env, workdir, STEPS)
    seconds = time.time() - t0
    assert first.poll() is None, "the first run ended before the second was refused"
  finally:
    out = first.communicate(timeout=300)[0]
  assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
  holder = f"in use by another run (pid {first.pid} on host {socket.gethostname()}, started "
  assert holder in second.stderr and seconds < 60, (seconds, second.stderr)
  assert "compiled in" not in second.stdout and "resuming" not in second.stdout
  assert first.returncode == 0, out[-3000:]
  assert open(os.path.join(workdir, "config.json"), "rb").read() == config
  assert _summary(workdir)["status"] == "completed" and _summary(workdir)["steps"] == STEPS
  assert _rows(workdir) == _rows(reference)
  assert not os.path.exists(os.path.join(workdir, workdir_lib.LOCK_FILE))


@pytest.mark.slow  # reference: a training process
def test_changed_optimizer_structure_is_refused(reference):
  config = _config(opt__name="sgd")
  with pytest.raises(ValueError, match=r"opt\.name \('adam' -> 'sgd'\)"):
    _restore(reference, config)


# --- divergence and signals ----------------------------------------------------------------


@pytest.mark.slow  # training processes
def test_diverged_run_keeps_the_last_finite_checkpoint(env, tmp_path):
  """SGD at a ramping lr on a norm-free model blows up after a few steps."""
  workdir = str(tmp_path / "run")
  every = 4
  _ok(
    _train(
      env,
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
  assert _summary(workdir)["status"] == "diverged"
  rows = _rows(workdir)
  bad = [r["step"] for r in rows if not np.isfinite(r["train/loss"])]
  assert bad, rows
  first_bad = bad[0]
  # The refused step leaves the state at first_bad - 1; had the loop saved on divergence,
  # a checkpoint at that step would exist. Make sure this run can tell the difference.
  assert (first_bad - 1) % every, f"diverged at {first_bad}: choose another checkpoint_every"
  last_good = (first_bad - 1) // every * every
  assert last_good > 0, f"diverged at {first_bad}, before the first checkpoint"
  assert _ckpt_steps(workdir)[-1] == last_good
  assert all(np.isfinite(r["train/loss"]) for r in rows if r["step"] <= last_good)
  config = smoke.get_config()
  config.model.norm, config.model.norm_position, config.opt.name = "none", "none", "sgd"
  config.opt.lr, config.opt.warmup_steps = 10.0, 120
  state, _, step = _restore(workdir, config, common=False)
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
def test_second_signal_exits_at_once(env):
  proc = subprocess.run(
    [sys.executable, "-c", SECOND_SIGNAL],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert "signal 15: saving a checkpoint" in proc.stdout and "first: 15" in proc.stdout
  assert "survived" not in proc.stdout
  assert proc.returncode == -signal.SIGINT  # the OS default action: immediate
