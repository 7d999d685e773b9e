"""Sweeps: grid points and their run state, job slots and running, collected results, the
stability boundary table, and scripts/sweep.py end to end (a grid of tiny runs)."""

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from resnorm_jax.config.same_experiment import SWEEP, changed_keys
from resnorm_jax.tools import (
  boundary,
  run_records,
  stability_map,
  sweep_grid,
  sweep_jobs,
  sweep_records,
  sweep_results,
  sweep_runner,
  sweep_slots,
)
from resnorm_jax.train import outcome

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _changed(recorded, expected) -> list[str]:
  return changed_keys(recorded, expected, SWEEP)


def _fake_run(workdir, summary: dict, config: dict | None = None, point: dict | None = None):
  os.makedirs(workdir, exist_ok=True)
  full = {"status": "completed", "unigram_entropy": 3.3, "steps": 2, **summary}
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump(full, f)
  if config is not None:
    with open(os.path.join(workdir, "config.json"), "w") as f:
      json.dump({**config, "resolved_model": {"num_layers": config["model"]["num_layers"]}}, f)
  if point is not None:
    with open(os.path.join(workdir, sweep_grid.POINT_FILE), "w") as f:
      json.dump(point, f)


# ------------------------------------------------------------------------------------------
# Sweep logic on fake runs
# ------------------------------------------------------------------------------------------


def test_classify():
  c = outcome.classify
  assert outcome.STUCK_MARGIN == 0.1
  assert c({"status": "completed", "final_eval_loss": 2.3, "unigram_entropy": 3.3}) == "trained"
  assert c({"status": "completed", "final_eval_loss": 3.21, "unigram_entropy": 3.3}) == "stuck"
  assert c({"status": "completed", "final_eval_loss": 3.19, "unigram_entropy": 3.3}) == "trained"
  # The held-out unigram cross-entropy is the plateau when recorded: the 3.429 run
  # (train-split entropy 3.485, held-out 3.46) sat on the plateau and is stuck.
  plateau = {"status": "completed", "unigram_entropy": 3.485, "heldout_unigram_entropy": 3.46}
  assert c({**plateau, "final_eval_loss": 3.429}) == "stuck"
  assert c({**plateau, "final_eval_loss": 3.35}) == "trained"
  assert c({"status": "completed", "final_eval_loss": 3.9, "unigram_entropy": 3.3}) == "stuck"
  assert c({"status": "completed", "final_eval_loss": math.nan, "unigram_entropy": 3.3}) == (
    "diverged"
  )
  assert c({"status": "diverged", "final_eval_loss": 2.0, "unigram_entropy": 3.3}) == "diverged"
  assert c({"status": "interrupted", "final_eval_loss": 2.0, "unigram_entropy": 3.3}) == (
    "interrupted"
  )
  assert c(None) == "pending"
  assert c({"status": "completed", "final_eval_loss": 3.2, "unigram_entropy": 3.3}, 0.2) == "stuck"


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


def test_collect_results_and_seed_groups(tmp_path, read_csv):
  def config(n, seed, lr):
    return {"name": "x", "seed": seed, "model": {"num_layers": n}, "opt": {"lr": lr}}

  runs = [  # (name, layers, seed, lr, final eval loss, status)
    ("a0", 6, 0, 1e-3, 2.0, "completed"),
    ("a1", 6, 1, 1e-3, 2.2, "completed"),
    ("a2", 6, 2, 1e-3, 3.29, "completed"),
    ("b0", 6, 0, 2e-3, 1.0, "diverged"),
  ]
  for i, (name, n, seed, lr, loss, status) in enumerate(runs):
    over = {"model.num_layers": n, "seed": seed, "opt.lr": lr}
    point = {"index": i, "config": "configs/postnorm_96L.py", "overrides": over}
    _fake_run(
      tmp_path / name, {"status": status, "final_eval_loss": loss}, config(n, seed, lr), point
    )
  os.makedirs(tmp_path / "c")  # launched, crashed before any summary
  with open(tmp_path / "c" / sweep_grid.POINT_FILE, "w") as f:
    json.dump({"index": 9, "config": "configs/prenorm_96L.py", "returncode": 1}, f)
  rows = sweep_results.collect(str(tmp_path))
  assert [r["name"] for r in rows] == ["a0", "a1", "a2", "b0", "c"]
  assert [r["outcome"] for r in rows] == ["trained", "trained", "stuck", "diverged", "failed"]
  assert rows[0]["variant"] == "postnorm" and rows[0]["num_layers"] == 6
  assert rows[1]["opt.lr"] == 1e-3 and math.isclose(rows[0]["gap"], 1.3)
  (group,) = sweep_results.seed_groups(rows)
  assert group["n"] == 3 and group["seeds"] == "0 1 2" and group["statuses"] == "trained:2 stuck:1"
  # A folder holding one point (an extra seed of one cell) still names its lr.
  shutil.copytree(tmp_path / "a0", tmp_path / "one" / "a0")
  (single,) = sweep_results.collect(str(tmp_path / "one"))
  assert single["name"] == "a0" and single["opt.lr"] == 1e-3
  assert math.isclose(group["final_eval_mean"], np.mean([2.0, 2.2, 3.29]))
  assert math.isclose(group["final_eval_std"], np.std([2.0, 2.2, 3.29], ddof=1))
  paths = sweep_results.write_results(str(tmp_path), rows)
  assert [os.path.basename(p) for p in paths] == ["results.csv", "results.md", "results_seeds.csv"]
  assert "| a2 |" in open(paths[1]).read() and "Over seeds" in open(paths[1]).read()
  cells = stability_map.stability_cells(read_csv(paths[0]))
  assert cells[0] == ["postnorm", "prenorm"] and cells[1] == [6]
  assert cells[2][("postnorm", 6)][0] == "trained"  # the most common status of the 4 runs


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


# ------------------------------------------------------------------------------------------
# Command lines, end to end
# ------------------------------------------------------------------------------------------


@pytest.mark.slow  # runs scripts/sweep.py (training runs) and the plots
def test_sweep_and_plot_cli(tmp_path, read_csv):
  out = tmp_path
  grid = out / "grid.py"
  grid.write_text(
    'GRID = [{"config": "configs/smoke.py", "name": "fresh"},\n'
    '        {"config": "configs/smoke.py", "name": "done", "overrides": {"seed": 1}}]\n'
  )
  # "done" is finished already (a fake summary of the same config): the sweep must skip it.
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "overrides": {"seed": 1}}])[0]
  _, expected = sweep_grid.resolve(point, {}, max_steps=2)
  _fake_run(out / "sweep" / "done", {"status": "completed", "final_eval_loss": 3.4}, expected)
  first = subprocess.run(
    [sys.executable, "scripts/sweep.py", f"--grid={grid}", f"--sweep_dir={out / 'sweep'}"]
    + ["--max_steps=2"],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS="cpu"),
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    timeout=240,
  )
  code, log = first.returncode, first.stdout
  assert code == 0, log[-3000:]
  assert "done: done" in log and "fresh: todo" in log
  sweep_dir = out / "sweep"
  summary = json.load(open(sweep_dir / "fresh" / "summary.json"))
  assert summary["status"] == "completed" and summary["steps"] == 2  # --max_steps
  rows = read_csv(sweep_dir / "results.csv")
  assert [r["name"] for r in rows] == ["fresh", "done"]
  assert rows[0]["outcome"] in ("trained", "stuck") and rows[1]["outcome"] == "stuck"
  assert os.path.isfile(sweep_dir / "results.md")
  # Started again: both points are finished runs of the same configs, nothing runs.
  again = subprocess.run(
    [sys.executable, "scripts/sweep.py", f"--grid={out / 'grid.py'}"]
    + [f"--sweep_dir={sweep_dir}", "--max_steps=2"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert again.returncode == 0 and again.stdout.count(": done") == 2, again.stdout + again.stderr
  plots = subprocess.run(
    [sys.executable, "scripts/plot_curves.py", str(sweep_dir / "fre*"), f"--out={out}/c.png"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert plots.returncode == 0, plots.stderr
  assert os.path.getsize(out / "c.png") > 1000
  curves = run_records.read_curves(str(sweep_dir / "fresh"))
  # the plateau drawn is the periodic eval's own no-context loss (the escape rule's baseline)
  assert curves["train"][0] and curves["unigram"] == summary["periodic_eval_no_context_loss"]
  map_png = stability_map.plot_stability_map(
    read_csv(sweep_dir / "results.csv"), str(out / "m.png")
  )
  assert os.path.getsize(map_png) > 1000


@pytest.mark.slow  # two sweeps of training runs
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


def test_boundary_table_takes_the_largest_lr_that_trained(tmp_path):
  def row(v, n, lr, outcome, w=0):
    return {
      "variant": v,
      "num_layers": str(n),
      "opt.lr": str(lr),
      "opt.warmup_steps": str(w),
      "outcome": outcome,
      "final_eval_loss": "2.5",
    }

  rows = [
    row("post", 6, 5e-4, "trained"),
    row("post", 6, 1e-3, "trained"),
    row("post", 6, 2e-3, "stuck"),
    row("post", 6, 4e-3, "trained"),  # a lucky run above
    row("post", 12, 5e-4, "stuck"),
    row("post", 12, 1e-3, "diverged"),
    row("pre", 6, 1e-3, "trained"),
    row("pre", 6, 1e-3, "stuck"),
    row("pre", 6, 1e-3, "trained"),
    row("pre", 6, 2e-3, "pending"),
  ]
  table = {(t["variant"], t["num_layers"]): t for t in boundary.boundary_table(rows)}
  assert table[("post", 6)]["max_trained_lr"] == 4e-3
  assert table[("post", 6)]["first_failing_lr_above"] is None
  assert table[("post", 12)]["max_trained_lr"] is None
  assert table[("post", 12)]["first_failing_lr_above"] == 5e-4
  assert table[("pre", 6)]["max_trained_lr"] == 1e-3  # 2 of 3 seeds trained; pending ignored
  out = boundary.plot_boundary(rows, str(tmp_path / "b.png"))
  assert os.path.getsize(out) > 1000 and os.path.isfile(tmp_path / "boundary.csv")
  # The figure's cells: seeds counted per depth and lr, pending points left out.
  cells = boundary.boundary_cells(rows)
  assert cells[("pre", 0)] == {(6, 1e-3): {"runs": 3, "trained": 2, "loss": 2.5}}
  assert cells[("post", 0)][(12, 1e-3)] == {"runs": 1, "trained": 0, "loss": 2.5}
  assert boundary.budget_words(rows) == ""
  steps = [dict(rows[0], **{"train.steps": "300"}), dict(rows[1], steps="1500")]
  assert boundary.budget_words(steps) == "300-1,500 steps"
  md = (tmp_path / "boundary.md").read_text().splitlines()
  assert md[0] == "| largest lr that trained | 6 layers | 12 layers |"
  # 2e-3 failed below the largest lr that trained: said, not "every lr tried trained"
  post = "| post | >= 0.004 (the largest lr tried; 0.002 did not train) | none (tried 0.0005 0.001)"
  assert post + " |" in md
  assert (
    "| pre | >= 0.001 (every lr tried trained); seeds split at 0.001 (2 of 3 trained) | - |" in md
  )
  assert table[("post", 6)]["split_seeds"] == ""
  bounded = [
    dict(t, num_layers=24, bounded=True, first_failing_lr_above=8e-3)
    for t in [{"variant": "dn", "opt.warmup_steps": 100, "max_trained_lr": 4e-3, "lrs_tried": "x"}]
  ]
  assert "| dn (warmup 100) | **0.004** (0.008 fails) |" in boundary.boundary_markdown(bounded)


@pytest.mark.slow  # runs scripts/sweep.py
def test_boundary_cli_writes_every_seed_s_points_in_one_results_csv(tmp_path):
  """--boundary=A,B writes results.csv beside the figure: the counted runs of both sweeps
  (seed column kept); a symlink there is replaced, not written through; a figure inside a
  sweep folder leaves that sweep's own results.csv alone."""
  head = "name,variant,num_layers,seed,opt.lr,opt.warmup_steps,outcome,final_eval_loss\n"
  seed0 = tmp_path / "runs" / "results.csv"
  seed1 = tmp_path / "runs_seed1" / "results.csv"
  for path, text in [
    (seed0, "a,post,6,0,0.001,0,trained,2.5\nb,post,6,0,0.002,0,pending,\n"),
    (seed1, "a,post,6,1,0.001,0,stuck,3.3\n"),
  ]:
    path.parent.mkdir()
    path.write_text(head + text)
  os.symlink(seed0, tmp_path / "results.csv")
  before = seed0.read_text()

  def boundary(out):
    return subprocess.run(
      [sys.executable, "scripts/plot_curves.py", f"--boundary={seed0},{seed1}", f"--out={out}"],
      cwd=ROOT,
      capture_output=True,
      text=True,
    )

  done = boundary(tmp_path / "boundary.png")
  assert done.returncode == 0, done.stderr
  assert not os.path.islink(tmp_path / "results.csv") and seed0.read_text() == before
  with open(tmp_path / "results.csv", newline="") as f:
    points = list(csv.DictReader(f))
  assert [(p["seed"], p["outcome"]) for p in points] == [("0", "trained"), ("1", "stuck")]
  assert boundary(seed0.parent / "boundary.png").returncode == 0
  assert seed0.read_text() == before  # the figure in a sweep folder: its results.csv untouched
  (seed1.parent / "a").mkdir()  # a sweep folder that is not an input: known by its points
  (seed1.parent / "a" / "sweep_point.json").write_text("{}")
  seed1_before = seed1.read_text()
  assert boundary(seed1.parent / "boundary.png").returncode == 0
  assert seed1.read_text() == seed1_before


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


# ------------------------------------------------------------------------------------------
# Missing data before a sweep starts, and why a point failed
# ------------------------------------------------------------------------------------------


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
    with open(os.path.join(job.workdir, sweep_grid.POINT_FILE), "w") as f:
      json.dump({"name": job.point.name, "index": job.point.index, "config": "c.py"}, f)
  slot = sweep_slots.Slot("0", None, {})
  codes = sweep_runner.run_points(jobs, [slot], progress_every=0)
  assert codes == {"fails": 2, "killed": -signal.SIGKILL, "ok": 0}
  out = capsys.readouterr().out
  why = "exit 2: ValueError: data.path='/d/c.txt' matches no file"
  assert f"[1] fails: failed ({why}) in " in out
  assert "[2] killed: failed (killed by SIGKILL: compiling) in " in out
  point = json.load(open(tmp_path / "fails" / sweep_grid.POINT_FILE))
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
