"""A damaged checkpoint is found and skipped, never restored: a truncated or bit-flipped data
file, a flipped bit in the metadata, no commit marker, garbled metadata, a renamed folder, an
unfinished save; all of them damaged is refused, not a fresh start; a full disk fails the run
in one line and the same command resumes it. The rules of the resume policy without a run:
tests/test_resume_policy.py."""

import glob
import json
import os
import shutil

import checkpoint_runs as runs
import pytest
from batchnorm_smoke import abstract_state as _abstract
from batchnorm_smoke import config as _config

from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import checkpoint_integrity

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
def test_damaged_latest_checkpoint_falls_back_to_previous(
  checkpoint_reference, tmp_path, capsys, damage
):
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  damage(os.path.join(workdir, "ckpt", "40"))
  config = _config()
  checkpointer = ckpt_lib.Checkpointer(os.path.join(workdir, "ckpt"))
  state, meta, step = checkpointer.restore_latest(_abstract(config), runs.run_dict(config))
  out = capsys.readouterr().out
  assert step == 35
  assert "checkpoint at step 40 is damaged" in out and "resuming from step 35" in out
  assert os.listdir(os.path.join(workdir, "ckpt", ckpt_lib.DAMAGED_DIR))[0].startswith("40-")
  # Moved aside, so the resumed run can save step 40 again (orbax refuses steps <= latest).
  assert checkpointer.save(state.replace(step=state.step + 5), meta)
  checkpointer.close()
  assert runs.ckpt_steps(workdir) == [35, 40]


@pytest.mark.slow  # reference: a training process
def test_a_flipped_bit_in_the_metadata_is_reported_and_skipped(
  checkpoint_reference, tmp_path, capsys
):
  """The resumed run took best_eval_loss from meta: 4.4561 became 0.4561 without a word."""
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  _flipped_bit_in_meta(os.path.join(workdir, "ckpt", "40"))
  _, meta, step = runs.restore(workdir)
  out = capsys.readouterr().out
  assert step == 35
  (eval_20,) = [r["eval/loss"] for r in runs.rows(checkpoint_reference) if r["step"] == 20]
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
  checkpoint_env, checkpoint_reference, tmp_path
):
  """Every save from step 21 on fails in orbax's thread (ENOSPC). It used to be noticed at
  the next save (step 28, a whole interval later), with ~460 lines of tracebacks, exit 2
  (bad input), no summary.json and metrics.jsonl ahead of every checkpoint."""
  workdir = str(tmp_path / "run")
  proc = runs.train(checkpoint_env, workdir, runs.STEPS, enospc_from=21)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 1, out[-3000:]
  assert "Traceback" not in out, out[-3000:]
  (line,) = [ln for ln in out.splitlines() if ln.startswith("error: ")]
  assert "saving the checkpoint of step 21 failed: No space left on device" in line
  assert "/ckpt/21." in line and "MB free of" in line and "resumes from step 14" in line
  summary = runs.summary(workdir)
  assert summary["status"] == "failed" and summary["steps"] == 14
  assert 21 < summary["failed_at_step"] < 28  # at the step after the save ended
  assert runs.ckpt_steps(workdir) == [7, 14]
  assert [r["step"] for r in runs.rows(workdir)] == [5, 10]  # never ahead of checkpoint 14
  (resume,) = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("resume:")]
  assert resume.strip().endswith(f"--workdir={workdir}")

  resumed = runs.ok(runs.train(checkpoint_env, workdir, runs.STEPS))  # space freed
  assert "resuming from step 14" in resumed.stdout
  assert runs.rows(workdir) == runs.rows(checkpoint_reference)
  assert runs.summary(workdir)["status"] == "completed"


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
  checkpoint_reference, tmp_path, capsys, record_step
):
  """ckpt/40 renamed 50 resumed "from step 50" with the state of step 40: rows no run has.
  The step its meta records (or, in a meta from before it did, the state's) decides."""
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  _renamed(workdir, 40, 50, record_step=record_step)
  _, _, step = runs.restore(workdir)
  out = capsys.readouterr().out
  assert step == 35
  (line,) = [ln for ln in out.splitlines() if "step 50 is damaged" in ln]
  assert "it holds the state of step 40, not 50: the folder was renamed" in line
  assert os.listdir(os.path.join(workdir, "ckpt", ckpt_lib.DAMAGED_DIR))[0].startswith("50-")
  only = runs.copy(
    checkpoint_reference, tmp_path / "only"
  )  # no intact one left: refused, not restarted
  shutil.rmtree(os.path.join(only, "ckpt", "35"))
  _renamed(only, 40, 50, record_step=record_step)
  with pytest.raises(ckpt_lib.CheckpointError, match=r"step 50: .*state of step 40, not 50"):
    runs.restore(only)


@pytest.mark.slow  # reference: a training process
def test_unfinished_save_is_ignored_and_removed(checkpoint_reference, tmp_path, capsys):
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  ckpt = os.path.join(workdir, "ckpt")
  os.rename(os.path.join(ckpt, "40"), os.path.join(ckpt, f"40{ckpt_lib.TMP_MARKER}-123"))
  _, _, step = runs.restore(workdir)
  assert step == 35
  assert "removing unfinished checkpoint 40.orbax-checkpoint-tmp-123" in capsys.readouterr().out
  assert sorted(os.listdir(ckpt)) == ["35"]


@pytest.mark.slow  # reference: a training process
def test_all_checkpoints_damaged_is_refused_not_restarted(checkpoint_reference, tmp_path):
  workdir = runs.copy(checkpoint_reference, tmp_path / "run")
  _flip_one_bit(os.path.join(workdir, "ckpt", "40"))
  _no_commit_marker(os.path.join(workdir, "ckpt", "35"))
  with pytest.raises(ckpt_lib.CheckpointError, match=r"none of the checkpoints.*\[35, 40\]"):
    runs.restore(workdir)
