"""Escape and divergence steps from a run's curve (outcome.py, escape.py), and the columns the
sweep tables carry. No training: curves are written by hand."""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import write_run_folder
from resnorm_jax.runs import escape, outcome, sweep_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = 3.3  # the no-context baseline of the fake runs
BASE_SUMMARY = {"status": "completed", "heldout_unigram_entropy": BASE}


def _write_run(run_dir, rows, summary, vocab=256, curve="metrics.jsonl"):
  write_run_folder(
    run_dir,
    rows,
    curve=curve,
    summary={"status": "completed", "heldout_unigram_entropy": BASE, **summary},
    config={"model": {"vocab_size": vocab, "num_layers": 2}, "seed": 0},
  )


def test_escape_step_is_where_the_curve_stays_below_to_the_end():
  e = outcome.escape_step
  assert e([(50, 3.5), (100, 3.1), (150, 2.9)], BASE) == 100
  # A dip below that comes back is not an escape; the later one that stays is.
  assert e([(50, 3.1), (100, 3.25), (150, 3.15), (200, 3.0)], BASE) == 150
  assert e([(50, 3.0), (100, 2.9), (150, 3.25)], BASE) is None  # back on the plateau at the end
  assert e([(50, 3.5), (100, 3.3), (150, 3.21)], BASE) is None  # never 0.1 below
  assert e([(50, 3.19)], BASE) == 50
  # At the margin the escape agrees with the verdict of classify (floats: 3.3 - 0.1 < 3.2).
  for loss in (3.2, 3.19999):
    verdict = outcome.classify(
      {"status": "completed", "final_eval_loss": loss, "unigram_entropy": BASE}
    )
    assert (e([(50, loss)], BASE) is not None) == (verdict == "trained")
  assert e([(50, 2.0), (100, math.nan), (150, 2.0)], BASE) == 150
  assert e([(150, 2.0), (50, 3.5), (100, 2.1)], BASE) == 100  # order of the points
  assert e([], BASE) is None
  assert e([(50, 3.15)], BASE, margin=0.2) is None


def test_diverged_step_non_finite_or_above_the_bound_after_coming_below():
  d, bound = outcome.diverged_step, outcome.divergence_bound(256)
  assert math.isclose(bound, math.log(256) + 1.0)
  uniform = math.log(256)
  assert d([(10, 5.0), (20, math.nan), (30, 2.0)], bound, uniform) == 20
  assert d([(10, math.inf)], bound, uniform) == 10  # non-finite counts before any arming
  # A run starting above the bound (DeepNorm's 7.8 on Shakespeare) that falls is not diverged.
  assert d([(10, 7.8), (20, 6.0), (30, 3.0), (40, 2.5)], bound, uniform) is None
  # Above the bound after coming below ln V: diverged there, even if it recovers later.
  assert d([(10, 7.8), (20, 5.0), (30, 6.6), (40, 3.0)], bound, uniform) == 30
  # Hovering between ln V and the bound without coming below ln V never arms.
  assert d([(10, 6.6), (20, 6.5), (30, 6.6)], bound, uniform) is None
  assert d([(10, 6.4), (20, 6.6)], bound) == 20  # armed at the bound by default
  assert d([], bound) is None


def test_curve_fields_from_metrics_rows_and_summary():
  rows = [
    {"step": 50, "train/loss": 3.4, "eval/loss": 3.1},
    {"step": 100, "train/loss": 3.3, "eval/loss": 3.25},
    {"step": 150, "train/loss": 2.9, "eval/loss": 2.9, "eval/final_loss": 3.5},
  ]
  summary = {"status": "completed", "steps": 150, "final_eval_loss": 2.9, "unigram_entropy": BASE}
  assert outcome.curve_fields(rows, summary, 256) == {"escape_step": 150, "diverged_step": None}
  # The end-of-run eval (eval/final_loss) is not on the curve; a repeated step keeps its last row.
  assert outcome.curve_fields([{"step": 100, "eval/loss": 2.8}, *rows], summary, 256) == {
    "escape_step": 150,
    "diverged_step": None,
  }
  assert outcome.curve_fields([*rows, {"step": 100, "eval/loss": 2.8}], summary, 256) == {
    "escape_step": 50,
    "diverged_step": None,
  }
  # A NaN train loss: diverged at that step; evals before it do not count as an escape.
  nan = [*rows, {"step": 160, "train/loss": math.nan}]
  got = outcome.curve_fields(nan, {**summary, "status": "diverged", "steps": 160}, 256)
  assert got == {"escape_step": None, "diverged_step": 160}
  # Diverged by status with no curve point showing it: at its last step.
  got = outcome.curve_fields(rows[:2], {**summary, "status": "diverged", "steps": 120}, 256)
  assert got == {"escape_step": None, "diverged_step": 120}
  # Never escapes: None; without a baseline nothing is judged.
  stuck = [{"step": s, "train/loss": 3.3, "eval/loss": 3.25} for s in (50, 100)]
  assert outcome.curve_fields(stuck, summary, 256)["escape_step"] is None
  assert outcome.curve_fields(rows, {"status": "completed"}, 256)["escape_step"] is None
  # A spike above the bound that recovers: diverged there, escaped only after it.
  spike = [
    {"step": 50, "train/loss": 3.0, "eval/loss": 2.9},
    {"step": 60, "train/loss": 7.0},
    {"step": 100, "train/loss": 2.8, "eval/loss": 2.8},
  ]
  assert outcome.curve_fields(spike, summary, 256) == {"escape_step": 100, "diverged_step": 60}
  assert outcome.curve_fields(spike, summary, None)["diverged_step"] is None  # no vocab: NaN only


def test_run_fields_read_a_run_folder(tmp_path):
  rows = [{"step": 50, "train/loss": 4.0, "eval/loss": 3.5}]
  rows += [{"step": s, "train/loss": 2.5, "eval/loss": 2.6} for s in (100, 150)]
  _write_run(tmp_path / "a", rows, {"steps": 150, "final_eval_loss": 2.6})
  assert escape.run_fields(str(tmp_path / "a")) == {
    "escape_step": 100,
    "diverged_step": None,
    "budget_steps": 150,
  }
  _write_run(tmp_path / "b", rows, {"steps": 150, "final_eval_loss": 2.6}, curve="curve.jsonl")
  assert escape.run_fields(str(tmp_path / "b"))["escape_step"] == 100
  # A summary that records the fields is read as is; one that predates them is computed.
  assert escape.stored_fields(str(tmp_path / "a"), {"escape_step": 7, "diverged_step": None}) == {
    "escape_step": 7,
    "diverged_step": None,
  }
  older = json.load(open(tmp_path / "a" / "summary.json"))
  assert escape.stored_fields(str(tmp_path / "a"), older) == {
    "escape_step": 100,
    "diverged_step": None,
  }
  assert escape.stored_fields(str(tmp_path / "none"), None) == {
    "escape_step": None,
    "diverged_step": None,
  }
  assert escape.summary_fields(str(tmp_path / "none" / "metrics.jsonl"), {}, 256) == {
    "escape_step": None,
    "diverged_step": None,
  }


def test_results_tables_carry_escape_and_diverged_steps(tmp_path):
  escaped = [{"step": 50, "train/loss": 3.5, "eval/loss": 3.4}]
  escaped += [{"step": 100, "train/loss": 2.5, "eval/loss": 2.6}]
  _write_run(tmp_path / "a", escaped, {"steps": 100, "final_eval_loss": 2.6})
  nan = [{"step": 50, "train/loss": 3.5, "eval/loss": 3.4}, {"step": 60, "train/loss": math.nan}]
  _write_run(tmp_path / "b", nan, {"status": "diverged", "steps": 60, "final_eval_loss": 3.4})
  recorded = {"steps": 100, "final_eval_loss": 2.6, "escape_step": 50, "diverged_step": None}
  _write_run(tmp_path / "c", escaped, recorded)
  rows = sweep_results.collect(str(tmp_path))
  got = [(r["name"], r["outcome"], r["escape_step"], r["diverged_step"]) for r in rows]
  assert got == [
    ("a", "trained", 100, None),
    ("b", "diverged", None, 60),
    ("c", "trained", 50, None),
  ]
  csv_path, md_path = sweep_results.write_results(str(tmp_path), rows)[:2]
  header = open(csv_path).readline().strip().split(",")
  assert {"escape_step", "diverged_step", "outcome", "final_eval_loss"} <= set(header)
  assert "escape_step | diverged_step" in open(md_path).read()


@pytest.mark.slow  # runs scripts/rederive_escape.py
def test_rederive_escape_writes_summaries_and_a_table_once(tmp_path, read_csv):
  rows = [{"step": 50, "train/loss": 3.5, "eval/loss": 3.4}]
  rows += [{"step": 100, "train/loss": 2.5, "eval/loss": 2.6}]
  _write_run(tmp_path / "docs" / "sweep" / "a", rows, {"steps": 100, "final_eval_loss": 2.6})
  _write_run(tmp_path / "docs" / "skip" / "b", rows, {"steps": 100, "final_eval_loss": 2.6})
  os.makedirs(tmp_path / "docs" / "sweep" / "pending")  # no summary yet: not a run folder
  out = tmp_path / "escape.csv"
  cmd = [sys.executable, os.path.join(ROOT, "scripts", "rederive_escape.py"), "docs"]
  cmd += ["--exclude=docs/skip", f"--out={out}"]
  first = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
  assert "1 runs (1 summaries updated)" in first
  summary_path = tmp_path / "docs" / "sweep" / "a" / "summary.json"
  text = summary_path.read_text()
  summary = json.loads(text)
  assert summary["escape_step"] == 100 and summary["diverged_step"] is None
  assert summary["final_eval_loss"] == 2.6 and summary["steps"] == 100  # the rest kept
  assert text == json.dumps(summary, indent=2, sort_keys=True)  # cli.write_json's format
  assert "escape_step" not in json.load(open(tmp_path / "docs" / "skip" / "b" / "summary.json"))
  (row,) = read_csv(out)
  assert row["escape_step"] == "100" and row["diverged_step"] == "" and row["outcome"] == "trained"
  table = out.read_text()
  again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
  assert "(0 summaries updated)" in again and "escaped after half their budget: 1" in again
  assert summary_path.read_text() == text and out.read_text() == table


def test_the_escape_is_judged_against_the_eval_sets_own_plateau():
  """A curve 0.12 below its eval set's no-context loss escaped, though it is only 0.06 below
  the whole held-out split's (stdlib: the periodic set's plateau sits 0.060 above it)."""
  from resnorm_jax.runs.outcome import curve_fields

  records = [{"step": s, "train/loss": 3.0, "eval/loss": 3.18} for s in (100, 200)]
  whole = {"status": "completed", "steps": 200, "heldout_unigram_entropy": 3.24}
  assert curve_fields(records, whole, 256)["escape_step"] is None
  own = {**whole, "periodic_eval_no_context_loss": 3.30}
  assert curve_fields(records, own, 256)["escape_step"] == 100


def test_a_blow_up_above_the_ceiling_is_diverged_whatever_came_before():
  """The issue's cases: Muon at lr 1.0 ends at 77 nats, at lr 10 at 11,510, neither ever below
  ln V, and both were labelled stuck (the armed rule never fired)."""
  d, bound, uniform = outcome.diverged_step, outcome.divergence_bound(256), math.log(256)
  ceiling = outcome.divergence_ceiling(256)
  assert math.isclose(ceiling, 2 * math.log(256))
  assert d([(10, 30.6), (20, 76.8), (30, 114.4)], bound, uniform, ceiling) == 10
  assert d([(10, 6.0), (20, 7.0), (30, 11.2)], bound, uniform, ceiling) == 30
  # Every committed start is far below it: DeepNorm's 8.18 falling is not diverged.
  assert d([(10, 8.18), (20, 6.0), (30, 3.0)], bound, uniform, ceiling) is None
  # The verdict: a completed run ending above the ceiling is diverged with the vocabulary
  # known, stuck without it (no ceiling to judge by), and a plateau is never diverged.
  blown = {"status": "completed", "final_eval_loss": 76.8, "unigram_entropy": BASE}
  assert outcome.classify(blown, vocab_size=256) == "diverged"
  assert outcome.classify(
    {**blown, "final_eval_loss": 9.0, "final_train_loss": 12.0}, 0.1, 256
  ) == ("diverged")
  assert outcome.classify(blown) == "stuck"
  assert outcome.classify({**blown, "final_eval_loss": 3.31}, vocab_size=256) == "stuck"


def test_the_sweep_table_labels_a_blow_up_diverged(tmp_path):
  run = tmp_path / "muon-lr1"
  rows = [{"step": 10, "train/loss": 30.6}, {"step": 30, "train/loss": 114.4, "eval/loss": 83.6}]
  _write_run(str(run), rows, {"final_eval_loss": 86.5, "final_train_loss": 114.4, "steps": 30})
  row = sweep_results.run_row(str(run))
  assert row["outcome"] == "diverged"
  assert escape.summary_fields(str(run / "metrics.jsonl"), {"steps": 30}, 256) == {
    "escape_step": None,
    "diverged_step": 10,
  }


@pytest.mark.parametrize("lr", ["1.0", "10.0"])
def test_muon_blow_ups_end_diverged_not_stuck(tmp_path, run_script, lr):
  work = tmp_path / "w"
  proc = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/postnorm_96L.py:smoke",
      f"--workdir={work}",
      "--config.train.steps=30",
      "--config.opt.name=muon",
      f"--config.opt.lr={lr}",
    ]  # fmt: skip
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.loads((work / "summary.json").read_text())
  assert summary["outcome"] == "diverged", summary
  assert summary["diverged_step"] is not None
  assert "(diverged)" in proc.stdout


def test_an_escape_step_from_a_curve_that_lost_its_first_rows_is_left_blank(tmp_path):
  """A point whose metrics.jsonl was lost showed escape_step 123 (true 102) with no mark."""
  run = tmp_path / "run"
  rows = [{"step": 150, "train/loss": 2.0, "eval/loss": 2.5}]
  summary = {"final_eval_loss": 2.5, "steps": 150, "escape_step": 150, "diverged_step": None,
             "escape_step_partial": True, "metrics_lost_from_step": 10}  # fmt: skip
  _write_run(str(run), rows, summary)
  assert escape.stored_fields(str(run), {**BASE_SUMMARY, **summary})["escape_step"] is None
  assert sweep_results.run_row(str(run))["escape_step"] is None
  whole = {**summary, "escape_step_partial": False}
  assert escape.stored_fields(str(run), {**BASE_SUMMARY, **whole})["escape_step"] == 150
