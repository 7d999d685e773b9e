"""scripts/results.py --check fails when a committed derived file is stale: a final eval loss
edited in a copy of a committed run folder that a README row reads, and a run added to a copy of
a sweep folder (issue: a number going stale without anything failing)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from resnorm_jax.analysis import results_build

# The survival cells and the claims written from them: the steps a survival run reaches.
STEPS = "survival,claims"


def _copy(tmp_path):
  copy = str(tmp_path / "repo")
  results_build.copy_tree(ROOT, copy)
  return copy


def _check(root: str) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, "scripts/results.py", "--check", f"--only={STEPS}", f"--root={root}"],
    cwd=root, capture_output=True, text=True, timeout=600,
  )  # fmt: skip


@pytest.mark.long  # copies the repository and rebuilds two steps, three times (~2 min)
def test_check_fails_on_an_edited_run_and_on_an_added_run(tmp_path):
  copy = _copy(tmp_path)
  assert _check(copy).returncode == 0, "the committed survival tables are stale already"
  # A kept escape of the 12-layer edge cell (README: "11/12 kept at 5e-4") made stuck.
  runs = os.path.join(copy, "docs", "survival", "runs")
  run = os.path.join(runs, "postnorm-L12-lr0.0005-s0")
  with open(os.path.join(run, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  with open(os.path.join(run, "metrics.jsonl"), "w") as f:
    for r in rows:
      if "eval/loss" in r:
        r["eval/loss"] = 3.35  # on the plateau at every eval
      f.write(json.dumps(r) + "\n")
  with open(os.path.join(run, "summary.json")) as f:
    summary = json.load(f)
  summary.update(final_eval_loss=3.3, escape_step=None)
  with open(os.path.join(run, "summary.json"), "w") as f:
    json.dump(summary, f)
  proc = _check(copy)
  assert proc.returncode == 1
  assert "stale: docs/survival/cells.csv" in proc.stdout and "stale: README.md" in proc.stdout
  # Another copy: a seed added to the same cell.
  copy2 = _copy(tmp_path / "second")
  runs2 = os.path.join(copy2, "docs", "survival", "runs")
  shutil.copytree(
    os.path.join(runs2, "postnorm-L12-lr0.0005-s0"),
    os.path.join(runs2, "postnorm-L12-lr0.0005-s12"),
  )
  added = os.path.join(runs2, "postnorm-L12-lr0.0005-s12")
  with open(os.path.join(added, "config.json")) as f:
    config = json.load(f)
  config["seed"] = 12
  with open(os.path.join(added, "config.json"), "w") as f:
    json.dump(config, f)
  proc = _check(copy2)
  assert proc.returncode == 1 and "stale: docs/survival/cells.csv" in proc.stdout
