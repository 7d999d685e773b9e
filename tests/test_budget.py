"""The budget test's tables and figures (resnorm_jax/analysis/budget.py): seeds escaped by step,
each run's eval curve, and scripts/budget.py on a tiny tree of fake run folders."""

import json
import os
import subprocess
import sys

import pytest
from test_lr_sensitivity import ROOT, fake_run

from resnorm_jax.analysis import budget


def test_escaped_fraction_is_a_step_function_over_seeds():
  assert budget.escaped_fraction([300, None, 100, 300], 1000) == [
    (0, 0.0),
    (100, 0.25),
    (300, 0.75),
    (1000, 0.75),
  ]
  assert budget.escaped_fraction([None, None], 500) == [(0, 0.0), (500, 0.0)]
  assert budget.escaped_fraction([], 500) == []


@pytest.mark.slow  # runs scripts/budget.py
def test_budget_script_on_a_tiny_run_tree(tmp_path, read_csv):
  runs = tmp_path / "budget" / "runs"
  for seed, escape_at in ((0, 200), (1, 400), (2, None)):
    run = fake_run(runs, "postnorm", 24, 1e-3, seed, 2.5 if escape_at else 3.19, steps=600)
    curve = [
      {"step": s, "train/loss": 3.0, "eval/loss": 2.5 if escape_at and s >= escape_at else 3.3}
      for s in range(100, 700, 100)
    ]
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in curve)
  fake_run(runs, "prenorm", 24, 1e-3, 0, 2.0, steps=600)  # escapes at its last eval
  script = os.path.join(ROOT, "scripts", "budget.py")
  out = tmp_path / "out"
  proc = subprocess.run(
    [sys.executable, script, f"--runs={runs}", f"--out_dir={out}"],
    capture_output=True,
    text=True,
    check=True,
  )
  assert "4 finished runs, 3 escaped" in proc.stdout
  assert sorted(os.listdir(out)) == ["budget.csv", "budget.png", "budget_curves.png"]
  rows = read_csv(out / "budget.csv")
  assert [(r["variant"], r["seed"], r["escape_step"]) for r in rows] == [
    ("postnorm", "0", "200"),
    ("postnorm", "1", "400"),
    ("postnorm", "2", ""),
    ("prenorm", "0", "600"),
  ]
  assert rows[0]["lr"] == "0.001" and rows[0]["warmup"] == "0" and rows[0]["steps"] == "600"
  # The late trend over steps 300-600: seed 2 flat on the plateau, seed 1 dropping at 400.
  assert float(rows[2]["late_slope"]) == pytest.approx(0.0)
  assert float(rows[1]["late_slope"]) == pytest.approx(-2.4)  # 3.3, 2.5, 2.5, 2.5 per 100 steps
  missing = subprocess.run(
    [sys.executable, script, f"--runs={tmp_path / 'none'}"], capture_output=True, text=True
  )
  assert missing.returncode != 0 and "have not started" in missing.stderr


def test_eval_curve_reads_the_periodic_evals_and_skips_torn_lines(tmp_path):
  lines = [
    json.dumps({"step": 50, "train/loss": 3.4}),
    json.dumps({"step": 100, "eval/loss": 3.3}),
    '{"step": 150, "eval/lo',  # a torn last line of a killed run
    json.dumps({"step": 200, "eval/loss": float("nan")}),
    json.dumps({"step": 250, "eval/loss": 2.9}),
  ]
  (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
  assert budget.eval_curve(str(tmp_path)) == ([100, 250], [3.3, 2.9])
  assert budget.eval_curve(str(tmp_path / "absent")) == ([], [])
