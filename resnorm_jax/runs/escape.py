"""A run folder's escape and divergence steps, read from its curve (metrics.jsonl, or the
curve.jsonl excerpt docs/runs/ keeps) and summary.json: what the training loop writes into each
summary and what the collectors read. The rules are resnorm_jax/runs/outcome.py's. No JAX here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from etils import epath

from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import curve_fields

# A run folder's curve: metrics.jsonl as the loop writes it, or the excerpt docs/runs/<run>/
# keeps of a run whose full metrics.jsonl was too large to commit.
CURVE_FILES = (record_files.METRICS, "curve.jsonl")
FIELDS = ("escape_step", "diverged_step")


def curve_path(run_dir: str) -> str | None:
  """The run folder's curve file, None when it has none."""
  for name in CURVE_FILES:
    if os.path.isfile(os.path.join(run_dir, name)):
      return os.path.join(run_dir, name)
  return None


def vocab_size(config: Mapping[str, Any] | None) -> int | None:
  """The vocabulary size of a config.json (resolved first), None when it does not say."""
  for section in ("resolved_model", "model"):
    value = ((config or {}).get(section) or {}).get("vocab_size")
    if isinstance(value, int) and value > 0:
      return value
  return None


def summary_fields(
  metrics_path: str, summary: Mapping[str, Any], vocab: int | None
) -> dict[str, int | None]:
  """{"escape_step", "diverged_step"} from a metrics file (the whole curve, resumed segments
  included) and the run's summary; a missing file reads as an empty curve."""
  records = read_metrics(metrics_path) if epath.Path(metrics_path).is_file() else []  # or gs://
  return curve_fields(records, summary, vocab)


def first_row_lost(metrics_path: str, config: Mapping[str, Any] | None, steps: int | None):
  """The step of the first row a run's metrics file should hold and does not (its rows from
  step 1 on are lost: a metrics.jsonl deleted before a resume), else None. The first row a
  run logs is at min(train.log_every, train.eval_every, its steps) (config.json's)."""
  train = (config or {}).get("train") or {}
  every = [v for v in (train.get("log_every"), train.get("eval_every"), steps) if v]
  if not all(isinstance(v, int) and v > 0 for v in every) or not every or not steps:
    return None
  first = min(every)
  records = read_metrics(metrics_path) if epath.Path(metrics_path).is_file() else []
  logged = [r["step"] for r in records if isinstance(r, dict) and isinstance(r.get("step"), int)]
  return first if not logged or min(logged) > first else None


def run_fields(run_dir: str) -> dict[str, int | None]:
  """{"escape_step", "diverged_step", "budget_steps"} of a finished run folder, computed from
  its curve (not read from its summary); budget_steps is the step its outcome is judged at."""
  summary = read_json(os.path.join(run_dir, record_files.SUMMARY)) or {}
  config = read_json(os.path.join(run_dir, record_files.CONFIG))
  path = curve_path(run_dir) or os.path.join(run_dir, record_files.METRICS)
  return {**summary_fields(path, summary, vocab_size(config)), "budget_steps": summary.get("steps")}


def stored_fields(run_dir: str, summary: Mapping[str, Any] | None) -> dict[str, int | None]:
  """escape_step and diverged_step as the summary records them, computed from the curve when
  it predates them; both None for a run without a summary (pending); escape_step None when
  the summary says it was computed from a curve whose first rows were lost
  (`escape_step_partial`: the step may be later than the run's)."""
  if not summary:
    return dict.fromkeys(FIELDS)
  if all(k in summary for k in FIELDS):
    fields = {k: summary[k] for k in FIELDS}
  else:
    computed = run_fields(run_dir)
    fields = {k: computed[k] for k in FIELDS}
  if summary.get("escape_step_partial"):  # computed from a curve that lost its first rows:
    fields["escape_step"] = None  # possibly later than the run's, so not told (left blank)
  return fields
