"""Escape and divergence steps of committed runs, from their curves, into their summary.json.

Runs that predate `escape_step` and `diverged_step` in summary.json (resnorm_jax/outcome.py's
curve_fields) get them here: every run folder under the roots (a folder holding summary.json
and metrics.jsonl or the curve.jsonl excerpt) has both computed from its curve and written
into its summary.json, every other field kept, in the project's JSON format (cli.write_json);
a summary already holding the same values is left untouched, so a second run changes nothing.
One table of all of them goes to --out: the run's axes, its verdict at its last step
(`outcome`, classify's rule now) and the two steps.

python scripts/rederive_escape.py docs --exclude=docs/lr_sensitivity/runs \
    --out=docs/verdict/escape_steps.csv
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from resnorm_jax import cli, escape  # noqa: E402  (no JAX)
from resnorm_jax.plots import write_rows  # noqa: E402
from resnorm_jax.sweep_results import run_row  # noqa: E402

COLUMNS = (
  "path",
  "variant",
  "num_layers",
  "lr",
  "warmup",
  "seed",
  "steps",
  "final_eval_loss",
  "baseline",
  "outcome",
  "escape_step",
  "diverged_step",
)


def run_folders(roots: list[str], exclude: list[str]) -> list[str]:
  """Folders under `roots` holding summary.json and a curve, sorted; `exclude`d trees skipped."""
  skip = {os.path.abspath(e) for e in exclude}
  found = []
  for root in roots:
    for folder, subdirs, files in os.walk(root):
      subdirs[:] = sorted(
        d for d in subdirs if os.path.abspath(os.path.join(folder, d)) not in skip
      )
      if "summary.json" in files and escape.curve_path(folder):
        found.append(folder)
  return sorted(found)


def update_summary(run_dir: str) -> bool:
  """Writes the run's escape_step and diverged_step into its summary.json; True if changed."""
  path = os.path.join(run_dir, "summary.json")
  with open(path) as f:
    summary = json.load(f)
  fields = escape.run_fields(run_dir)
  new = {k: fields[k] for k in escape.FIELDS}
  if all(k in summary and summary[k] == v for k, v in new.items()):
    return False
  cli.write_json(path, {**summary, **new})
  return True


def table_row(run_dir: str) -> dict:
  """One row of the table: the run's axes, verdict and steps (read back from its summary)."""
  row = run_row(run_dir)
  opt = row["_config"].get("opt") or {}
  relative = os.path.relpath(os.path.abspath(run_dir), ROOT)
  return {
    **{k: row.get(k) for k in COLUMNS},
    "path": relative,
    "lr": opt.get("lr"),
    "warmup": opt.get("warmup_steps"),
  }


def late_escapes(rows: list[dict]) -> list[dict]:
  """The rows that escaped after half their budget (steps)."""
  return [
    r
    for r in rows
    if r["escape_step"] is not None and r["steps"] and r["escape_step"] > r["steps"] / 2
  ]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("roots", nargs="*", default=["docs"])
  parser.add_argument("--exclude", action="append", default=[], help="a tree to skip")
  parser.add_argument("--out", default="docs/verdict/escape_steps.csv")
  args = parser.parse_args()
  folders = run_folders(args.roots, args.exclude)
  changed = sum(update_summary(d) for d in folders)
  rows = [table_row(d) for d in folders]
  write_rows(rows, args.out)
  escaped = [r for r in rows if r["escape_step"] is not None]
  late = late_escapes(rows)
  disagree = [
    r
    for r in rows
    if (r["outcome"] == "trained") != (r["escape_step"] is not None)
    and r["outcome"] in ("trained", "stuck")
  ]
  print(f"{len(rows)} runs ({changed} summaries updated) -> {args.out}")
  print(f"  escaped {len(escaped)}, never {len(rows) - len(escaped)}")
  print(f"  diverged {sum(r['diverged_step'] is not None for r in rows)}")
  print(f"  escaped after half their budget: {len(late)}")
  for r in late:
    print(f"    {r['path']}: step {r['escape_step']} of {r['steps']} ({r['outcome']})")
  print(f"  verdict at the budget and escape disagree: {len(disagree)}")
  for r in disagree:
    print(f"    {r['path']}: {r['outcome']}, escape_step {r['escape_step']}")


if __name__ == "__main__":
  main()
