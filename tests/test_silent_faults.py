"""Faults that gave a wrong result without a word: a lost config.json letting a
resume change the experiment, a sweep started from a second checkout running the first's
code, token ids outside the vocabulary trained as a divergence, sweep records that stayed
stale, and a population weaker than a single run."""

import json
import os
import shutil

import pytest

from configs import smoke
from resnorm_jax.train import resume_policy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


# --- 3. corrupt data is refused, not tabulated as a divergence -------------------------------


def test_token_ids_past_the_vocabulary_are_refused_naming_the_file(tmp_path):
  """The high byte of every 97th token set in a prepared shard: the manifest vouched for the
  shard by its size, the run ended "diverged at step 1" with exit 0."""
  import types

  import numpy as np

  from resnorm_jax.data import prepare, sources, token_files
  from resnorm_jax.data import tokenizer as tok_lib

  (tmp_path / "doc.txt").write_bytes(
    open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb").read()[:60_000]
  )
  source, documents = prepare.local_documents(str(tmp_path / "doc.txt"))
  folder = tmp_path / "bytes"
  manifest = prepare.prepare(
    documents,
    source,
    tok_lib.parse("bytes"),
    str(folder),
    workers=1,
    log=lambda s: None,
    val_fraction=0.1,
    shard_tokens=30_000,
  )
  cfg = types.SimpleNamespace(source="tokens", path=str(folder), val_path="", val_fraction=0.1)
  sources.load_corpus(cfg, 384, 32)  # intact
  shard = folder / manifest["splits"]["train"]["shards"][0]["file"]
  tokens = np.array(token_files.read_shard(str(shard)))
  tokens[::97] |= 0x100  # ids 256..511: past the 257 of the tokenizer
  token_files.write_shard(str(shard), tokens, 1)  # same size: the manifest's count holds
  with pytest.raises(token_files.DataError) as e:
    sources.load_corpus(cfg, 384, 32)
  msg = str(e.value)
  bad = np.flatnonzero(tokens >= 257)
  assert f"token id {tokens.max()} in {str(shard)!r}" in msg, msg
  assert f"vocab_size=257 (the first such id at token {bad[0]:,}" in msg and "--verify" in msg
  assert isinstance(e.value, ValueError)  # bad input: exit status 2 on the command line


# --- 4. sweep records that stay true ---------------------------------------------------------

# A point's process as far as the sweep sees it: takes the workdir lock as a run does (refused
# with the run's message and exit status 2 while another holds it), "trains" for a second
# (a line in trained.txt) and writes a finished summary; a finished run does nothing.
POINT_CHILD = """
import json, os, sys, time
from resnorm_jax.runs import workdir as workdir_lib
wd = sys.argv[1]
os.makedirs(wd, exist_ok=True)
try:
  with workdir_lib.hold(wd):
    if os.path.exists(os.path.join(wd, "summary.json")):
      print("already completed at step 2: nothing to do")
      sys.exit(0)
    with open(os.path.join(wd, "trained.txt"), "a") as f:
      f.write(f"{os.getpid()}\\n")
    with open(os.path.join(wd, "config.json"), "w") as f:  # a run records its config first
      json.dump({"name": "c", "seed": 0}, f)
    time.sleep(float(sys.argv[2]))
    summary = {"status": "completed", "steps": 2, "final_eval_loss": 2.0,
               "heldout_unigram_entropy": 3.0, "unigram_entropy": 3.0}
    with open(os.path.join(wd, "summary.json"), "w") as f:
      json.dump(summary, f)
except ValueError as e:
  print(f"error: {e}", file=sys.stderr)
  sys.exit(2)
"""


def _point_jobs(sweep_dir, names, seconds=1.0):
  import sys

  from resnorm_jax.runs import sweep_point as sweep_records
  from resnorm_jax.sweeps import grid as sweep_grid
  from resnorm_jax.sweeps import jobs as sweep_jobs

  points = sweep_grid.parse_points([{"config": "c.py", "name": n} for n in names])
  jobs = []
  for p in points:
    workdir = os.path.join(sweep_dir, p.name)
    os.makedirs(workdir, exist_ok=True)
    info = {"name": p.name, "index": p.index, "config": "c.py", "overrides": {}}
    with open(os.path.join(workdir, sweep_records.POINT_FILE), "w") as f:
      json.dump(info, f)
    command = [sys.executable, "-c", POINT_CHILD, workdir, str(seconds)]
    jobs.append(sweep_jobs.Job(p, workdir, command))
  return jobs


def _hold_and_finish(workdir, seconds):
  """A run left by a killed sweep: holds the workdir, finishes the point, exits."""
  import subprocess
  import sys
  import time

  proc = subprocess.Popen([sys.executable, "-c", POINT_CHILD, workdir, str(seconds)])
  deadline = time.time() + 60
  while not os.path.exists(os.path.join(workdir, "trained.txt")):
    assert proc.poll() is None and time.time() < deadline
    time.sleep(0.05)
  return proc


@pytest.mark.slow  # starts processes
@pytest.mark.parametrize("refused", [False, True])
def test_a_point_finished_by_an_orphaned_child_is_recorded_as_finished(
  tmp_path, monkeypatch, capsys, refused
):
  """kill -9 of the sweep alone, mid-point, then a rerun: the orphaned child finished the
  point, but sweep_point.json and results.csv said "exit 2, in use by another run" forever.
  Now the rerun waits for the child and records the point from its folder: exit 0, no error,
  trained once. `refused`: the rerun's process started before the child held the lock."""
  from resnorm_jax.runs import sweep_point as sweep_records
  from resnorm_jax.runs import sweep_results
  from resnorm_jax.sweeps import runner as sweep_runner
  from resnorm_jax.sweeps import slots as sweep_slots

  (job,) = _point_jobs(str(tmp_path), ["p"])
  orphan = _hold_and_finish(job.workdir, 2.0)
  if refused:  # the probe misses the holder once: the point's process is refused as busy
    real, calls = sweep_runner._busy, []

    def busy_after_the_first_probe(job):
      calls.append(job)
      return real(job) if len(calls) > 1 else None

    monkeypatch.setattr(sweep_runner, "_busy", busy_after_the_first_probe)
  codes = sweep_runner.run_points([job], [sweep_slots.Slot("0", None, {})], progress_every=0)
  orphan.wait(timeout=60)
  assert codes == {"p": 0}
  out = capsys.readouterr().out
  assert "[1] p: running elsewhere (pid " in out and "failed" not in out
  assert len(open(os.path.join(job.workdir, "trained.txt")).read().split()) == 1
  record = json.load(open(os.path.join(job.workdir, sweep_records.POINT_FILE)))
  assert record.get("returncode") in (None, 0) and "error" not in record
  assert "running_elsewhere" not in record
  rows = sweep_records.with_failures(sweep_results.collect(str(tmp_path)), str(tmp_path))
  assert [(r["name"], r["outcome"]) for r in rows] == [("p", "trained")]
  assert "error" not in rows[0]


def test_a_stale_failure_record_is_rewritten_from_the_points_folder(tmp_path):
  """A record left as "exit 2, in use by another run" by a sweep before this fix, the point
  since finished: --collect_only and every rerun kept the failure."""
  from resnorm_jax.runs import sweep_point as sweep_records
  from resnorm_jax.runs import sweep_results

  workdir = tmp_path / "p"
  workdir.mkdir()
  stale = {"name": "p", "index": 0, "config": "c.py", "overrides": {}, "returncode": 2}
  stale["error"] = f"exit 2: error: {workdir} is in use by another run (pid 1 on host h)"
  (workdir / sweep_records.POINT_FILE).write_text(json.dumps(stale))
  (workdir / "config.json").write_text(json.dumps({"name": "p"}))  # a result of a known config
  (workdir / "summary.json").write_text(
    json.dumps(
      {"status": "completed", "steps": 2, "final_eval_loss": 2.0, "heldout_unigram_entropy": 3.0}
    )
  )
  assert sweep_records.refresh_records(str(tmp_path)) == ["p"]
  record = json.loads((workdir / sweep_records.POINT_FILE).read_text())
  assert "returncode" not in record and "error" not in record and record["status"] == "completed"
  rows = sweep_records.with_failures(sweep_results.collect(str(tmp_path)), str(tmp_path))
  assert rows[0]["outcome"] == "trained" and "error" not in rows[0]
  assert sweep_records.refresh_records(str(tmp_path)) == []  # once
  # A point its own sweep saw exit 0 gains its status, and is not called finished elsewhere.
  clean = {k: v for k, v in stale.items() if k != "error"} | {"returncode": 0}
  (workdir / sweep_records.POINT_FILE).write_text(json.dumps(clean))
  assert sweep_records.refresh_records(str(tmp_path)) == []
  record = json.loads((workdir / sweep_records.POINT_FILE).read_text())
  assert record["returncode"] == 0 and record["status"] == "completed"
  # A point that has not finished keeps its failure.
  (workdir / "summary.json").unlink()
  (workdir / sweep_records.POINT_FILE).write_text(json.dumps(stale))
  assert sweep_records.refresh_records(str(tmp_path)) == []


SWEEP_DRIVER = """
import json, sys
from resnorm_jax.sweeps import runner as sweep_runner, slots as sweep_slots
import test_silent_faults as t
jobs = t._point_jobs(sys.argv[1], ["a", "b", "c"])
codes = sweep_runner.run_points(jobs, [sweep_slots.Slot("0", None, {})], progress_every=0)
print("CODES " + json.dumps(codes))
"""


@pytest.mark.slow  # starts processes
@pytest.mark.long  # two sweeps of runs
def test_two_sweeps_on_one_sweep_dir_train_each_point_once_and_both_succeed(tmp_path):
  """Both exited 1, each calling the points the other trained failed."""
  import subprocess
  import sys

  env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "tests")}
  cmd = [sys.executable, "-c", SWEEP_DRIVER, str(tmp_path)]
  sweeps = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
  outs = [s.communicate(timeout=120)[0] for s in sweeps]
  for out in outs:
    codes = json.loads(out.split("CODES ")[1])
    assert codes == {"a": 0, "b": 0, "c": 0}, out
  for name in ("a", "b", "c"):
    assert len((tmp_path / name / "trained.txt").read_text().split()) == 1


# --- 2. a sweep runs the code of the checkout it was started from ---------------------------

# The second checkout's experiments/train.py: records which package it imported and what
# provenance that package gives, then exits as a finished run would.
TRAIN_PROBE = """
import json, os, sys
import resnorm_jax
from resnorm_jax.train import provenance
workdir = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--workdir="))
os.makedirs(workdir, exist_ok=True)
with open(os.path.join(workdir, "probe.json"), "w") as f:
  json.dump({"package": resnorm_jax.ROOT, "cwd": os.getcwd(), **provenance.code_version()}, f)
"""


@pytest.mark.slow  # starts a sweep
def test_a_sweep_from_a_second_checkout_runs_that_checkouts_code(tmp_path):
  """The editable install's ROOT was the first checkout: a sweep started from a second one
  ran the first's code, and its provenance named the first's commit, `dirty: false`."""
  import shutil
  import subprocess
  import sys

  second = tmp_path / "second"
  skip = shutil.ignore_patterns("__pycache__", "*.pyc")
  for folder in ("resnorm_jax", "configs", "experiments", "scripts"):
    shutil.copytree(os.path.join(ROOT, folder), second / folder, ignore=skip)
  (second / "experiments" / "train.py").write_text(TRAIN_PROBE)
  (second / "configs" / "sweeps" / "one.py").write_text(
    'GRID = [{"config": "configs/smoke.py", "name": "p"}]\n'
  )
  git = ["git", "-C", str(second), "-c", "user.name=t", "-c", "user.email=t@t"]
  subprocess.run([*git, "init", "-q"], check=True)
  subprocess.run([*git, "add", "-A"], check=True)
  subprocess.run([*git, "commit", "-q", "-m", "second"], check=True)
  head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
  sweep = [sys.executable, str(second / "scripts" / "sweep.py")]
  args = ["--grid=configs/sweeps/one.py", f"--sweep_dir={tmp_path / 'sw'}", "--progress_every=0"]
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  proc = subprocess.run(
    [*sweep, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
  )
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  probe = json.loads((tmp_path / "sw" / "p" / "probe.json").read_text())
  assert os.path.realpath(probe["package"]) == os.path.realpath(second)
  assert os.path.realpath(probe["cwd"]) == os.path.realpath(second)
  assert probe["commit"] == head.strip() and probe["dirty"] is False


# --- 5, 6, 8. a population as robust as a single run ----------------------------------------


def _members(tmp_path, seeds=(0, 1), **extra):
  from resnorm_jax.train.population import points as population_points

  overrides = {"train.steps": 6, "train.log_every": 2, "train.eval_every": 2}
  overrides.update({"train.checkpoint_every": 2, **extra})
  configs = [
    population_points.member_config("configs/smoke.py", {**overrides, "seed": s}) for s in seeds
  ]
  return configs, [str(tmp_path / f"s{s}") for s in seeds]


@pytest.mark.parametrize("seed", [-1, 2**31, True])
def test_a_member_seed_out_of_range_is_refused_before_anything_is_written(tmp_path, seed):
  """seed >= 2^31 raised OverflowError with a traceback after writing config.json; seed -1
  trained a single run, wrote its files, then exited 2 and refused the corrected run."""
  from resnorm_jax.train import loop
  from resnorm_jax.train.population import run as population_run

  configs, workdirs = _members(tmp_path, seeds=(0, 1))
  configs[1].seed = seed
  with pytest.raises(ValueError, match=r"seed=.* must be an integer in \[0, 2147483647\]"):
    population_run.run(configs, workdirs)
  with pytest.raises(ValueError, match=r"must be an integer in \[0, 2147483647\]"):
    loop.run(configs[1], str(tmp_path / "single"))
  assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.slow  # trains a population
@pytest.mark.long  # population runs in processes
def test_a_full_disk_fails_a_population_in_one_line_per_member_and_it_resumes(
  tmp_path, monkeypatch, capsys
):
  """A population on a full disk ended in a 289-line traceback, exit 1, and no member got a
  summary.json; a single run says it in one line and resumes."""
  import errno
  import time

  from orbax.checkpoint._src.handlers import json_checkpoint_handler as jch

  from resnorm_jax.train.population import run as population_run

  save_fn = jch.JsonCheckpointHandler._save_fn

  async def full_from_step_4(self, x, directory):
    step = directory.parent.name.split(".")[0]
    if step.isdigit() and int(step) >= 4:
      raise OSError(errno.ENOSPC, "No space left on device", str(directory / "metadata"))
    return await save_fn(self, x, directory)

  monkeypatch.setattr(jch.JsonCheckpointHandler, "_save_fn", full_from_step_4)
  configs, workdirs = _members(tmp_path)
  summaries = population_run.run(configs, workdirs)  # no exception
  out = capsys.readouterr().out
  for workdir, summary in zip(workdirs, summaries, strict=True):
    assert (summary["status"], summary["steps"]) == ("failed", 2), summary
    assert json.load(open(os.path.join(workdir, "summary.json")))["status"] == "failed"
    name = os.path.basename(workdir)
    (line,) = [ln for ln in out.splitlines() if ln.startswith(f"[{name}] error: ")]
    assert "No space left on device" in line and "resumes from step 2" in line
  assert "Traceback" not in out
  monkeypatch.setattr(jch.JsonCheckpointHandler, "_save_fn", save_fn)  # space freed
  t0 = time.time()
  summaries = population_run.run(*_members(tmp_path))
  second = time.time() - t0
  assert [s["status"] for s in summaries] == ["completed", "completed"]
  # Both segments counted (the first compiled for seconds): not the last one alone.
  assert summaries[0]["wall_seconds"] > second + 1.0
