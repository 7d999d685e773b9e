"""Running a sweep's points (resnorm_jax/sweeps/slots.py, runner.py): slots pinned to
disjoint cores or one device each, the longest points started first, progress read from the
logs, a signal passed on to the running points with nothing more started, why a point failed
on its line, in its point file and in the results, and a pinned parallel sweep equal to a
sequential one."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT
from resnorm_jax.runs import sweep_point, sweep_results
from resnorm_jax.runs import sweep_point as sweep_records
from resnorm_jax.sweeps import grid as sweep_grid
from resnorm_jax.sweeps import jobs as sweep_jobs
from resnorm_jax.sweeps import runner as sweep_runner
from resnorm_jax.sweeps import slots as sweep_slots


def test_make_slots_pins_disjoint_cores():
  slots = sweep_slots.make_slots("auto", 1, cpus=[0, 1, 2, 3])
  assert [s.cpus for s in slots] == [(0,), (1,), (2,), (3,)]
  assert all("--xla_cpu_multi_thread_eigen=false" in s.env["XLA_FLAGS"] for s in slots)
  slots = sweep_slots.make_slots("auto", 2, cpus=[0, 1, 2, 3, 4])
  assert [s.cpus for s in slots] == [(0, 1), (2, 3)]
  assert "multi_thread_eigen" not in slots[0].env["XLA_FLAGS"]
  assert sweep_slots.make_slots("1", 1, cpus=[0, 1]) == [sweep_slots.Slot("all cores", None, {})]
  for jobs, threads, msg in (("3", 1, "needs 3 cores"), ("0", 1, "positive"), ("x", 1, "auto")):
    with pytest.raises(ValueError, match=msg):
      sweep_slots.make_slots(jobs, threads, cpus=[0, 1])


def test_make_slots_one_device_per_job(monkeypatch):
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
  slots = sweep_slots.make_slots("auto", 1, "gpu")
  assert [s.env for s in slots] == [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(3)]
  assert all(s.cpus is None for s in slots)
  with pytest.raises(ValueError, match="only 3 GPUs"):
    sweep_slots.make_slots("4", 1, "gpu")
  with pytest.raises(ValueError, match="not one of"):
    sweep_slots.make_slots("1", 1, "npu")


def test_longest_points_start_first_and_progress_is_read_from_logs(tmp_path):
  point = sweep_grid.parse_points([{"config": "configs/smoke.py"}])[0]
  _, small = sweep_grid.resolve(point, {}, None)
  _, deep = sweep_grid.resolve(point, {"model.num_layers": 8}, None)
  _, long = sweep_grid.resolve(point, {"train.steps": 200}, None)
  costs = [sweep_jobs.estimated_cost(c) for c in (small, deep, long)]
  assert costs[0] < costs[1] and costs[0] < costs[2]
  order = []
  child = "import sys; print(sys.argv[1])"
  points = sweep_grid.parse_points([{"config": "c.py", "name": n} for n in ("s", "d", "l")])
  jobs = [
    sweep_jobs.Job(p, str(tmp_path / p.name), [sys.executable, "-c", child, p.name], c)
    for p, c in zip(points, costs, strict=True)
  ]
  codes = sweep_runner.run_points(jobs, [sweep_slots.Slot("0", None, {})], progress_every=0)
  assert codes == {"s": 0, "d": 0, "l": 0}
  for p in points:  # one slot: the start order is the order of the logs' mtimes
    order.append((os.path.getmtime(tmp_path / p.name / "train.log"), p.name))
  expected = [n for _, n in sorted(zip(costs, ("s", "d", "l"), strict=True), reverse=True)]
  assert [n for _, n in sorted(order)] == expected
  log = tmp_path / "x.log"
  log.write_text("compiled\nstep     10/200 | loss 3.4012 | lr 1.00e-03 | 900 tok/s | ETA 1m05s\n")
  assert sweep_runner.log_progress(str(log)) == (10, 200, "3.4012", "1m05s")
  assert sweep_runner.log_progress(str(tmp_path / "none.log")) is None


@pytest.mark.slow  # starts child processes
def test_run_points_passes_a_signal_on_and_starts_nothing_more(tmp_path):
  """SIGINT to the sweep reaches each running child once; pending points never start."""
  child = (
    "import pathlib, signal, sys, time\n"
    "signal.signal(signal.SIGINT, lambda *a: sys.exit(7))\n"
    "pathlib.Path('ready').touch()\n"
    "time.sleep(60)\n"
  )
  points = sweep_grid.parse_points([{"config": "c.py", "name": n} for n in ("a", "b", "c")])
  jobs = [sweep_jobs.Job(p, str(tmp_path / p.name), [sys.executable, "-c", child]) for p in points]
  for job in jobs:
    job.command[-1] = child.replace("'ready'", repr(os.path.join(job.workdir, "ready")))

  def interrupt():
    deadline = time.time() + 60
    while time.time() < deadline and not all(
      os.path.exists(tmp_path / n / "ready") for n in ("a", "b")
    ):
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)

  threading.Thread(target=interrupt, daemon=True).start()
  slots = [sweep_slots.Slot(str(i), None, {}) for i in range(2)]
  codes = sweep_runner.run_points(jobs, slots)
  assert codes == {"a": 7, "b": 7, sweep_runner.INTERRUPTED: 128 + signal.SIGINT}
  assert not os.path.exists(tmp_path / "c")
  assert sweep_results.run_row(str(tmp_path / "a"))["outcome"] == "failed"  # exit 7, no summary


def test_a_failed_point_says_why_on_its_line_in_its_point_file_and_results(tmp_path, capsys):
  """Its line said `failed (exit 1, eval , no-context )`, and the results nothing more."""
  fails = (
    "import sys\n"
    "print('step      1/20 | loss 5.5')\n"
    "print('Traceback (most recent call last):', file=sys.stderr)\n"
    "print('  File \"x.py\", line 1', file=sys.stderr)\n"
    "print(\"ValueError: data.path='/d/c.txt' matches no file\", file=sys.stderr)\n"
    "print('a last line of clean-up', flush=True)\n"
    "sys.exit(2)\n"
  )
  killed = "import os, signal; print('compiling', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
  names = ("fails", "killed", "ok")
  points = sweep_grid.parse_points([{"config": "c.py", "name": n} for n in names])
  children = (fails, killed, "print('fine')")
  jobs = [
    sweep_jobs.Job(p, str(tmp_path / p.name), [sys.executable, "-c", c], cost=3 - i)
    for i, (p, c) in enumerate(zip(points, children, strict=True))
  ]
  for job in jobs:
    os.makedirs(job.workdir)
    with open(os.path.join(job.workdir, sweep_point.POINT_FILE), "w") as f:
      json.dump({"name": job.point.name, "index": job.point.index, "config": "c.py"}, f)
  slot = sweep_slots.Slot("0", None, {})
  codes = sweep_runner.run_points(jobs, [slot], progress_every=0)
  assert codes == {"fails": 2, "killed": -signal.SIGKILL, "ok": 0}
  out = capsys.readouterr().out
  why = "exit 2: ValueError: data.path='/d/c.txt' matches no file"
  assert f"[1] fails: failed ({why}) in " in out
  assert "[2] killed: failed (killed by SIGKILL: compiling) in " in out
  point = json.load(open(tmp_path / "fails" / sweep_point.POINT_FILE))
  assert point["returncode"] == 2 and point["error"] == why
  rows = sweep_records.with_failures(sweep_results.collect(str(tmp_path)), str(tmp_path))
  by_name = {r["name"]: r for r in rows}
  assert list(by_name["fails"])[list(by_name["fails"]).index("outcome") :][:3] == [
    "outcome",
    "exit_code",
    "error",
  ]
  assert (by_name["fails"]["outcome"], by_name["fails"]["exit_code"]) == ("failed", 2)
  assert by_name["fails"]["error"] == why
  assert by_name["killed"]["error"] == "killed by SIGKILL: compiling"
  assert by_name["ok"]["exit_code"] == 0 and by_name["ok"]["error"] is None
  sweep_results.write_results(str(tmp_path), rows)
  assert why in (tmp_path / "results.csv").read_text()
  # A sweep where nothing failed keeps its columns as they were.
  shutil.copytree(tmp_path / "ok", tmp_path / "clean" / "ok")
  ok_only = sweep_results.collect(str(tmp_path / "clean"))
  assert len(ok_only) == 1 and "error" not in ok_only[0]
  assert sweep_records.with_failures(ok_only, str(tmp_path / "clean")) == ok_only


@pytest.mark.slow  # two sweeps of training runs
@pytest.mark.long  # two sweeps of training runs
def test_pinned_parallel_sweep_equals_a_sequential_one(tmp_path):
  """--jobs=2 (each point pinned to one core, single-threaded XLA) gives the same results
  as --jobs=1 (one point at a time on every core)."""
  if len(sweep_slots.available_cpus()) < 2:
    pytest.skip("needs 2 cores")
  grid = tmp_path / "grid.py"
  grid.write_text(
    "GRID = ["
    + ", ".join(
      f'{{"config": "configs/smoke.py", "name": "s{s}", "overrides": {{"seed": {s}}}}}'
      for s in (0, 1)
    )
    + "]\n"
  )
  results = {}
  for jobs in ("1", "2"):
    out = tmp_path / f"jobs{jobs}"
    proc = subprocess.run(
      [
        sys.executable,
        "scripts/sweep.py",
        f"--grid={grid}",
        f"--sweep_dir={out}",
        f"--jobs={jobs}",
        "--set=diag.per_layer=false",
      ],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("on cpu0" in proc.stdout) == (jobs == "2"), proc.stdout
    results[jobs] = {name: json.load(open(out / name / "summary.json")) for name in ("s0", "s1")}
  for name in ("s0", "s1"):
    one, two = results["1"][name], results["2"][name]
    assert one["final_eval_loss"] != results["1"]["s1" if name == "s0" else "s0"]["final_eval_loss"]
    for key in ("final_train_loss", "final_eval_loss", "best_eval_loss"):
      assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-6), (name, key)
