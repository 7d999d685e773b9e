"""What each derived table was built from (docs/provenance.csv): the build traces the files each
step opens (resnorm_jax/analysis/traced_step.py) and records, per table, the run summaries
behind it (their summaries, metrics, configs), through the tables of earlier steps too, with
their digest."""

import csv
import json
import os
import subprocess
import sys

from conftest import ROOT
from resnorm_jax.analysis import results_build, traced_step


def test_a_write_is_told_from_a_read_by_mode_or_flags():
  assert traced_step.is_write("w", 0) and traced_step.is_write("ab", 0)
  assert traced_step.is_write("r+b", 0) and not traced_step.is_write("rb", 0)
  assert traced_step.is_write(None, os.O_WRONLY | os.O_CREAT)
  assert not traced_step.is_write(None, os.O_RDONLY)


def test_a_traced_script_records_what_it_read_and_wrote(tmp_path):
  root = tmp_path / "repo"
  (root / "docs" / "a" / "runs" / "r0").mkdir(parents=True)
  (root / "docs" / "a" / "runs" / "r0" / "summary.json").write_text("{}")
  script = root / "step.py"
  script.write_text(
    "import os, sys\n"
    "open('docs/a/runs/r0/summary.json').read()\n"
    "open('docs/a/runs/missing.json', 'a').close() if False else None\n"
    "try:\n  open('docs/a/runs/gone/summary.json')\nexcept OSError:\n  pass\n"
    "with open('docs/a/tmp.csv', 'w') as f:\n  f.write(sys.argv[1])\n"
    "os.replace('docs/a/tmp.csv', 'docs/a/cells.csv')\n"
  )
  trace = tmp_path / "trace.json"
  env = dict(os.environ, PYTHONPATH=ROOT)
  subprocess.run(
    [sys.executable, "-m", "resnorm_jax.analysis.traced_step", str(trace), "step.py", "x"],
    cwd=root, check=True, env=env,
  )  # fmt: skip
  got = json.loads(trace.read_text())
  assert os.path.join("docs", "a", "runs", "r0", "summary.json") in got["read"]
  assert got["written"] == [os.path.join("docs", "a", "cells.csv")]  # the rename's target
  assert not any("gone" in p for p in got["read"])  # a failed open is not a read
  assert (root / "docs" / "a" / "cells.csv").read_text() == "x"


def test_a_table_made_from_a_table_carries_the_runs_behind_it(tmp_path):
  for run in ("r0", "r1"):
    path = tmp_path / "docs" / "a" / "runs" / run
    path.mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps({"run": run}))
  s0, s1 = (os.path.join("docs", "a", "runs", r, "summary.json") for r in ("r0", "r1"))
  traces = {
    "cells": {"read": [s0, s1], "written": ["docs/a/cells.csv", "docs/a/runs/results.csv"]},
    "claims": {"read": ["docs/a/cells.csv"], "written": ["docs/b/table.csv", "README.md"]},
  }
  rows = {r["table"]: r for r in results_build.provenance(str(tmp_path), traces)}
  assert set(rows) == {"docs/a/cells.csv", "docs/b/table.csv"}  # a run folder's file aside
  assert rows["docs/b/table.csv"]["runs"] == "2" and rows["docs/b/table.csv"]["step"] == "claims"
  digest = rows["docs/a/cells.csv"]["run_files_sha256"]
  assert rows["docs/b/table.csv"]["run_files_sha256"] == digest
  (tmp_path / s1).write_text(json.dumps({"run": "r1", "final_eval_loss": 1.0}))  # an edit
  rows = {r["table"]: r for r in results_build.provenance(str(tmp_path), traces)}
  assert rows["docs/a/cells.csv"]["run_files_sha256"] != digest


def test_the_committed_provenance_names_every_derived_table_of_the_build():
  with open(os.path.join(ROOT, results_build.PROVENANCE), newline="") as f:
    rows = list(csv.DictReader(f))
  steps = {s.name for s in results_build.STEPS}
  assert rows and all(r["step"] in steps and int(r["runs"]) > 0 for r in rows)
  assert all(os.path.exists(os.path.join(ROOT, r["table"])) for r in rows)
