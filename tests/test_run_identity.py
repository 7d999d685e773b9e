"""A run's identity decides every resume, with or without its config.json: a resume that
changes the optimizer, the lr or the length (shorter, or extended under a schedule of the
total) is refused; a completed run is not shortened, and its summary rebuilt from its last
checkpoint keeps its rate. Each was a wrong result without a word before."""

import json
import shutil

import pytest

from configs import smoke
from resnorm_jax.train import resume_policy


def _smoke(**overrides):
  config = smoke.get_config()
  for key, value in overrides.items():
    section, name = key.split("__")
    config[section][name] = value
  return config


# --- 1. a run's identity survives a lost config.json -----------------------------------------


@pytest.mark.parametrize(
  "changes, named",
  [
    ({"opt__lr": 2e-3}, "opt.lr (0.001 -> 0.002)"),
    ({"opt__schedule": "cosine"}, "opt.schedule ("),
    ({"opt__warmup_steps": 7}, "opt.warmup_steps ("),
    ({"opt__weight_decay": 0.5}, "opt.weight_decay ("),
  ],
)
def test_a_checkpoint_refuses_a_resume_that_changes_the_optimizer(changes, named):
  """The checkpoint's frozen keys let opt.lr, the schedule and the warmup change; only
  config.json refused them, so with it lost a resume trained one run at two settings."""
  saved = resume_policy.run_meta(_smoke().to_dict(), [], {})
  resume_policy.check_same_run(saved, _smoke().to_dict(), "ckpt")  # the same run resumes
  longer = _smoke(train__steps=99, train__log_every=3, model__remat="full")
  resume_policy.check_same_run(saved, longer.to_dict(), "ckpt")  # length, logging, speed may change
  with pytest.raises(ValueError, match="another experiment") as e:
    resume_policy.check_same_run(saved, _smoke(**changes).to_dict(), "ckpt")
  assert named in str(e.value) and "new --workdir" in str(e.value)


def _run_smoke(workdir, **overrides):
  from resnorm_jax.train import loop

  config = _smoke(train__checkpoint_every=2, train__eval_every=2, train__log_every=2)
  for key, value in overrides.items():
    section, name = key.split("__")
    config[section][name] = value
  return loop.run(config, str(workdir))


@pytest.mark.slow  # trains
@pytest.mark.parametrize("damage", ["deleted", pytest.param("truncated", marks=pytest.mark.long)])
def test_a_lost_config_json_does_not_let_a_resume_change_the_lr(tmp_path, capsys, damage):
  """config.json deleted or truncated (a full disk, a bad copy), then a resume with another
  lr, schedule and warmup exited 0 with the two settings in one run."""
  workdir = tmp_path / "run"
  _run_smoke(workdir, train__steps=4)
  path = workdir / "config.json"
  if damage == "deleted":
    path.unlink()
  else:
    path.write_text(path.read_text()[:100])
  before = (workdir / "metrics.jsonl").read_text()
  capsys.readouterr()
  with pytest.raises(ValueError) as e:
    _run_smoke(workdir, train__steps=6, opt__lr=2e-3, opt__schedule="cosine")
  assert "opt.lr (0.001 -> 0.002)" in str(e.value)
  out = capsys.readouterr().out
  assert f"{path} is missing" in out if damage == "deleted" else f"{path} cannot be read" in out
  assert (workdir / "metrics.jsonl").read_text() == before  # nothing trained or cut
  # The same config resumes, and config.json is rebuilt.
  summary = _run_smoke(workdir, train__steps=6)
  assert summary["status"] == "completed" and summary["steps"] == 6
  assert json.loads(path.read_text())["opt"]["lr"] == 1e-3


@pytest.mark.slow  # trains
def test_a_completed_run_s_lost_config_json_is_rebuilt_and_sample_reads_the_folder(
  tmp_path, capsys
):
  """config.json deleted from a completed run: the rerun warned "config.json is rebuilt"
  and wrote nothing, so experiments.sample still refused the folder. Now it is written
  again, the same as the run's, its provenance the run's."""
  from resnorm_jax.probes import generate

  workdir = tmp_path / "run"
  _run_smoke(workdir, train__steps=4)
  path = workdir / "config.json"
  original = json.loads(path.read_text())
  path.unlink()
  with pytest.raises(ValueError, match="no config.json"):
    generate.run_config(str(workdir))
  capsys.readouterr()
  assert _run_smoke(workdir, train__steps=4)["steps"] == 4
  out = capsys.readouterr().out
  assert f"{path} rebuilt from this run's config" in out and "already completed" in out
  assert json.loads(path.read_text()) == original
  assert generate.run_config(str(workdir))[0].opt.lr == original["opt"]["lr"]


# --- 7. a completed run is not shortened ----------------------------------------------------


@pytest.mark.slow  # trains
def test_a_shorter_train_steps_on_a_completed_run_is_refused_and_rewrites_nothing(tmp_path):
  """train.steps below a completed run's exited 0 and rewrote config.json to the shorter
  length the run never had."""
  workdir = tmp_path / "run"
  _run_smoke(workdir, train__steps=4)
  files = {n: (workdir / n).read_text() for n in ("config.json", "summary.json")}
  with pytest.raises(ValueError, match=r"completed at step 4: train.steps=2 is shorter"):
    _run_smoke(workdir, train__steps=2)
  assert {n: (workdir / n).read_text() for n in files} == files
  assert _run_smoke(workdir, train__steps=4)["steps"] == 4  # as it is: nothing to do


@pytest.mark.slow  # trains
def test_a_summary_rebuilt_from_the_last_checkpoint_keeps_the_runs_rate(tmp_path):
  """summary.json lost after the last step: the rerun rebuilds it from the checkpoint without
  timing a step; tokens_per_second was null, now it is the rate of the segments that ran."""
  workdir = tmp_path / "run"
  first = _run_smoke(workdir, train__steps=4)
  (workdir / "summary.json").unlink()
  rebuilt = _run_smoke(workdir, train__steps=4)
  assert rebuilt["steps"] == 4 and rebuilt["tokens_per_second"] is not None
  assert rebuilt["timed_steps"] == first["timed_steps"] > 0
  assert rebuilt["tokens_per_second"] == pytest.approx(first["tokens_per_second"], rel=0.05)


# --- a run's identity decides every resume (its length included) ----------------------------


def _interrupted_smoke(workdir, monkeypatch, steps=8, at=4, **overrides):
  """A run of `steps` stopped at step `at` as a SIGTERM stops it: saved there, interrupted."""
  from resnorm_jax.train import preemption

  with monkeypatch.context() as m:
    m.setattr(preemption.StopSignals, "should_stop", lambda self, n: n >= at)
    summary = _run_smoke(workdir, train__steps=steps, **overrides)
  assert summary["status"] == "interrupted" and summary["steps"] == at
  return summary


def _files(workdir):
  return {n: (workdir / n).read_bytes() for n in ("config.json", "summary.json", "metrics.jsonl")}


@pytest.mark.slow  # trains
def test_a_completed_run_whose_config_json_is_lost_is_never_another_lrs_result(tmp_path, capsys):
  """config.json lost, rerun with another lr: exit 0, "already completed at step 4: nothing to
  do", the lr 1e-3 result standing for 2e-3. Now checked against its checkpoint's record; with
  no record left anywhere, refused; a sweep calls the point a conflict, its row unknown."""
  from resnorm_jax.runs import sweep_results
  from resnorm_jax.sweeps import grid as sweep_grid

  workdir = tmp_path / "run"
  _run_smoke(workdir, train__steps=4)
  (workdir / "config.json").unlink()
  before = {n: (workdir / n).read_bytes() for n in ("summary.json", "metrics.jsonl")}
  with pytest.raises(ValueError, match=r"opt.lr \(0.001 -> 0.002\)"):
    _run_smoke(workdir, train__steps=4, opt__lr=2e-3)
  assert "already completed" not in capsys.readouterr().out
  assert _run_smoke(workdir, train__steps=4)["steps"] == 4  # the same config: nothing to do
  assert "already completed at step 4" in capsys.readouterr().out
  (workdir / "config.json").unlink()  # rebuilt from the matching config; lost again
  expected = sweep_grid.resolve(
    sweep_grid.Point("run", "configs/smoke.py", {}, 0), {"opt.lr": 2e-3}, None
  )[1]
  assert sweep_grid.run_state(str(workdir), expected) == "conflict"
  assert "opt.lr (0.001 -> 0.002)" in sweep_grid.conflict_keys(str(workdir), expected)
  (row,) = sweep_results.collect(str(tmp_path))
  assert row["seed"] == 0 and row["outcome"] != "unknown"  # its checkpoint's config
  shutil.rmtree(workdir / "ckpt")  # and no checkpoint records it either
  with pytest.raises(ValueError) as e:
    _run_smoke(workdir, train__steps=4, opt__lr=2e-3)
  assert f"{workdir / 'config.json'} is missing and no checkpoint records the config" in str(
    e.value
  )
  assert "put its config.json back, or use a new --workdir" in str(e.value)
  assert {n: (workdir / n).read_bytes() for n in before} == before
  assert sweep_grid.run_state(str(workdir), expected) == "conflict"
  (row,) = sweep_results.collect(str(tmp_path))
  assert row["outcome"] == "unknown"


@pytest.mark.slow  # trains
@pytest.mark.long  # runs; on a completed run: the test above
def test_a_shorter_train_steps_after_an_interruption_is_refused(tmp_path, monkeypatch):
  """Stopped at step 4 of 8, resumed with train.steps=3 (below the step reached) or 6 (below
  the run's): "completed (trained)" with config.json rewritten to the shorter length, for a
  single run and a population member alike; the sweep's --max_steps is a conflict."""
  from resnorm_jax.sweeps import grid as sweep_grid
  from resnorm_jax.train.population import run as population_run

  workdir = tmp_path / "run"
  _interrupted_smoke(workdir, monkeypatch)
  before = _files(workdir)
  for steps in (3, 6):
    message = rf"holds a run of train.steps=8 \(its config.json\): train.steps={steps} would"
    with pytest.raises(ValueError, match=message):
      _run_smoke(workdir, train__steps=steps)
    config = _smoke(train__checkpoint_every=2, train__eval_every=2, train__log_every=2)
    config.train.steps = steps
    with pytest.raises(ValueError, match=message):
      population_run.run([config], [str(workdir)])
  assert _files(workdir) == before
  point = sweep_grid.Point("run", "configs/smoke.py", {}, 0)
  overrides = {"train.checkpoint_every": 2, "train.eval_every": 2, "train.log_every": 2}
  expected = sweep_grid.resolve(point, overrides, max_steps=3)[1]
  assert sweep_grid.run_state(str(workdir), expected) == "conflict"
  assert "train.steps (8 -> 3)" in sweep_grid.conflict_keys(str(workdir), expected)
  assert _run_smoke(workdir, train__steps=8)["status"] == "completed"  # its own length resumes


@pytest.mark.slow  # trains
@pytest.mark.long  # runs in processes
def test_extending_a_run_under_a_schedule_of_the_total_is_refused(tmp_path, monkeypatch, capsys):
  """cosine over 4 steps resumed with 8: two schedules in one run (the lr of step 1 changed
  under the steps already trained). A constant lr extends, recorded in summary.json."""
  cosine = tmp_path / "cosine"
  _run_smoke(cosine, train__steps=4, opt__schedule="cosine")
  before = _files(cosine)
  with pytest.raises(ValueError) as e:
    _run_smoke(cosine, train__steps=8, opt__schedule="cosine")
  msg = str(e.value)
  assert "opt.schedule='cosine' depends on train.steps: extending the run in" in msg
  assert "from train.steps=4 (its config.json) to 8 changes the lr of the steps it ran" in msg
  assert "train.steps=4 resumes it as it is, a 8-step run needs a new --workdir" in msg
  assert "\n" not in msg and _files(cosine) == before
  interrupted = tmp_path / "interrupted"  # stopped before its end: the same rule
  _interrupted_smoke(interrupted, monkeypatch, steps=8, at=2, opt__schedule="linear")
  with pytest.raises(ValueError, match="depends on train.steps"):
    _run_smoke(interrupted, train__steps=12, opt__schedule="linear")
  constant = tmp_path / "constant"
  _run_smoke(constant, train__steps=4)
  capsys.readouterr()
  summary = _run_smoke(constant, train__steps=6)
  assert "extending the run from train.steps=4 to 6 at step 4" in capsys.readouterr().out
  assert summary["steps"] == 6 and summary["extended"] == [
    {"step": 4, "from_steps": 4, "to_steps": 6}
  ]
  assert json.loads((constant / "summary.json").read_text())["extended"] == summary["extended"]
