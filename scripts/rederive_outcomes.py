"""Every committed run's outcome and divergence step under today's rules, against what its
summary.json recorded: the check that a change of resnorm_jax/runs/outcome.py relabels no
committed result silently.

Every run folder under the roots (summary.json beside config.json) is judged again: its
verdict (`classify`, with the vocabulary of its config.json, so the divergence ceiling applies)
and its curve's divergence step (`curve_fields`). The table (--out) has one row per run whose
outcome or diverged_step differs from its summary's; its last line counts the runs read and
the runs changed. `--check` fails (exit status 1), naming the first changed run, when any
differs or when --out differs from what the runs give now.

python scripts/rederive_outcomes.py docs --out=docs/verdict/outcomes_rederived.csv
"""

from __future__ import annotations

import argparse
import os
import sys

from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.runs import escape, record_files
from resnorm_jax.runs.outcome import classify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLUMNS = ("run", "old_outcome", "new_outcome", "old_diverged_step", "new_diverged_step")


def run_dirs(roots: list[str]) -> list[str]:
  """Every folder under `roots` holding summary.json and config.json, sorted."""
  out = []
  for root in roots:
    for here, dirs, files in os.walk(root):
      dirs[:] = sorted(d for d in dirs if d not in ("ckpt", "tb"))
      if record_files.SUMMARY in files and record_files.CONFIG in files:
        out.append(here)
  return sorted(out)


def rederive(run_dir: str) -> dict | None:
  """The row of a run whose outcome or diverged_step differs from its summary's, else None."""
  summary = read_json(os.path.join(run_dir, record_files.SUMMARY))
  config = read_json(os.path.join(run_dir, record_files.CONFIG))
  if not isinstance(summary, dict) or "outcome" not in summary:
    return None
  vocab = escape.vocab_size(config)
  new = classify(summary, vocab_size=vocab)
  path = escape.curve_path(run_dir)
  steps = escape.summary_fields(path, summary, vocab) if path else {}
  old_d, new_d = (
    summary.get("diverged_step"),
    steps.get("diverged_step", summary.get("diverged_step")),
  )
  if new == summary["outcome"] and new_d == old_d:
    return None
  return {
    "run": os.path.relpath(run_dir, ROOT),
    "old_outcome": summary["outcome"],
    "new_outcome": new,
    "old_diverged_step": "" if old_d is None else old_d,
    "new_diverged_step": "" if new_d is None else new_d,
  }


def table(roots: list[str]) -> tuple[str, int, list[dict]]:
  """(the CSV text, runs read, changed rows)."""
  dirs = run_dirs(roots)
  rows = [r for r in (rederive(d) for d in dirs) if r is not None]
  text = csv_table.csv_text(rows, COLUMNS, lineterminator="\n")
  return text + f"# {len(dirs)} runs read, {len(rows)} changed\n", len(dirs), rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("roots", nargs="+", help="folders of runs (searched recursively)")
  parser.add_argument("--out", help="the table's CSV file")
  parser.add_argument("--check", action="store_true", help="fail when a label changed")
  args = parser.parse_args()
  text, n, rows = table(args.roots)
  print(f"{n} runs read, {len(rows)} changed")
  for r in rows:
    print(
      f"  {r['run']}: {r['old_outcome']} -> {r['new_outcome']}, diverged_step "
      f"{r['old_diverged_step'] or '-'} -> {r['new_diverged_step'] or '-'}"
    )
  if args.check:
    if rows:
      sys.exit(f"error: {rows[0]['run']}: its recorded outcome is not today's rule's")
    if args.out and (not os.path.isfile(args.out) or open(args.out).read() != text):
      sys.exit(f"error: {args.out} is not what the runs give now: run without --check")
    return
  if args.out:
    with open_nofollow(args.out) as f:  # never through a symbolic link
      f.write(text)


if __name__ == "__main__":
  main()
