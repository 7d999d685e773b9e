"""A resume that would be another experiment is refused in one line, exit 2, nothing
written: a changed model key, an edited corpus file, another config in a completed workdir,
a changed optimizer structure, a second run in a live workdir; a completed run whose
checkpoints are gone is never trained again."""

import json
import os
import shutil
import socket
import subprocess
import time

import checkpoint_runs as runs
import pytest
from batchnorm_smoke import config as _config

from resnorm_jax.config import same_experiment
from resnorm_jax.runs import workdir as workdir_lib

# --- refusal -------------------------------------------------------------------------------


@pytest.mark.slow  # training processes
def test_changed_model_is_refused_with_the_key_and_exit_2(
  checkpoint_env, checkpoint_reference, tmp_path
):
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  before = {n: open(os.path.join(workdir, n)).read() for n in ("config.json", "metrics.jsonl")}
  proc = runs.train(checkpoint_env, workdir, runs.STEPS, "--config.model.num_layers=3")
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "model.num_layers (2 -> 3)" in proc.stderr
  after = {n: open(os.path.join(workdir, n)).read() for n in before}
  assert after == before  # nothing written
  assert runs.ckpt_steps(workdir) == [35, 40]


@pytest.mark.slow  # training processes
@pytest.mark.long  # runs in processes
def test_an_edited_corpus_is_refused_on_resume_naming_the_file(checkpoint_env, tmp_path):
  """A text corpus edited under the same path (same size) resumed silently: two corpora in
  one run. Now refused before anything compiles or is written, naming the file; the
  fingerprint is in config.json, in a section the sweeps do not compare."""
  corpus = tmp_path / "corpus.txt"
  shutil.copy(os.path.join(runs.ROOT, "data", "tinyshakespeare.txt"), corpus)
  workdir = str(tmp_path / "run")
  data = ("--config.data.source=text", f"--config.data.path={corpus}")
  runs.ok(runs.train(checkpoint_env, workdir, 10, *data))
  recorded = json.load(open(os.path.join(workdir, "config.json")))["data_files"]
  assert list(recorded["files"]) == [str(corpus)]
  assert "data_files" in same_experiment.RECORDED_NOT_CONFIG
  text = corpus.read_bytes()
  corpus.write_bytes(text[:1000] + text[1000:1001].swapcase() + text[1001:])
  before = runs.hashes(workdir)
  proc = runs.train(checkpoint_env, workdir, 20, *data)
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  (line,) = proc.stderr.strip().splitlines()
  assert "the data changed since the checkpoint of step 10" in line
  assert f"{corpus} (sha256 " in line
  assert "compiled in" not in proc.stdout
  assert runs.hashes(workdir) == before
  corpus.write_bytes(text)  # put back: the run goes on
  assert "resuming from step 10" in runs.ok(runs.train(checkpoint_env, workdir, 20, *data)).stdout


@pytest.mark.slow  # training processes
def test_completed_run_without_its_checkpoints_is_never_retrained(
  checkpoint_env, checkpoint_reference, tmp_path
):
  """ckpt/ deleted: the same command does nothing; extending it is refused, not restarted."""
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  shutil.rmtree(os.path.join(workdir, "ckpt"))
  before = runs.hashes(workdir)
  again = runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS))
  assert f"already completed at step {runs.STEPS}: nothing to do" in again.stdout
  assert runs.hashes(workdir) == before  # every file byte-identical, no ckpt/ created

  extend = runs.train(checkpoint_env, workdir, runs.STEPS + 10)
  assert extend.returncode == 2, extend.stdout[-2000:] + extend.stderr[-2000:]
  assert f"completed at step {runs.STEPS} but no checkpoint to train it to" in extend.stderr
  assert "starting from step 0" not in extend.stdout
  assert runs.hashes(workdir) == before


@pytest.mark.slow  # training processes
@pytest.mark.parametrize("steps", [runs.STEPS, runs.STEPS + 10])
def test_another_config_in_a_completed_workdir_is_refused(
  checkpoint_env, checkpoint_reference, tmp_path, steps
):
  """Same model, data and seed under another name: not "already completed" with the other
  run's numbers (runs.STEPS), nor a resume of its checkpoint (runs.STEPS + 10)."""
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  before = runs.hashes(workdir)
  proc = runs.train(checkpoint_env, workdir, steps, "--config.name=xiong_rescue")
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "differing keys: name ('smoke' -> 'xiong_rescue')" in proc.stderr
  assert "already completed" not in proc.stdout and "resuming" not in proc.stdout
  assert runs.hashes(workdir) == before  # nothing written, checkpoints included


@pytest.mark.slow  # training processes
@pytest.mark.long  # two runs in processes; the lock itself: test_workdir
def test_second_run_in_a_live_workdir_exits_2_naming_the_holder(
  checkpoint_env, checkpoint_reference, tmp_path
):
  """The same command twice at once: the second is refused before compiling, the first
  completes as if alone (its config, every logged value of the reference)."""
  workdir = str(tmp_path / "run")
  first = subprocess.Popen(
    runs.command(workdir, runs.STEPS, hooked=True),
    cwd=runs.ROOT,
    env={**checkpoint_env, "TEST_STEP_SLEEP": "0.5"},  # about 20 s of training
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
    second = runs.train(checkpoint_env, workdir, runs.STEPS)
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
  assert (
    runs.summary(workdir)["status"] == "completed" and runs.summary(workdir)["steps"] == runs.STEPS
  )
  assert runs.rows(workdir) == runs.rows(checkpoint_reference)
  assert not os.path.exists(os.path.join(workdir, workdir_lib.LOCK_FILE))


@pytest.mark.slow  # reference: a training process
def test_changed_optimizer_structure_is_refused(checkpoint_reference):
  config = _config(opt__name="sgd")
  with pytest.raises(ValueError, match=r"opt\.name \('adam' -> 'sgd'\)"):
    runs.restore(checkpoint_reference, config)
