"""train.stop_when: a stop rule ends a smoke run at its step k with status stopped_early and a
checkpoint there; the same command has nothing to do, the rule off resumes it to the end; a
rule that never stops changes nothing; a bad rule is refused before compiling; the stop rule
is a run-control key for the resume and the sweep, and the sweep's tables show the outcome."""

import json
import os
import re
import sys

import pytest

from configs import smoke
from resnorm_jax.config import same_experiment
from resnorm_jax.runs import end_line, sweep_results
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.sweeps import grid as sweep_grid
from resnorm_jax.sweeps import jobs as sweep_jobs
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import loop, run_setup, stop_rule
from resnorm_jax.train.population import run as population_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = os.path.join(ROOT, "docs", "early_warning", "stop_rule_k100.json")


def _rule(folder, k: int, threshold: float, name: str = "rule.json") -> str:
  """The committed k=100 rule at step `k` with `threshold` (1e9: always stops; -1e9: never)."""
  with open(COMMITTED) as f:
    rule = json.load(f)
  rule["k"], rule["threshold"] = k, threshold
  path = os.path.join(folder, name)
  with open(path, "w") as f:
    json.dump(rule, f)
  return path


def _config(rule: str = ""):
  c = smoke.get_config()  # 20 steps, a row every 5, an eval every 10, a checkpoint every 10
  c.train.stop_when = rule
  return c


def _rows(workdir: str) -> list[dict]:
  drop = ("tokens_per_second", "step_seconds")  # timing, not results
  return [
    {k: v for k, v in r.items() if k not in drop}
    for r in read_metrics(os.path.join(workdir, "metrics.jsonl"))
  ]


@pytest.mark.slow  # trains four smoke runs in this process
@pytest.mark.long  # two runs
def test_a_rule_stops_a_run_at_k_with_its_checkpoint_and_the_rule_off_resumes_it(tmp_path, capsys):
  stops = _rule(tmp_path, k=15, threshold=1e9)
  workdir = str(tmp_path / "sweep" / "run")
  summary = loop.run(_config(stops), workdir)
  out = capsys.readouterr().out
  assert summary["status"] == summary["outcome"] == "stopped_early"
  assert summary["steps"] == summary["stop_step"] == 15
  assert summary["stop_rule"] == stops and summary["stop_threshold"] == 1e9
  assert summary["stop_score"] < 1e9
  with open(os.path.join(workdir, "summary.json")) as f:
    assert json.load(f)["status"] == "stopped_early"
  assert max(ckpt_lib.saved_steps(os.path.join(workdir, "ckpt"))) == 15
  assert _rows(workdir)[-1]["step"] == 15
  (line,) = [ln for ln in out.splitlines() if "stopped early at step 15" in ln]
  assert f"by the stop rule {stops}" in line and "--config.train.stop_when= (off)" in line

  # The same command: stopped on purpose, nothing to do (as for a completed run).
  files = {n: (tmp_path / "sweep" / "run" / n).read_text() for n in ("summary.json", "config.json")}
  assert loop.run(_config(stops), workdir) == summary
  assert "already stopped early at step 15: nothing to do" in capsys.readouterr().out
  assert {n: (tmp_path / "sweep" / "run" / n).read_text() for n in files} == files

  # A sweep: its results show the outcome; the point is done with a rule, to do without one.
  rows = sweep_results.collect(str(tmp_path / "sweep"))
  assert [(r["name"], r["outcome"], r["steps"]) for r in rows] == [("run", "stopped_early", 15)]
  sweep_results.write_results(str(tmp_path / "sweep"), rows)
  md = (tmp_path / "sweep" / "results.md").read_text()
  assert "stopped_early 1" in md and "| stopped_early |" in md
  csv_text = (tmp_path / "sweep" / "results.csv").read_text()
  assert "stopped_early" in csv_text.splitlines()[1]
  other_rule = _config(_rule(tmp_path, k=10, threshold=0.0, name="other.json")).to_dict()
  assert sweep_grid.run_state(workdir, other_rule) == "done"
  assert sweep_grid.run_state(workdir, _config("").to_dict()) == "todo"

  # The rule off: resumes from the checkpoint of step 15 and completes, as a run never stopped.
  resumed = loop.run(_config(""), workdir)
  assert "resuming from step 15" in capsys.readouterr().out
  assert resumed["status"] == "completed" and resumed["steps"] == 20
  assert resumed["outcome"] in ("trained", "stuck")
  assert not any(k.startswith("stop_") for k in resumed)
  assert sweep_grid.run_state(workdir, other_rule) == "done"

  # A rule that never stops: the run is the same as one without a rule.
  never = str(tmp_path / "never")
  summary = loop.run(_config(_rule(tmp_path, k=15, threshold=-1e9, name="never.json")), never)
  assert "scores the run" in capsys.readouterr().out  # judged once, and went on
  assert summary["status"] == "completed" and summary["steps"] == 20
  assert not any(k.startswith("stop_") for k in summary)
  assert _rows(workdir) == _rows(never)


def test_a_rule_must_load_and_judge_at_a_logged_step_of_the_run(tmp_path):
  assert stop_rule.check(_config().train) is None  # off by default
  assert stop_rule.check(_config(_rule(tmp_path, k=15, threshold=0.0)).train)["k"] == 15
  (tmp_path / "bad.json").write_text('{"k": 15}')
  bad = str(tmp_path / "bad.json")
  cases = [
    (str(tmp_path / "missing.json"), "missing.json'"),
    (bad, f"train.stop_when={bad!r}: not a stop rule of version 1"),
    (_rule(tmp_path, 40, 0.0, "late.json"), "judges at step 40, after the run's last"),
    (_rule(tmp_path, 12, 0.0, "unlogged.json"), "judges at step 12, which is not logged"),
  ]
  for path, message in cases:
    with pytest.raises(ValueError, match="train.stop_when=") as e:
      run_setup.validate(_config(path))
    assert message in str(e.value) and len(str(e.value).splitlines()) == 1


@pytest.mark.slow  # a training process
def test_a_bad_rule_is_refused_in_one_line_with_exit_2_before_compiling(run_script, tmp_path):
  (tmp_path / "bad.json").write_text("not json")
  proc = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/smoke.py",
      f"--workdir={tmp_path / 'run'}",
      f"--config.train.stop_when={tmp_path / 'bad.json'}",
    ]
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith("error: train.stop_when=") and "not a readable stop rule" in line
  assert "compiled in" not in proc.stdout
  assert not (tmp_path / "run").exists()


def test_the_stop_rule_is_a_run_control_key():
  ruled, off = _config(COMMITTED).to_dict(), _config("").to_dict()
  for policy in (same_experiment.SWEEP, same_experiment.WORKDIR):
    assert same_experiment.changed_keys(ruled, off, policy) == []
  del ruled["train"]["stop_when"]  # a run from before the key
  assert same_experiment.changed_keys(ruled, off, same_experiment.WORKDIR) == []


def test_the_command_to_the_end_turns_the_rule_off():
  argv = ["--config=configs/smoke.py", "--config.train.stop_when=r.json", "--workdir=/x"]
  assert end_line.resume_to_end_command(argv, "/w") == (
    "python -m experiments.train --config=configs/smoke.py --config.train.stop_when= --workdir=/w"
  )
  argv = ["--config=c.py", "--config.train.stop_when", "r.json", "--config.seed=1"]
  assert end_line.resume_to_end_command(argv, "/w").endswith(
    "--config=c.py --config.seed=1 --config.train.stop_when= --workdir=/w"
  )


def test_a_population_refuses_a_stop_rule(tmp_path):
  configs = [_config(COMMITTED), _config(COMMITTED)]
  configs[1].seed = 1
  with pytest.raises(ValueError, match="a population does not apply a stop rule"):
    population_run.run(configs, [str(tmp_path / "a"), str(tmp_path / "b")])
  assert not os.listdir(tmp_path)


def test_a_sweep_passes_a_rule_from_the_repository_root_and_vmap_runs_it_alone(tmp_path):
  rel = os.path.relpath(COMMITTED, ROOT)
  overrides = {"train.stop_when": rel, "train.steps": 100, "seed": 0}
  points = [
    sweep_grid.Point(f"p{i}", "configs/smoke.py", {**overrides, "seed": i}, i) for i in range(2)
  ]
  resolved = [sweep_grid.resolve(p, {}, None) for p in points]
  assert resolved[0][0]["train.stop_when"] == COMMITTED
  assert resolved[0][1]["train"]["stop_when"] == COMMITTED
  todo = []
  for p, (o, expected) in zip(points, resolved, strict=True):
    workdir = str(tmp_path / p.name)
    job = sweep_jobs.Job(p, workdir, sweep_grid.train_command(p, workdir, o), 1.0)
    todo.append((job, o, expected))
  jobs = sweep_jobs.population_jobs(todo, write=False)
  assert [j.command for j in jobs] == [job.command for job, _, _ in todo]  # no population


@pytest.mark.slow  # trains smoke runs in this process
def test_a_stop_survives_a_lost_summary(tmp_path, capsys):
  """A run the rule stopped whose summary.json is lost: the same command (the rule still set)
  has nothing to do (the stop is in the checkpoint), not a run trained on to `completed`; the
  rule off resumes it to the end, with no stop field carried over."""
  stops = _rule(tmp_path, k=15, threshold=1e9)
  workdir = str(tmp_path / "run")
  first = loop.run(_config(stops), workdir)
  assert first["status"] == "stopped_early"
  os.remove(os.path.join(workdir, "summary.json"))
  again = loop.run(_config(stops), workdir)
  assert "already stopped early at step 15: nothing to do" in capsys.readouterr().out
  assert again["status"] == "stopped_early" and again["steps"] == 15
  assert again["stop_step"] == 15 and again["stop_rule"] == stops
  assert max(ckpt_lib.saved_steps(os.path.join(workdir, "ckpt"))) == 15
  resumed = loop.run(_config(""), workdir)
  assert resumed["status"] == "completed" and resumed["steps"] == 20
  assert not any(k.startswith("stop_") for k in resumed)
  # Completed past the stop: a rule set again finds the completed run, not the old stop.
  assert loop.run(_config(stops), workdir)["status"] == "completed"


def test_a_stopped_point_resumed_without_the_rule_then_killed_is_not_done(tmp_path):
  """The sweep counted it done (its summary.json still said stopped_early at step k) after a
  resume without the rule was killed past k: the newest checkpoint, later than the stop, says
  the run went on."""
  from resnorm_jax.runs import workdir as workdir_lib

  run = tmp_path / "run"

  def checkpoint(step, summary):
    meta = run / "ckpt" / str(step) / "meta"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text(json.dumps({"step": step, "summary": summary}))
    (run / "ckpt" / str(step) / "commit_success.txt").write_text("")

  stop = {"status": "stopped_early", "stop_step": 100, "stop_rule": "r.json"}
  checkpoint(100, stop)
  (run / "summary.json").write_text(json.dumps({**stop, "steps": 100}))
  assert workdir_lib.stopped_early_summary(str(run))["steps"] == 100
  checkpoint(150, {"best_eval_loss": 3.0})  # resumed without the rule, killed after 150
  assert workdir_lib.stopped_early_summary(str(run)) is None
  ruled = _config("rule.json").to_dict()
  (run / "config.json").write_text(json.dumps(ruled))
  assert sweep_grid.run_state(str(run), ruled) == "todo"


@pytest.mark.parametrize(
  "change, message",
  [
    (dict(features=["no/such:level"] * 12), "its feature 'no/such:level' is none a run logs"),
    (dict(weights=[0.1] * 5), "its weights has 5 values, not 13"),
    (dict(threshold=float("nan")), "its threshold=nan is not a finite number"),
    (dict(mean=[float("inf")] * 12), "its mean holds a value that is not a finite number"),
  ],
)
def test_a_rule_is_checked_whole_when_the_run_starts(tmp_path, change, message):
  """Unknown features decided on the bias alone; a wrong weights length failed with a numpy
  error at step k (no summary.json); a NaN threshold was accepted."""
  with open(COMMITTED) as f:
    rule = {**json.load(f), **change}
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(rule))
  c = _config(str(path))
  with pytest.raises(ValueError, match=re.escape(message)):
    stop_rule.check(c.train)
