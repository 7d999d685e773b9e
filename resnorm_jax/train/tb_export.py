"""Committed runs exported into TensorBoard: the metrics.jsonl, config.json and summary.json
of every run folder under a path become TensorBoard events, HParams and the Custom Scalars
layout, written through the same writers a live run uses (tb_events, hparams).

The events go beside each run's metrics.jsonl, or under a given logdir at the run's path
below the folder given. Idempotent: an export replaces an earlier export's files (event files
ending in `SUFFIX`, and the `*.hparams` file), nothing else; a run folder holding a live run's
own event files is left alone in place. Wall times are reconstructed from each row's
step_seconds, ending at the time of export. A run whose summary predates
`periodic_eval_no_context_loss` draws the held-out no-context loss as its baseline instead.
scripts/export_tensorboard.py is its command line.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ml_collections import ConfigDict

from resnorm_jax.runs import metrics_file, record_files
from resnorm_jax.train import hparams, tb_events

SUFFIX = ".export"  # the event files an export writes (and replaces)


def run_folders(path: str) -> list[str]:
  """Every folder at or under `path` holding a metrics.jsonl (checkpoints not searched)."""
  found = []
  for folder, subdirs, files in os.walk(path):
    subdirs[:] = sorted(
      d for d in subdirs if d not in (record_files.CHECKPOINTS, record_files.EVENTS)
    )
    if metrics_file.METRICS in files:
      found.append(folder)
  return found


def own_events(folder: str) -> list[str]:
  """Event files in `folder` that a run wrote (not an export's, not an hparams file)."""
  if not os.path.isdir(folder):
    return []
  return [
    n
    for n in os.listdir(folder)
    if n.startswith(tb_events.EVENTS_PREFIX) and not n.endswith((SUFFIX, tb_events.HPARAMS_SUFFIX))
  ]


def _read_json(path: str) -> dict:
  try:
    with open(path) as f:
      out = json.load(f)
  except (OSError, ValueError):
    return {}
  return out if isinstance(out, dict) else {}


def walltimes(records: list[dict], end: float) -> list[float]:
  """A wall time per record from its step_seconds (the mean over its interval), the last
  at `end`; rows without one count no time."""
  elapsed, prev, stamps = 0.0, 0, []
  for r in records:
    seconds = r.get("step_seconds")
    if isinstance(seconds, (int, float)):
      elapsed += seconds * max(r["step"] - prev, 0)
    prev = r["step"]
    stamps.append(elapsed)
  return [end - elapsed + s for s in stamps]


def export_run(run: str, target: str) -> int:
  """Writes one run's events and hparams into `target`; returns the rows exported."""
  config = _read_json(os.path.join(run, record_files.CONFIG))
  summary = _read_json(os.path.join(run, record_files.SUMMARY))
  records = [
    r
    for r in metrics_file.read_metrics(os.path.join(run, metrics_file.METRICS))
    if isinstance(r, dict) and isinstance(r.get("step"), int)
  ]
  os.makedirs(target, exist_ok=True)
  for name in os.listdir(target):  # an earlier export's files: replaced
    if name.startswith(tb_events.EVENTS_PREFIX) and name.endswith(SUFFIX):
      os.remove(os.path.join(target, name))
  train = config.get("train", {})
  per_batch = (train.get("batch_size") or 0) * (train.get("seq_len") or 0)
  baseline = next(
    (
      summary[k]
      for k in ("periodic_eval_no_context_loss", "heldout_unigram_entropy", "unigram_entropy")
      if isinstance(summary.get(k), (int, float))
    ),
    None,
  )
  events = tb_events.Events(
    target,
    no_context_loss=baseline,
    eval_tokens={
      "periodic": (train.get("eval_batches") or 0) * per_batch or None,
      "final": summary.get("final_eval_tokens"),
    },
    filename_suffix=SUFFIX,
  )
  stamps = walltimes(records, time.time())
  for record, walltime in zip(records, stamps, strict=True):
    flat = {
      k: v
      for k, v in record.items()
      if k != "step" and (isinstance(v, (int, float, list)) and not isinstance(v, bool))
    }
    events.write(record["step"], flat, walltime)
  events.close(stamps[-1] if stamps else None)
  if config:
    status = str(summary.get("status") or "unknown")
    hp = hparams.run_hparams(ConfigDict(config), summary)
    steps = summary.get("steps") or (records[-1]["step"] if records else 0)
    hparams.write(target, hp, status, steps, summary)
  return len(records)


def export(paths: list[str], logdir: str | None = None) -> int:
  """Exports every run folder under each of `paths` (into `logdir`, or in place), a line per
  run and a closing line printed; returns the exit status: 2 where a path holds no run."""
  exported = 0
  for path in paths:
    runs = run_folders(path)
    if not runs:
      print(f"error: no run folder (one with {metrics_file.METRICS}) in {path}", file=sys.stderr)
      return 2
    for run in runs:
      if logdir:
        rel = os.path.relpath(run, path)
        rel = os.path.basename(os.path.abspath(path)) if rel == "." else rel
        target = os.path.join(logdir, rel)
      else:
        target = run
        if own_events(run):
          print(f"{run}: skipped, it has its own TensorBoard events (use --logdir)")
          continue
      rows = export_run(run, target)
      exported += 1
      print(f"{run}: {rows} rows -> {target}")
  where = logdir or " ".join(paths)
  print(f"{exported} runs exported; view them: tensorboard --logdir {where}")
  return 0
