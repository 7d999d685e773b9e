"""Results never written through a symbolic link, and committed outcomes re-derived under the
divergence rule: the data-loss and silent-wrong cases of the sweep collector."""

import os
import subprocess
import sys

import pytest

from conftest import fake_run
from resnorm_jax.files.nofollow import SymlinkRefused
from resnorm_jax.runs import sweep_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = {
  "name": "x",
  "seed": 0,
  "model": {"num_layers": 2, "vocab_size": 256},
  "opt": {"lr": 1e-3},
}


@pytest.mark.parametrize("name", ["results.md", "results.csv"])
def test_write_results_refuses_a_symlink_and_leaves_its_target(tmp_path, name):
  sweep = tmp_path / "sweep"
  fake_run(sweep / "a", {"final_eval_loss": 2.0}, CONFIG)
  notes = tmp_path / "notes.txt"
  notes.write_text("my notes\n")
  os.symlink(notes, sweep / name)
  rows = sweep_results.collect(str(sweep))
  with pytest.raises(SymlinkRefused, match=rf"{name} is a symbolic link"):
    sweep_results.write_results(str(sweep), rows)
  assert notes.read_text() == "my notes\n"


def test_collect_only_through_a_symlink_is_one_line_exit_2(tmp_path):
  sweep = tmp_path / "sweep"
  fake_run(sweep / "a", {"final_eval_loss": 2.0}, CONFIG)
  notes = tmp_path / "notes.txt"
  notes.write_text("my notes\n")
  os.symlink(notes, sweep / "results.md")
  grid = tmp_path / "grid.py"
  grid.write_text("GRID = []\n")
  proc = subprocess.run(
    [
      sys.executable,
      "scripts/sweep.py",
      f"--grid={grid}",
      f"--sweep_dir={sweep}",
      "--collect_only",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2, proc.stderr
  assert "results.md is a symbolic link" in proc.stderr and "Traceback" not in proc.stderr
  assert notes.read_text() == "my notes\n"


def test_every_committed_outcome_is_the_divergence_rule_s():
  """Every committed run's recorded outcome and diverged_step equal today's rules' (the
  ceiling included); that docs/verdict/outcomes_rederived.csv is what the runs give is the
  results build's check (scripts/results.py --check)."""
  proc = subprocess.run(
    [sys.executable, "scripts/rederive_outcomes.py", "docs", "--check"],
    cwd=ROOT, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert " 0 changed" in proc.stdout


@pytest.mark.parametrize("collect_only", [True, False])
def test_a_point_record_that_is_a_symlink_is_one_line_exit_2(tmp_path, collect_only):
  """A point's sweep_point.json that is a link: refused in one line before anything is
  written (a sweep) or rewritten (--collect_only), its target left as it is."""
  sweep = tmp_path / "sweep"
  fake_run(sweep / "a", {"final_eval_loss": 2.0, "status": "completed"}, CONFIG)
  notes = tmp_path / "notes.json"
  notes.write_text('{"returncode": 1}\n')
  os.symlink(notes, sweep / "a" / "sweep_point.json")
  grid = tmp_path / "grid.py"
  grid.write_text('GRID = [{"config": "configs/postnorm_96L.py:smoke", "name": "a"}]\n')
  flags = ["--collect_only"] if collect_only else ["--max_steps=2"]
  proc = subprocess.run(
    [sys.executable, "scripts/sweep.py", f"--grid={grid}", f"--sweep_dir={sweep}", *flags],
    cwd=ROOT, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert proc.returncode == 2, proc.stdout + proc.stderr
  assert "sweep_point.json is a symbolic link" in proc.stderr, proc.stderr
  assert "Traceback" not in proc.stderr
  assert notes.read_text() == '{"returncode": 1}\n'
  assert not (sweep / "a" / "train.log").exists()
