"""Which config changes a checkpoint accepts on resume (resnorm_jax/train/resume_policy.py), on
its own without training: the frozen config leaves out run length and cadence, and a checkpoint
written before a key was added or moved resumes at the key's default or old value, and is
refused, naming the key, when the key changed. The end-to-end refusals (a changed model,
optimizer, data or config, a second run in a live workdir) run against the reference run of
tests/test_checkpoint_*.py.
"""

import json

import pytest
from batchnorm_smoke import abstract_state as _abstract
from batchnorm_smoke import config as _config

from resnorm_jax.config import cli, same_experiment
from resnorm_jax.train import resume_policy


def test_frozen_config_ignores_run_length_and_cadence():
  def changed(a, b):
    frozen_a, frozen_b = resume_policy.frozen_config(a), resume_policy.frozen_config(b)
    return same_experiment.changed_keys(frozen_a, frozen_b, resume_policy.CHECKPOINT)

  a, b = _config().to_dict(), _config(train__steps=999, train__checkpoint_every=3).to_dict()
  assert changed(a, b) == []
  assert changed(a, _config(model__residual="rezero").to_dict()) == ["model.residual"]


def test_checkpoint_predating_added_keys_resumes_at_their_defaults():
  config = _config().to_dict()
  old = resume_policy.frozen_config(config)
  for key, default in resume_policy.ADDED_KEYS.items():
    assert old[key] == default, key  # the schema's default
    del old[key]  # as in a checkpoint written before the key existed
  meta = {"frozen_config": old, "leaves": {}}
  resume_policy.check_compatible(meta, config, {}, "ckpt")  # no error: defaults match
  changed = _config(model__hyperconn_rate=2).to_dict()
  with pytest.raises(ValueError, match=r"model\.hyperconn_rate \(4 -> 2\)"):
    resume_policy.check_compatible(meta, changed, {}, "ckpt")


def test_checkpoint_predating_a_frozen_key_resumes_while_the_key_keeps_its_old_value():
  """A checkpoint written before model.attention existed resumes with attention=dense (what
  it ran), and is refused with attention=fused, naming the key."""
  config = _config()
  abstract = _abstract(config)
  frozen = resume_policy.frozen_config(config.to_dict())
  old = {k: v for k, v in frozen.items() if k not in resume_policy.ADDED_KEYS}
  assert "model.attention" in frozen and "model.attention" not in old
  leaves = {k: [*v, 0] for k, v in resume_policy._abstract_table(abstract).items()}
  meta = {"frozen_config": old, "leaves": leaves}
  resume_policy.check_compatible(meta, config.to_dict(), abstract, "ckpt")
  fused = _config(model__attention="fused").to_dict()
  with pytest.raises(ValueError, match=r"model\.attention \('dense' -> 'fused'\)"):
    resume_policy.check_compatible(meta, fused, abstract, "ckpt")


def test_checkpoint_predating_the_move_of_model_settings_resumes():
  """train.remat, scan_unroll and dtype moved to model.*: a checkpoint saved before reads
  them at the new place. dtype is frozen (from the saved config: train was not frozen),
  remat and scan_unroll may change on resume as before."""
  config = _config()
  abstract = _abstract(config)
  frozen = resume_policy.frozen_config(config.to_dict())
  assert frozen["model.dtype"] == "float32"
  assert "model.remat" not in frozen and "model.scan_unroll" not in frozen
  moved = {new: old for old, new in cli.MOVED_KEYS.items()}
  flat = resume_policy.flat_config(config.to_dict())
  saved_config = {moved.get(k, k): v for k, v in flat.items()}
  assert saved_config["train.dtype"] == "float32" and "model.dtype" not in saved_config
  old = {k: v for k, v in frozen.items() if k not in moved}  # the old frozen config
  leaves = {k: [*v, 0] for k, v in resume_policy._abstract_table(abstract).items()}
  meta = {"frozen_config": old, "config": saved_config, "leaves": leaves}
  resume_policy.check_compatible(meta, config.to_dict(), abstract, "ckpt")
  remat = _config(model__remat="full", model__scan_unroll=2)
  resume_policy.check_compatible(meta, remat.to_dict(), _abstract(remat), "ckpt")
  bf16 = _config(model__dtype="bfloat16")
  with pytest.raises(ValueError, match=r"model\.dtype \('float32' -> 'bfloat16'\)"):
    resume_policy.check_compatible(meta, bf16.to_dict(), _abstract(bf16), "ckpt")


def _recorded(steps):
  return {"train.steps": steps}


@pytest.mark.parametrize("schedule", ["constant", "inverse_sqrt", "cosine", "linear"])
def test_a_run_is_never_shortened_and_extended_only_under_a_schedule_of_no_total(schedule):
  config = _config(opt__schedule=schedule, opt__warmup_steps=2, train__steps=30)
  resume_policy.check_run_length(_recorded(30), "config.json", config, "w")  # as it is
  resume_policy.check_run_length(None, "", config, "w")  # nothing recorded: nothing to compare
  with pytest.raises(ValueError, match=r"train.steps=60 \(its config.json\): train.steps=30 would"):
    resume_policy.check_run_length(_recorded(60), "config.json", config, "w")
  longer = _config(opt__schedule=schedule, opt__warmup_steps=2, train__steps=60)
  if schedule in ("constant", "inverse_sqrt"):
    resume_policy.check_run_length(_recorded(30), "config.json", longer, "w")
  else:
    with pytest.raises(ValueError, match=rf"opt.schedule='{schedule}' depends on train.steps"):
      resume_policy.check_run_length(_recorded(30), "config.json", longer, "w")


def test_an_extension_is_recorded_once_per_change_of_length():
  meta = {"config": {"train.steps": 20}, "summary": {}}
  assert resume_policy.extension(meta, 20, 20) is None
  first = resume_policy.extension(meta, 40, 20)
  assert first == [{"step": 20, "from_steps": 20, "to_steps": 40}]
  later = {"config": {"train.steps": 40}, "summary": {"extended": first}}  # a later checkpoint
  assert resume_policy.extension(later, 40, 27) == first
  assert resume_policy.extension(later, 50, 40)[-1] == {
    "step": 40,
    "from_steps": 40,
    "to_steps": 50,
  }


def test_a_resume_keeps_the_wall_time_its_workdir_summary_ended_the_same_step_with(tmp_path):
  """The checkpoint's wall time is taken when its save begins; the interrupted run's
  summary.json, written after the save at the same step, holds the later one, which a resume
  keeps. A summary of another step, a damaged one or none leave the checkpoint's."""
  meta = {"summary": {"wall_seconds": 20.0}, "interval_losses": [1.5]}  # run_meta's: no step

  def resumed(written):
    if written is not None:
      (tmp_path / "summary.json").write_text(written)
    return resume_policy.resumed_run(meta, str(tmp_path), 8)[0]["wall_seconds"]

  assert resume_policy.resumed_run(meta)[0]["wall_seconds"] == 20.0
  assert resumed(None) == 20.0
  assert resumed(json.dumps({"steps": 8, "wall_seconds": 22.5, "status": "interrupted"})) == 22.5
  assert resumed(json.dumps({"steps": 10, "wall_seconds": 30.0})) == 20.0  # another step's
  assert resumed(json.dumps({"steps": 8, "wall_seconds": 12.0})) == 20.0  # never less
  assert resumed("{not json") == 20.0
  assert resume_policy.resumed_run(meta, str(tmp_path), 8)[1] == [1.5]


def test_a_summary_wall_time_the_files_cannot_carry_is_not_taken(tmp_path):
  """wall_seconds=1e9 hand-edited into summary.json was trusted on resume: a summary's wall
  time is taken only as far past the checkpoint's as the summary was written after it (the
  files' times, plus a minute), and only when finite."""
  meta = {"summary": {"wall_seconds": 20.0}, "interval_losses": []}
  (tmp_path / "ckpt" / "8").mkdir(parents=True)

  def resumed(wall):
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 8, "wall_seconds": wall}))
    return resume_policy.resumed_run(meta, str(tmp_path), 8)[0]["wall_seconds"]

  assert resumed(22.5) == 22.5  # written just after the save: its later time is kept
  assert resumed(1e9) == 20.0
  assert resumed(float("inf")) == 20.0
