"""A sweep's points before any of them runs (resnorm_jax/sweeps/grid.py): the grid file and
its errors, point names and overrides, each point's resolved config checked as a run checks it
before compiling (the shipped grids' points included), a point's run state against the config
its folder recorded (which keys count), and data that is not there, refused before anything
starts."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from conftest import fake_run as _fake_run
from resnorm_jax.config.same_experiment import SWEEP, changed_keys
from resnorm_jax.sweeps import grid as sweep_grid
from resnorm_jax.sweeps import jobs as sweep_jobs


def _changed(recorded, expected) -> list[str]:
  return changed_keys(recorded, expected, SWEEP)


def test_run_state_skips_only_finished_runs_of_the_same_config(tmp_path):
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "overrides": {"opt.lr": 0.01}}])[
    0
  ]
  overrides, expected = sweep_grid.resolve(point, {"train.log_every": 2}, max_steps=3)
  assert overrides == {"opt.lr": 0.01, "train.log_every": 2, "train.steps": 3}
  assert expected["opt"]["lr"] == 0.01 and expected["train"]["steps"] == 3
  assert sweep_grid.run_state(str(tmp_path / "none"), expected) == "todo"
  for status, state in (("completed", "done"), ("diverged", "done"), ("interrupted", "todo")):
    _fake_run(tmp_path / status, {"status": status, "final_eval_loss": 3.0}, expected)
    assert sweep_grid.run_state(str(tmp_path / status), expected) == state
  other = json.loads(json.dumps(expected))
  other["opt"]["lr"] = 0.02
  _fake_run(tmp_path / "other", {"final_eval_loss": 3.0}, other)
  assert sweep_grid.run_state(str(tmp_path / "other"), expected) == "conflict"


def test_an_unfinished_run_of_other_keys_is_a_conflict_not_a_point_to_run(tmp_path):
  """After a kill, a rerun with --set=opt.lr=5e-3 ran each interrupted point, whose run
  refused the folder (exit 2) and failed; now the point is a conflict naming the key. An
  interrupted run of the same experiment, or of fewer steps, is still resumed."""
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "name": "p"}])[0]
  _, killed = sweep_grid.resolve(point, {}, max_steps=None)
  _, expected = sweep_grid.resolve(point, {"opt.lr": 5e-3}, max_steps=None)
  _fake_run(tmp_path / "p", {"status": "interrupted", "steps": 10}, killed)
  assert sweep_grid.run_state(str(tmp_path / "p"), expected) == "conflict"
  keys = sweep_grid.conflict_keys(str(tmp_path / "p"), expected)
  assert "opt.lr" in keys and "0.005" in keys
  assert sweep_grid.run_state(str(tmp_path / "p"), killed) == "todo"
  _, longer = sweep_grid.resolve(point, {"train.steps": 40}, max_steps=None)
  assert sweep_grid.run_state(str(tmp_path / "p"), longer) == "todo"


@pytest.mark.parametrize("seed", [-1, 2**31])
def test_a_point_with_a_bad_seed_is_refused_by_the_dry_run_as_by_a_run(tmp_path, seed):
  """--dry_run listed a seed=-1 point as todo; its run refused it (exit 2). The sweep's check
  of every point now makes the run's seed check: refused before anything, dry run included."""
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "overrides": {"seed": seed}}])
  with pytest.raises(ValueError, match=r"seed=.* must be an integer in \[0, 2147483647\]"):
    sweep_grid.resolve(point[0], {}, max_steps=None)
  grid = tmp_path / "grid.py"
  grid.write_text(f'GRID = [{{"config": "configs/smoke.py", "overrides": {{"seed": {seed}}}}}]\n')
  sweep = tmp_path / "sweep"
  proc = subprocess.run(
    [sys.executable, "scripts/sweep.py", f"--grid={grid}", f"--sweep_dir={sweep}", "--dry_run"],
    cwd=ROOT, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert proc.returncode == 2 and "todo" not in proc.stdout, proc.stdout + proc.stderr
  assert f"seed={seed} must be an integer" in proc.stderr and "Traceback" not in proc.stderr
  assert not sweep.exists()


def test_changed_keys_compares_only_what_results_depend_on(monkeypatch):
  point = sweep_grid.parse_points([{"config": "configs/postnorm_96L.py"}])[0]
  _, expected = sweep_grid.resolve(point, {}, None)
  recorded = json.loads(json.dumps(expected))
  assert _changed(recorded, expected) == []
  recorded["train"]["log_every"] += 1  # logging only
  recorded["diag"]["per_layer"] = not recorded["diag"]["per_layer"]
  recorded["data_split"] = {"train_tokens": 5}  # what the run adds
  assert _changed(recorded, expected) == []
  # A key added to the schema after the run: unchanged while it keeps its default.
  del recorded["train"]["final_eval_tokens"]
  assert _changed(recorded, expected) == []
  bigger = json.loads(json.dumps(expected))
  bigger["train"]["final_eval_tokens"] *= 2
  assert _changed(recorded, bigger) == ["train.final_eval_tokens"]
  recorded["train"]["seq_len"] += 1
  assert _changed(recorded, expected) == ["train.seq_len"]
  recorded["train"]["seq_len"] -= 1
  # A key that moved: read at its new place.
  recorded["train"]["old_steps"] = recorded["train"].pop("steps")
  assert _changed(recorded, expected) == ["train.old_steps", "train.steps"]
  monkeypatch.setitem(sweep_grid.MOVED_KEYS, "train.old_steps", "train.steps")
  assert _changed(recorded, expected) == []


def test_grid_and_override_errors():
  with pytest.raises(ValueError, match="repeated"):
    sweep_grid.parse_points([{"config": "a.py"}, {"config": "a.py"}])
  with pytest.raises(ValueError, match="expected a dict"):
    sweep_grid.parse_points([{"config": "a.py", "overide": {}}])
  with pytest.raises(ValueError, match="only bool"):
    sweep_grid.parse_points([{"config": "a.py", "overrides": {"k": [1]}}])
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "overrides": {"opt.lrr": 1.0}}])[
    0
  ]
  with pytest.raises(ValueError, match="lrr"):
    sweep_grid.resolve(point, {}, None)
  # a bad value, not only a bad key: refused before any point runs, naming point and choices
  point = sweep_grid.parse_points(
    [{"config": "configs/smoke.py", "overrides": {"model.norm": "layernrom"}}]
  )[0]
  with pytest.raises(ValueError, match=r"point smoke__norm=layernrom .*'layernrom'.*rmsnorm"):
    sweep_grid.resolve(point, {}, None)
  assert sweep_grid.point_name(
    "configs/x_96L.py:smoke", {"model.num_layers": 6, "opt.lr": 1e-3}
  ) == ("x_96L-smoke__num_layers=6__lr=0.001")
  sets = sweep_grid.parse_sets(["opt.lr=1e-3", "opt.schedule=cosine", "model.qk_norm=true"])
  assert sets == {"opt.lr": 1e-3, "opt.schedule": "cosine", "model.qk_norm": True}


SHIPPED_GRIDS = sorted(
  os.path.relpath(os.path.join(d, f), ROOT)
  for d, _, files in os.walk(os.path.join(ROOT, "configs", "sweeps"))
  for f in files
  if f.endswith(".py")
)


@pytest.mark.parametrize("grid", SHIPPED_GRIDS)
def test_every_shipped_grid_point_is_a_valid_run(grid):
  """Each grid in configs/sweeps/ loads, and every point's config with its overrides passes
  the device-free checks a run does before compiling (`sweep_grid.resolve` calls
  `run_setup.validate`: keys, model choices, train settings, optimizer and schedule)."""
  points = sweep_grid.load_grid(os.path.join(ROOT, grid))
  assert points, f"{grid} has no points"
  for point in points:
    sweep_grid.resolve(point, {}, None)


@pytest.mark.parametrize(
  "key, value, message",
  [
    ("model.norm", "layernrom", r"model.norm='layernrom'"),
    ("train.steps", 0, r"train.steps=0 must be a positive integer"),
    ("opt.schedule", "cosin", r"opt.schedule='cosin'.*constant, inverse_sqrt, cosine, linear"),
    ("opt.warmup_steps", 1500, r"train.steps.*> opt.warmup_steps=1500 for the linear schedule"),
  ],
)
def test_validate_refuses_a_bad_point_before_any_device(key, value, message):
  """The shipped-grid check above calls `run_setup.validate`, the same function `run_setup.build`
  starts with: a model, train or optimizer error in a grid point is caught there."""
  from configs import base
  from resnorm_jax.train import run_setup

  config = base.get_config()
  config.opt.schedule = "linear"  # so that warmup >= steps is refused
  assert (
    run_setup.validate(config, vocab_size=256, platform="cpu").num_layers == config.model.num_layers
  )
  section, name = key.split(".")
  config[section][name] = value
  with pytest.raises(ValueError, match=message):
    run_setup.validate(config, vocab_size=256, platform="cpu")


def test_missing_data_names_local_paths_that_match_nothing(tmp_path):
  (tmp_path / "a.txt").write_text("text")
  (tmp_path / "shards").mkdir()

  def data(source, path="", val_path=""):
    return {"data": {"source": source, "path": path, "val_path": val_path}}

  assert sweep_jobs.missing_data(data("stdlib")) == []
  assert sweep_jobs.missing_data(data("text", str(tmp_path / "a.txt"))) == []
  assert sweep_jobs.missing_data(data("text", str(tmp_path / "*.txt"))) == []
  assert sweep_jobs.missing_data(data("tokens", str(tmp_path / "shards"))) == []
  assert sweep_jobs.missing_data(data("tokens", "gs://bucket/none", "gs://b/v")) == []
  assert sweep_jobs.missing_data(data("text", "tests/data")) == []  # from the repo root
  assert sweep_jobs.missing_data(data("text", str(tmp_path / "b.txt"))) == [
    f"data.path={tmp_path / 'b.txt'} (no such file)"
  ]
  assert sweep_jobs.missing_data(
    data("tokens", str(tmp_path / "shards"), str(tmp_path / "val" / "*.bin"))
  ) == [f"data.val_path={tmp_path / 'val' / '*.bin'} (matches no file)"]
  assert sweep_jobs.missing_data(data("tokens")) == [
    "data.path is empty (data.source='tokens' reads it)"
  ]


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_a_sweep_with_a_missing_data_file_is_refused_before_any_point_starts(tmp_path):
  """The missing file was found only when its point's turn came (a failed run, maybe hours
  in); now the sweep exits 2 at once naming the point and the path, nothing started."""
  text = tmp_path / "corpus.txt"
  text.write_text("some text\n" * 200)
  gone = tmp_path / "gone.txt"
  grid = tmp_path / "grid.py"
  grid.write_text(
    "GRID = [\n"
    '  {"config": "configs/smoke.py", "name": "stdlib"},\n'
    f'  {{"config": "configs/smoke.py", "name": "here", "overrides": '
    f'{{"data.source": "text", "data.path": "{text}"}}}},\n'
    f'  {{"config": "configs/smoke.py", "name": "gone", "overrides": '
    f'{{"data.source": "text", "data.path": "{gone}"}}}},\n'
    "]\n"
  )
  sweep_dir = tmp_path / "sweep"
  proc = subprocess.run(
    [sys.executable, "scripts/sweep.py", f"--grid={grid}", f"--sweep_dir={sweep_dir}"],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS="cpu"),
    capture_output=True,
    text=True,
    timeout=240,
  )
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert proc.stderr.splitlines() == [
    f"[3] gone: missing data: data.path={gone} (no such file)",
    "error: 1 pending point(s) name data that is not there (gone); nothing was started",
  ]
  assert "started" not in proc.stdout and not sweep_dir.exists()


@pytest.mark.parametrize("name", [".", "..", "a/b", "../escaped", "/abs"])
def test_a_point_name_that_leaves_the_sweep_folder_is_refused(name):
  """A point named `.` wrote into the sweep folder itself, one named `..` outside it."""
  with pytest.raises(ValueError, match=rf"point name={re.escape(repr(name))} is not a folder name"):
    sweep_grid.parse_points([{"config": "configs/smoke.py", "name": name}])


@pytest.mark.slow  # a sweep process
def test_a_sweep_with_a_point_named_dotdot_exits_2_before_anything_runs(tmp_path):
  grid = tmp_path / "grid.py"
  grid.write_text('GRID = [{"config": "configs/smoke.py", "name": ".."}]\n')
  sweep_dir = tmp_path / "sweeps" / "grid"
  proc = subprocess.run(
    [sys.executable, "scripts/sweep.py", f"--grid={grid}", f"--sweep_dir={sweep_dir}"],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS="cpu"),
    capture_output=True,
    text=True,
    timeout=240,
  )
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith("error: grid.py: GRID[0]: point name='..' is not a folder name"), line
  assert sorted(os.listdir(tmp_path)) == ["grid.py"]  # nothing written, in or above the sweep


def test_a_dry_run_ends_with_its_total_and_the_cost_of_what_is_left():
  from resnorm_jax.sweeps.jobs import dry_run_total, seconds_per_cost

  # Two finished runs took 2 s and 4 s a unit of cost: the median rate is 3 s.
  assert seconds_per_cost([(100.0, 200.0), (100.0, 400.0), (50.0, 0.0)]) == 3.0
  assert seconds_per_cost([]) is None
  line = dry_run_total(["done", "todo", "todo", "queued (SLURM task 3)"], [600.0, 600.0], 3.0)
  assert line == (
    "4 points: 1 done, 2 todo, 1 queued. The 2 to run: about 1.0 core-hours at the rate of the "
    "finished runs here (a point a core)."
  )
  assert dry_run_total(["todo"], [1.0], None).endswith("no estimate of the cost.")
  assert dry_run_total(["done"], [], 3.0) == "1 points: 1 done. Nothing to run."
