"""The results build (scripts/results.py is its command line): every derived table, figure and
generated section of the docs rebuilt from the committed run folders by the per-axis steps,
in dependency order, and the check that the committed ones are what the runs give now.

Each step runs as its own process from the repository root (or a copy's), so the build is the
commands the docs give. Text artefacts (.csv, .md, .json) are compared line by line (a CSV's
rows in any order, its numbers to 10 significant digits: a step that lists run folders in the
file system's order writes the same table with rows or last digits moved); a figure (.png)
is compared by the tables its step writes from the same rows, not by its bytes. No JAX here.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from resnorm_jax.files import csv_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What a run folder keeps locally and the build never reads (.gitignore's), and the caches.
SKIP_DIRS = {".git", ".venv", "ckpt", "tb", "__pycache__", ".pytest_cache", ".ruff_cache"}
SKIP_FILES = ("train.log", ".lock")
# Run folders are the build's input, not its output: not compared.
INPUT_DIRS = {"runs", "init_or_data", "mechanism"}
TEXT = (".csv", ".md", ".json")
COMPARED = ("docs", "README.md")  # where derived artefacts live


@dataclasses.dataclass(frozen=True)
class Step:
  name: str
  argv: tuple[str, ...]  # scripts/<x>.py and its flags, from the repository root


STEPS = (
  # What the results are built from: every run folder's summary, digested (an added, removed
  # or edited run fails --check here, whichever table reads it).
  Step("runs manifest", ("scripts/run_manifest.py",)),
  # Every committed run's outcome under today's rules (a relabelled run fails --check here).
  Step("outcomes", ("scripts/rederive_outcomes.py", "docs",
                    "--out=docs/verdict/outcomes_rederived.csv")),
  Step("survival", ("scripts/survival.py",)),
  Step("stabilizers at the edge", (
    "scripts/survival.py", "--runs=docs/stabilizers/runs", "--out_dir=docs/stabilizers",
    "--only=^(post|deep)norm-", "--baseline=docs/survival/runs:^postnorm-L12-lr0.001-s")),
  # The gate's cells on tiny Shakespeare (the grid's shakespeare-* points), a table of their own.
  Step("gate on Shakespeare", (
    "scripts/survival.py", "--runs=docs/stabilizers/runs",
    "--out_dir=docs/stabilizers/shakespeare", "--only=^shakespeare-")),
  Step("stabilizer curves", ("scripts/stabilizer_curves.py",)),
  Step("gate mechanism", ("scripts/gate_mechanism.py",)),
  Step("loss vs lr", ("scripts/lr_sensitivity.py",)),
  Step("budget", ("scripts/budget.py",)),
  Step("depth transfer", ("scripts/depth_transfer.py",)),
  Step("width (sp)", ("scripts/width.py",)),
  Step("width (muP)", ("scripts/width.py", "--width_param=mup")),
  Step("second corpus", ("scripts/second_corpus.py",)),
  Step("mechanism", ("scripts/mechanism.py",)),
  Step("early warning", ("scripts/early_warning.py",)),
  Step("init or data", ("scripts/init_or_data.py",)),
  Step("claims", ("scripts/claims.py", "--write")),
)  # fmt: skip


def artefacts(root: str) -> dict[str, str]:
  """{path relative to root: sha256} of every file under COMPARED but run folders' local
  files (checkpoints, event files, logs)."""
  out = {}
  for top in COMPARED:
    path = os.path.join(root, top)
    if os.path.isfile(path):
      out[top] = _digest(path)
      continue
    for here, dirs, files in os.walk(path):
      dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and d not in INPUT_DIRS)
      for f in files:
        if f.endswith(SKIP_FILES) or f.startswith("events.out.tfevents"):
          continue
        full = os.path.join(here, f)
        out[os.path.relpath(full, root)] = _digest(full)
  return out


def _digest(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def run_steps(root: str, steps=STEPS, quiet: bool = False) -> list[str]:
  """Runs every step from `root`, each traced (traced_step.py); returns the failures ('step:
  exit status, last line'). Then writes docs/provenance.csv from the traces."""
  failures, traces = [], {}
  with tempfile.TemporaryDirectory(prefix="results-traces-") as tmp:
    for i, step in enumerate(steps):
      trace = os.path.join(tmp, f"{i}.json")
      start = time.time()
      proc = subprocess.run(
        [sys.executable, "-m", "resnorm_jax.analysis.traced_step", trace, *step.argv],
        cwd=root, capture_output=True, text=True, env=_env(root),
      )  # fmt: skip
      took = time.time() - start
      if not quiet:
        print(f"  {step.name}: {'ok' if proc.returncode == 0 else 'FAILED'} ({took:.0f} s)")
      if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        failures.append(f"{step.name} ({' '.join(step.argv)}): exit {proc.returncode}: {last}")
      if os.path.exists(trace):
        with open(trace) as f:
          traces[step.name] = json.load(f)
  write_provenance(root, traces)
  return failures


PROVENANCE = os.path.join("docs", "provenance.csv")
PROVENANCE_COLUMNS = ("table", "step", "runs", "run_files", "run_files_sha256")
RUN_FILES = ("summary.json", "metrics.jsonl", "config.json", "sweep_point.json")


def _is_run_file(path: str) -> bool:
  """A run folder's committed file (a folder of runs: INPUT_DIRS)."""
  parts = path.split(os.sep)
  return parts[-1] in RUN_FILES and bool(set(parts[:-2]) & INPUT_DIRS)


def provenance(root: str, traces: dict[str, dict[str, list[str]]]) -> list[dict[str, str]]:
  """One row per derived table (.csv under docs/, run folders' own files aside): the step that
  wrote it, the run folders whose files (RUN_FILES) that step read, directly or through the
  tables of the steps before it that it read, how many files, and a digest of those files
  (each path with its bytes' sha256, in path order). Steps in build order (`traces` keeps
  it). A step writing several tables gives each everything it read."""
  made_from: dict[str, set[str]] = {}  # a table -> the run files behind it
  rows = []
  for step, trace in traces.items():
    read = {p for p in trace["read"] if _is_run_file(p)}
    for p in trace["read"]:
      read |= made_from.get(p, set())
    for p in trace["written"]:
      made_from[p] = read
      if p.endswith(".csv") and p.startswith("docs" + os.sep) and p != PROVENANCE:
        if not set(p.split(os.sep)[:-1]) & INPUT_DIRS:
          rows.append({
            "table": p, "step": step, "runs": str(len({os.path.dirname(f) for f in read})),
            "run_files": str(len(read)), "run_files_sha256": _files_digest(root, read),
          })  # fmt: skip
  return sorted(rows, key=lambda r: r["table"])


def _files_digest(root: str, paths: set[str]) -> str:
  h = hashlib.sha256()
  for p in sorted(paths):
    h.update(f"{p} {_digest(os.path.join(root, p))}\n".encode())
  return h.hexdigest()[:16]


def write_provenance(root: str, traces: dict[str, dict[str, list[str]]]) -> None:
  """docs/provenance.csv from the traces of the steps run; the rows of steps not run this time
  (scripts/results.py --only) kept as committed."""
  path = os.path.join(root, PROVENANCE)
  kept = []
  if os.path.exists(path):
    kept = [r for r in csv_table.read_csv(path) if r["step"] not in traces]
  rows = sorted(kept + provenance(root, traces), key=lambda r: r["table"])
  csv_table.write_csv(path, rows, PROVENANCE_COLUMNS, lineterminator="\n")


def _env(root: str) -> dict[str, str]:
  env = dict(os.environ, MPLBACKEND="Agg", JAX_PLATFORMS="cpu")
  env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
  return env


def copy_tree(src: str, dest: str) -> None:
  """The repository `src` into `dest`: sources, configs, scripts and docs with their run
  folders' committed files, none of their local ones (nor the top runs/ of a user's runs)."""

  def ignore(here: str, names: list[str]) -> set[str]:
    skip = {n for n in names if n in SKIP_DIRS}
    skip |= {"runs"} & set(names) if os.path.samefile(here, src) else set()
    skip |= {n for n in names if n.endswith(SKIP_FILES) or n.startswith("events.out.tfevents")}
    return skip

  shutil.copytree(src, dest, ignore=ignore, symlinks=True)


def first_difference(a: str, b: str) -> str:
  """The first differing line of two text files, as 'line N: committed ... / runs give ...'."""
  with open(a, errors="replace") as f, open(b, errors="replace") as g:
    old, new = f.read().splitlines(), g.read().splitlines()
  for i, (x, y) in enumerate(zip(old, new, strict=False)):
    if x != y:
      return f"line {i + 1}: committed {x[:160]!r}; the runs give {y[:160]!r}"
  return f"{len(old)} lines committed, {len(new)} from the runs"


def _cells(line: str) -> list:
  """A CSV line's cells, numbers as floats (rounded to 10 significant digits)."""
  out = []
  for cell in next(csv.reader([line]), []):
    try:
      out.append(float(f"{float(cell):.10g}"))
    except ValueError:
      out.append(cell)
  return out


def same_table(a: str, b: str) -> bool:
  """Two CSV files hold the same rows, in any order, their numbers equal to 10 significant
  digits: a step that lists run folders in the file system's order, or sums floats in it,
  writes the same table with rows or last digits moved."""
  with open(a, errors="replace") as f, open(b, errors="replace") as g:
    old, new = f.read().splitlines(), g.read().splitlines()
  key = lambda rows: sorted(repr(_cells(r)) for r in rows)  # noqa: E731
  return old[:1] == new[:1] and key(old[1:]) == key(new[1:])


def compare(committed: str, rebuilt: str) -> list[str]:
  """The derived text files that differ between the two trees (or that only the rebuild
  has), each with its first differing line; figures (.png) are not compared by bytes."""
  before, after = artefacts(committed), artefacts(rebuilt)
  problems = []
  for path in sorted(after):
    if not path.endswith(TEXT):
      continue
    if path not in before:
      problems.append(f"{path}: made by the build, not committed")
    elif before[path] != after[path]:
      if path.endswith(".csv") and same_table(
        os.path.join(committed, path), os.path.join(rebuilt, path)
      ):
        continue
      diff = first_difference(os.path.join(committed, path), os.path.join(rebuilt, path))
      problems.append(f"{path}: {diff}")
  return problems
