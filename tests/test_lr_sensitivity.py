"""LR sensitivity (Wortsman et al. 2023) of an lr sweep: the formula on a hand-computed curve,
the boundary lr, and scripts/lr_sensitivity.py on a tiny tree of fake run folders."""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import write_run_folder
from resnorm_jax.analysis import lr_sensitivity as lrs
from resnorm_jax.analysis import lr_sweep_rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = 3.2


def fake_run(root, variant, depth, lr, seed, loss, status="completed", steps=100):
  """A finished run folder as the sweep leaves it: sweep_point, config, summary, curve."""
  run = os.path.join(root, f"{variant}-L{depth}-lr{lr:g}-s{seed}")
  point = {"config": f"configs/{variant}_96L.py", "index": 0, "overrides": {"opt.lr": lr}}
  config = {
    "name": f"{variant}_96L",
    "seed": seed,
    "model": {"num_layers": depth, "vocab_size": 256},
    "resolved_model": {"num_layers": depth, "vocab_size": 256},
    "opt": {"lr": lr, "warmup_steps": 0, "schedule": "constant"},
    "train": {"steps": steps},
    "data": {"source": "stdlib", "path": ""},
  }
  summary = {
    "status": status,
    "steps": steps,
    "final_eval_loss": loss,
    "heldout_unigram_entropy": BASE,
    "unigram_entropy": 3.25,
  }
  curve = [{"step": 50, "train/loss": 3.5, "eval/loss": 3.4}]
  curve += [{"step": steps, "train/loss": loss, "eval/loss": loss}]
  return write_run_folder(run, curve, sweep_point=point, config=config, summary=summary)


def _row(lr, seed, loss, outcome="trained"):
  row = {"opt.lr": lr, "seed": seed, "final_eval_loss": loss, "baseline": BASE, "outcome": outcome}
  return {**row, "capped_loss": lr_sweep_rows.capped_loss(row)}


def test_capped_loss():
  assert lr_sweep_rows.capped_loss({"final_eval_loss": 2.0, "baseline": BASE}) == 2.0
  above = {"final_eval_loss": 3.9, "baseline": BASE}
  assert lr_sweep_rows.capped_loss(above) == BASE  # above: the cap
  assert lr_sweep_rows.capped_loss({"final_eval_loss": math.nan, "baseline": BASE}) == BASE
  diverged = {"final_eval_loss": 2.0, "baseline": BASE, "outcome": "diverged"}
  assert lr_sweep_rows.capped_loss(diverged) == BASE
  assert lr_sweep_rows.capped_loss({"final_eval_loss": 2.0, "baseline": None}) is None


def test_sensitivity_by_hand_with_a_capped_point_and_two_seeds():
  rows = [
    _row(1e-3, 0, 2.0),
    _row(1e-3, 1, 2.2),  # seed mean 2.1
    _row(2e-3, 0, 1.8),
    _row(2e-3, 1, 2.0),  # 1.9, the best
    _row(4e-3, 0, 3.9),  # capped at 3.2
    _row(4e-3, 1, math.nan, "diverged"),  # counts as 3.2: mean 3.2
  ]
  curve = lrs.lr_curve(rows)
  assert [p["lr"] for p in curve] == [1e-3, 2e-3, 4e-3]
  assert [p["mean"] for p in curve] == pytest.approx([2.1, 1.9, 3.2])
  # mean of (2.1, 1.9, 3.2) = 2.4, minus the best 1.9
  assert lrs.sensitivity(curve) == pytest.approx(0.5)
  assert curve[2]["diverged"] == [False, True]


def test_boundary_lr_is_the_largest_lr_within_the_tolerance_of_the_best():
  means = {1e-3: 2.5, 2e-3: 2.1, 4e-3: 2.0, 8e-3: 2.09, 1.6e-2: 2.3, 3.2e-2: 3.2}
  curve = [{"lr": lr, "mean": m} for lr, m in means.items()]
  assert lrs.boundary_lr(curve, BASE) == 8e-3  # 2.09 within 0.1 of 2.0; 2.3 is not
  assert lrs.boundary_lr(curve, BASE, tolerance=0.3) == 1.6e-2
  stuck = [{"lr": lr, "mean": m} for lr, m in ((1e-3, 3.15), (2e-3, 3.2))]
  assert lrs.boundary_lr(stuck, BASE) is None  # nothing trained: no boundary


def test_sensitivity_table_needs_five_lrs():
  rows = [{**_row(lr, 0, 2.0 + lr), "variant": "v", "num_layers": 6} for lr in (1, 2, 3, 4)]
  (short,) = lrs.sensitivity_table(rows)
  assert short["lr_sensitivity"] is None and short["n_lrs"] == 4 and "not computed" in short["note"]
  rows.append({**_row(5, 0, BASE + 1), "variant": "v", "num_layers": 6})
  (full,) = lrs.sensitivity_table(rows)
  # capped means 3.0, 4.0 -> 3.2 (capped) ... : (3 + 3.2 * 4) / 5 - 3.0
  assert full["lr_sensitivity"] == pytest.approx((3.0 + 3.2 * 4) / 5 - 3.0)
  assert full["best_lr"] == 1 and full["best_loss"] == pytest.approx(3.0)
  assert full["boundary_lr"] == 1 and full["note"] == ""  # 3.2 is not within 0.1 of 3.0
  assert full["lrs_trained"] == 1  # BASE is 3.2: only the 3.0 curve point is 0.1 below it
  stuck = [{**r, "capped_loss": 3.15} for r in rows]  # not 0.1 below the baseline anywhere
  (none,) = lrs.sensitivity_table(stuck)
  assert none["boundary_lr"] is None and none["note"] == "no lr trained"
  # a curve that never trains has no sensitivity (the formula's ~0 would read "insensitive")
  assert none["lr_sensitivity"] is None and none["lrs_trained"] == 0
  assert none["best_lr"] is None  # the least bad plateau loss is no best lr


@pytest.mark.slow  # runs scripts/lr_sensitivity.py
def test_script_on_a_tiny_run_tree(tmp_path, read_csv):
  runs = tmp_path / "runs"
  losses = {1e-3: 2.4, 2e-3: 2.2, 4e-3: 2.1, 8e-3: 2.15, 1.6e-2: 2.6, 3.2e-2: math.nan}
  for lr, loss in losses.items():
    for seed in (0, 1):
      status = "diverged" if math.isnan(loss) else "completed"
      fake_run(runs, "postnorm", 6, lr, seed, loss + 0.02 * seed, status)
  for lr in (1e-3, 2e-3):  # a curve of two points: not computed
    fake_run(runs, "prenorm", 12, lr, 0, 2.0)
  os.makedirs(runs / "prenorm-L12-lr0.064-s0")  # a point not run yet: its lr is in the grid
  with open(runs / "prenorm-L12-lr0.064-s0" / "sweep_point.json", "w") as f:
    json.dump({"config": "configs/prenorm_96L.py", "overrides": {"opt.lr": 0.064}}, f)
  out = tmp_path / "out"
  cmd = [sys.executable, os.path.join(ROOT, "scripts", "lr_sensitivity.py")]
  proc = subprocess.run(
    [*cmd, f"--runs={runs}", f"--out_dir={out}"], capture_output=True, text=True, check=True
  )
  assert "14 finished runs, 2 curves" in proc.stdout
  assert sorted(os.listdir(out)) == [
    "curves.png",
    "results.csv",
    "sensitivity.csv",
    "sensitivity.png",
  ]
  results = read_csv(str(out / "results.csv"))
  assert len(results) == 14 and results[0]["variant"] == "postnorm"
  assert {"opt.lr", "seed", "train.steps", "escape_step", "diverged_step", "late_slope"} <= set(
    results[0]
  )
  nan_row = [r for r in results if r["opt.lr"] == "0.032"][0]
  assert nan_row["outcome"] == "diverged" and nan_row["capped_loss"] == str(BASE)
  table = {(r["variant"], r["num_layers"]): r for r in read_csv(str(out / "sensitivity.csv"))}
  post = table[("postnorm", "6")]
  means = [m + 0.01 for m in (2.4, 2.2, 2.1, 2.15, 2.6)] + [BASE]
  assert float(post["lr_sensitivity"]) == pytest.approx(sum(means) / 6 - min(means))
  assert float(post["boundary_lr"]) == 0.008 and float(post["best_lr"]) == 0.004
  assert post["n_lrs"] == "6" and post["seeds"] == "0 1" and post["note"] == "partial: 6 of 7 lrs"
  assert table[("prenorm", "12")]["lr_sensitivity"] == ""


def test_late_slope_is_the_least_squares_slope_of_the_second_half_per_1000_steps():
  steps = list(range(50, 1050, 50))
  falling = [3.4 - 0.1 * s / 1000 for s in steps]  # 0.1 nats per 1,000 steps throughout
  assert lr_sweep_rows.late_slope(steps, falling, 1000) == pytest.approx(-0.1)
  # Only the evals from step 500 on count: a fast first half changes nothing.
  early_drop = [4.0 if s < 500 else v for s, v in zip(steps, falling, strict=True)]
  assert lr_sweep_rows.late_slope(steps, early_drop, 1000) == pytest.approx(-0.1)
  assert lr_sweep_rows.late_slope(steps, [3.3] * len(steps), 1000) == pytest.approx(0.0)
  # The window follows the budget: at 3,000 steps these evals are all before step 1,500.
  assert lr_sweep_rows.late_slope(steps, falling, 3000) is None
  assert lr_sweep_rows.late_slope([500, 1000], [3.3, 3.2], 1000) is None  # two evals are no trend


def test_result_row_carries_the_late_slope_of_its_curve(tmp_path):
  run = fake_run(tmp_path, "postnorm", 24, 1e-3, 0, 3.25, steps=1000)
  curve = [{"step": s, "eval/loss": 3.35 - 0.05 * s / 1000} for s in range(50, 1050, 50)]
  with open(os.path.join(run, "metrics.jsonl"), "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in curve)
  assert lr_sweep_rows.result_row(run)["late_slope"] == pytest.approx(-0.05)
  nan = fake_run(tmp_path, "postnorm", 24, 2e-3, 0, math.nan, status="diverged", steps=1000)
  assert lr_sweep_rows.result_row(nan)["late_slope"] is None


def test_seed_bands_span_only_neighbouring_lrs_with_seeds():
  curve = [{"lr": lr, "losses": [1.0] * n} for lr, n in ((1, 3), (2, 3), (3, 1), (4, 2), (5, 1))]
  runs = lrs.seeded_runs(curve)
  assert [[p["lr"] for p in run] for run in runs] == [[1, 2], [4]]  # no band across lr 3


def test_an_lr_run_for_few_curves_extends_them_without_entering_the_grid(tmp_path):
  """The left edge (two lrs below the grid, run for deep Post-LN alone) is drawn but not
  averaged: every curve's sensitivity is over the same lrs, and nothing reads as partial."""
  grid = (1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2)
  for variant, depth in (("postnorm", 6), ("prenorm", 6), ("deepnorm", 6)):
    for i, lr in enumerate(grid):
      fake_run(tmp_path, variant, depth, lr, 0, 2.0 + 0.1 * i)
  fake_run(tmp_path, "postnorm", 6, 5e-4, 0, 1.0)  # better than any grid lr: must not count
  assert lr_sweep_rows.grid_lrs(str(tmp_path)) == list(grid)
  rows = lr_sweep_rows.finished_rows(str(tmp_path))
  planned = lr_sweep_rows.grid_lrs(str(tmp_path))
  table = {t["variant"]: t for t in lrs.sensitivity_table(rows, grid=planned)}
  post, pre = table["postnorm"], table["prenorm"]
  assert post["n_lrs"] == pre["n_lrs"] == 5
  assert post["lr_sensitivity"] == pytest.approx(pre["lr_sensitivity"])
  assert post["best_lr"] == 1e-3 and post["best_loss"] == pytest.approx(2.0)
  assert post["note"] == "1 lr outside the grid, not averaged: 0.0005" and pre["note"] == ""
