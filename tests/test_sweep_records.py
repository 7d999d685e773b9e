"""A sweep's records stay true and it runs its own checkout's code: a point finished by an
orphaned child is recorded as finished, a stale failure record is rewritten from the point's
folder, two sweeps on one folder train each point once, and a sweep started from a second
checkout runs that checkout's code (and its provenance says so)."""

import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
import test_sweep_records as t
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
