"""A sweep's results (resnorm_jax/runs/sweep_results.py, boundary.py, stability_map.py): each
run's outcome, the collected results and their seed groups, the stability boundary table and its
figure from one or several sweeps, and scripts/sweep.py end to end to its results and plots (a
grid of tiny runs)."""

import csv
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from conftest import fake_run as _fake_run
from resnorm_jax.analysis import boundary, stability_map
from resnorm_jax.runs import curves as run_records
from resnorm_jax.runs import outcome, sweep_point, sweep_results
from resnorm_jax.sweeps import grid as sweep_grid


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
  with open(tmp_path / "c" / sweep_point.POINT_FILE, "w") as f:
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


@pytest.mark.slow  # runs scripts/sweep.py (training runs) and the plots
@pytest.mark.long  # a sweep and its plots in processes
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
