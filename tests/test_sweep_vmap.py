"""Sweeps trained as populations (scripts/sweep.py --vmap): the points that share one program,
the population jobs and what each member's folder records, a rerun that continues a
checkpointed member in the population that wrote it, and a --vmap sweep against a plain one.

The sweeps' training runs are subprocesses on one CPU device with a shared compilation cache
and unoptimized LLVM (compiles in a third of the time; both sweeps use it).
"""

import json
import os
import sys

import population_runs
import pytest
from population_runs import STABLE
from population_runs import ok as _ok
from population_runs import python as _python
from population_runs import read_json as _json
from population_runs import write_json as _write

from resnorm_jax.runs import sweep_point
from resnorm_jax.sweeps import grid as sweep_grid
from resnorm_jax.sweeps import jobs as sweep_jobs
from resnorm_jax.sweeps import runner as sweep_runner
from resnorm_jax.sweeps import slots as sweep_slots
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train.population import points as population_points


@pytest.fixture(scope="module")
def env(tmp_path_factory):
  return population_runs.child_env(tmp_path_factory.mktemp("jax_cache"))


def _grid_point(name, lr, seed, **overrides):
  return {
    "config": "configs/smoke.py",
    "name": name,
    "overrides": {"opt.lr": lr, "seed": seed, **overrides},
  }


def test_vmap_groups_points_that_differ_only_in_lr_and_seed():
  grid = [_grid_point(f"p{lr}-{s}", lr, s) for lr in (1e-3, 2e-3) for s in (0, 1)]
  grid += [_grid_point("deep", 1e-3, 0, **{"model.num_layers": 3})]
  grid += [_grid_point("default_lr", 1e-3, 2)]
  grid[-1]["overrides"].pop("opt.lr")  # the config's own lr: still the same program
  points = sweep_grid.parse_points(grid)
  expected = [sweep_grid.resolve(p, {}, None)[1] for p in points]
  assert sweep_grid.vmap_groups(expected) == [[0, 1, 2, 3, 5], [4]]
  assert sweep_grid.vmap_groups(expected, max_size=2) == [[0, 1], [2, 3], [4], [5]]
  assert sweep_grid.vmap_groups(expected, max_size=4) == [[0, 1, 2], [3, 5], [4]]
  assert sweep_grid.vmap_groups([]) == []


@pytest.mark.slow  # starts child processes
def test_population_jobs_record_every_member(tmp_path):
  grid = [_grid_point(f"p{s}", 1e-3, s) for s in (0, 1)] + [_grid_point("deep", 1e-3, 0)]
  grid[-1]["overrides"]["model.num_layers"] = 3
  todo = []
  for p in sweep_grid.parse_points(grid):
    overrides, expected = sweep_grid.resolve(p, {}, None)
    workdir = str(tmp_path / p.name)
    os.makedirs(workdir)
    with open(os.path.join(workdir, sweep_point.POINT_FILE), "w") as f:
      json.dump({"name": p.name, "index": p.index}, f)
    todo.append((sweep_jobs.Job(p, workdir, ["train", p.name], 1.0), overrides, expected))
  jobs = sweep_jobs.population_jobs(todo)
  assert [j.label for j in jobs] == ["p0 and 1 more (one program)", "deep"]
  population, single = jobs
  assert single is todo[2][0] and population.cost == 2.0
  assert population.command[-1] == f"--points={tmp_path / 'p0' / sweep_grid.POPULATION_FILE}"
  points = json.load(open(tmp_path / "p0" / sweep_grid.POPULATION_FILE))
  assert [p["workdir"] for p in points] == [str(tmp_path / "p0"), str(tmp_path / "p1")]
  assert [p["overrides"]["seed"] for p in points] == [0, 1]
  for name in ("p0", "p1"):
    info = json.load(open(tmp_path / name / sweep_point.POINT_FILE))
    assert info["command"] == population.command and info["population"] == ["p0", "p1"]
  # The runner records the population's exit in every member's folder.
  ok = [sys.executable, "-c", "print('step 3/3 | loss 1.0 | ETA 0m00s')"]
  population.command = ok
  single.command = ok
  codes = sweep_runner.run_points(jobs, [sweep_slots.Slot("0", None, {})], progress_every=0)
  assert codes == {"p0": 0, "p1": 0, "deep": 0}
  for name in ("p0", "p1", "deep"):
    assert json.load(open(tmp_path / name / sweep_point.POINT_FILE))["returncode"] == 0
  assert sweep_runner.log_progress(str(tmp_path / "p0" / "train.log"))[:2] == (3, 3)


def _checkpointed(workdir, step: int, written_by: dict | None) -> None:
  """A committed checkpoint's metadata at `step` in `workdir`, as orbax lays it out."""
  meta_dir = os.path.join(workdir, "ckpt", str(step), "meta")
  os.makedirs(meta_dir)
  open(os.path.join(workdir, "ckpt", str(step), "commit_success.txt"), "w").close()
  _write(os.path.join(meta_dir, "metadata"), {"leaves": {}, "written_by": written_by})


def test_a_sweep_rerun_continues_a_checkpointed_member_in_its_own_population(tmp_path):
  """p0 of a population of three finished, p1 and p2 were checkpointed by it: a rerun trains
  p1 and p2 in that population's points file (p0 held), not as a new population of two
  (another program, refused); the fresh points p3 and p4 group as before."""
  grid = [_grid_point(f"p{s}", 1e-3, s) for s in range(5)]
  todo, recorded = [], []
  for p in sweep_grid.parse_points(grid):
    overrides, expected = sweep_grid.resolve(p, {}, None)
    workdir = str(tmp_path / p.name)
    os.makedirs(workdir)
    _write(os.path.join(workdir, sweep_point.POINT_FILE), {"name": p.name, "index": p.index})
    recorded.append({"config": p.config, "overrides": overrides, "workdir": workdir})
    if p.name != "p0":  # p0 finished: not to do
      todo.append((sweep_jobs.Job(p, workdir, ["train", p.name], 1.0), overrides, expected))
  points_file = _write(tmp_path / "p0" / sweep_grid.POPULATION_FILE, recorded[:3])
  command = f"python -m experiments.train_population --points={points_file}"
  for slot in (1, 2):
    writer = population_points.written_by(3, slot, command)
    _checkpointed(recorded[slot]["workdir"], 8, writer)
  assert sweep_jobs.recorded_population(recorded[1]["workdir"]) == points_file
  _checkpointed(recorded[3]["workdir"], 4, ckpt_lib.SINGLE_RUN)  # a single run's: regrouped
  assert sweep_jobs.recorded_population(recorded[3]["workdir"]) is None
  jobs = sweep_jobs.population_jobs(todo)
  assert [j.label for j in jobs] == ["p1 and 1 more (one program)", "p3 and 1 more (one program)"]
  assert jobs[0].command == sweep_grid.population_command(points_file)
  assert [w for _, w in jobs[0].runs()] == [recorded[1]["workdir"], recorded[2]["workdir"]]
  assert json.load(open(points_file)) == recorded[:3]  # not rewritten
  info = json.load(open(tmp_path / "p2" / sweep_point.POINT_FILE))
  assert info["population"] == ["p0", "p1", "p2"] and info["command"] == jobs[0].command
  assert jobs[1].command[-1] == f"--points={tmp_path / 'p3' / sweep_grid.POPULATION_FILE}"
  # The points file gone or not listing the member at its slot: grouped as a fresh point.
  os.remove(points_file)
  assert sweep_jobs.recorded_population(recorded[1]["workdir"]) is None


@pytest.mark.slow  # three sweeps of training runs
@pytest.mark.long  # a whole grid through the CLI; the vmapped step: this file's other tests
def test_sweep_vmap_runs_a_grid_as_one_program(env, tmp_path, read_csv):
  # STABLE's three points: lr alone and seed alone differ (a fourth point, both at once, is
  # one more plain run and checks nothing more).
  grid = tmp_path / "grid.py"
  grid.write_text(
    "GRID = [\n"
    + "".join(
      f'  {{"config": "configs/smoke.py", "name": "lr{lr}-s{s}", '
      f'"overrides": {{"opt.lr": {lr}, "seed": {s}}}}},\n'
      for lr, s in STABLE
    )
    + "]\n"
  )
  sweep = ["scripts/sweep.py", f"--grid={grid}", "--progress_every=0"]
  vmapped = _ok(_python(env, [*sweep, f"--sweep_dir={tmp_path / 'vmap'}", "--vmap"]))
  assert "3 points in 1 jobs" in vmapped.stdout and vmapped.stdout.count("started on") == 1
  plain = _ok(_python(env, [*sweep, f"--sweep_dir={tmp_path / 'plain'}", "--jobs=auto"]))
  assert plain.stdout.count("started on") == 3
  names = [f"lr{lr}-s{s}" for lr, s in STABLE]
  for name in names:
    info = json.load(open(tmp_path / "vmap" / name / sweep_point.POINT_FILE))
    assert info["returncode"] == 0 and info["population"] == names
    assert _json(tmp_path / "vmap" / name, "summary.json")["status"] == "completed"
  log = tmp_path / "vmap" / names[0] / "train.log"
  assert sweep_runner.log_progress(str(log))[:2] == (20, 20)
  rows = {r["name"]: r for r in read_csv(tmp_path / "vmap" / "results.csv")}
  want = {r["name"]: r for r in read_csv(tmp_path / "plain" / "results.csv")}
  assert sorted(rows) == sorted(want) == sorted(names)
  for name in names:
    assert rows[name]["outcome"] == want[name]["outcome"]
    for key in ("final_eval_loss", "best_eval_loss", "final_train_loss"):
      assert abs(float(rows[name][key]) - float(want[name][key])) < 2e-3, (name, key)
  losses = [float(rows[name]["final_eval_loss"]) for name in names]
  assert len(set(losses)) == len(losses)  # each member its own lr and seed, not a copy
  again = _ok(_python(env, [*sweep, f"--sweep_dir={tmp_path / 'vmap'}", "--vmap"]))
  assert again.stdout.count(": done") == 3 and "0 points in 0 jobs" in again.stdout
