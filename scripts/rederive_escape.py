"""Escape and divergence steps of committed runs, from their curves, into their summary.json.

Runs that predate `escape_step` and `diverged_step` in summary.json (resnorm_jax/runs/outcome.py's
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

from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.data import batches, corpora, sources, unigram  # (no JAX)
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import escape, record_files
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE
from resnorm_jax.runs.sweep_results import run_row, write_rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
  "eval_set_baseline",
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
      if record_files.SUMMARY in files and escape.curve_path(folder):
        found.append(folder)
  return sorted(found)


_CORPORA: dict[tuple, corpora.Corpus | None] = {}


def _corpus(config: dict) -> corpora.Corpus | None:
  """The run's corpus (loaded once per data section), None where it cannot be loaded here."""
  data = dict(config.get("data") or {})
  vocab = escape.vocab_size(config) or 256
  seq = (config.get("train") or {}).get("seq_len", 128)
  key = (json.dumps(data, sort_keys=True), vocab, seq)
  if key not in _CORPORA:
    try:
      _CORPORA[key] = sources.load_corpus(ConfigDict(data), vocab, seq)
    except Exception:  # another machine's file, a missing folder: no eval-set baseline
      _CORPORA[key] = None
  return _CORPORA[key]


def eval_set_baseline(run_dir: str, summary: dict) -> float | None:
  """The no-context loss of the run's periodic eval set (its first train.eval_batches
  held-out batches), from its corpus as loaded here; None unless the corpus loads with the
  same split sizes as the run recorded (the same text)."""
  config = read_json(os.path.join(run_dir, record_files.CONFIG)) or {}
  corpus, split = _corpus(config), summary.get("data_split") or {}
  if corpus is None or not split:
    return None
  if (len(corpus.train), len(corpus.val)) != (split.get("train_tokens"), split.get("val_tokens")):
    return None
  t = config.get("train") or {}
  targets = batches.eval_targets(
    corpus.val, t.get("eval_batches", 4), batch_size=t["batch_size"], seq_len=t["seq_len"]
  )
  return unigram.heldout_unigram_entropy(corpus.train, targets, escape.vocab_size(config) or 256)


def update_summary(run_dir: str) -> bool:
  """Writes the run's eval-set baseline (where its corpus loads here), escape_step and
  diverged_step into its summary.json; True if changed."""
  path = os.path.join(run_dir, record_files.SUMMARY)
  with open(path) as f:
    summary = json.load(f)
  new = {}
  if EVAL_SET_BASELINE not in summary:
    value = eval_set_baseline(run_dir, summary)
    if value is not None:
      new[EVAL_SET_BASELINE] = value
  config = read_json(os.path.join(run_dir, record_files.CONFIG))
  curve = escape.curve_path(run_dir) or os.path.join(run_dir, record_files.METRICS)
  fields = escape.summary_fields(curve, {**summary, **new}, escape.vocab_size(config))
  new.update({k: fields[k] for k in escape.FIELDS})
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
    "eval_set_baseline": (read_json(os.path.join(run_dir, record_files.SUMMARY)) or {}).get(
      EVAL_SET_BASELINE
    ),
    "lr": opt.get("lr"),
    "warmup": opt.get("warmup_steps"),
  }


BASELINES = "eval_set_baselines.csv"


def baseline_pairs(rows: list[dict]) -> list[dict]:
  """Each distinct (whole held-out split, periodic eval set) no-context loss pair: how far
  the eval curve's own plateau sits from the split's, and how many runs share it."""
  pairs: dict[tuple, dict] = {}
  for r in rows:
    key = (r["baseline"], r["eval_set_baseline"])
    if key not in pairs:
      offset = None if None in key else key[1] - key[0]
      pairs[key] = {
        "baseline": key[0],
        "eval_set_baseline": key[1],
        "offset": offset,
        "runs": 0,
        "example": r["path"],
      }
    pairs[key]["runs"] += 1
  return sorted(pairs.values(), key=lambda p: -p["runs"])


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
  print(write_rows(baseline_pairs(rows), os.path.join(os.path.dirname(args.out), BASELINES)))
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
