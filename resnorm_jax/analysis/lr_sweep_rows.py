"""An lr sweep's run folders as rows (configs/sweeps/lr_sensitivity.py): a row per finished run
with its axes (variant, depth, lr, seed, budget), verdict, escape and divergence steps, late
trend, and final eval loss capped at its no-context baseline (a diverged run, or a non-finite
loss, counts as the baseline: a run that learned nothing is as bad as the baseline, however
far above it the loss ended); the sweep's grid of lrs, the runs' setting in words, and rows as
CSV. lr_sensitivity.py reads the rows, as width.py, depth_transfer.py and budget.py do.
No JAX here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis import stats
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files, status
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import is_finite_number
from resnorm_jax.runs.sweep_point import POINT_FILE
from resnorm_jax.runs.sweep_results import dotted, run_row

Row = dict[str, Any]
FINISHED = (status.TRAINED, status.STUCK, status.DIVERGED)
# A run's late trend is read from its periodic evals at steps from this fraction of its
# budget on: the second half, where a trained run's curve has flattened and a slow plateau
# run's is still coming down.
LATE_FROM = 0.5
RESULT_COLUMNS = (
  "name",
  "variant",
  "num_layers",
  "opt.lr",
  "opt.warmup_steps",
  "opt.schedule",
  "seed",
  "train.steps",
  "steps",
  "data",
  "final_eval_loss",
  "baseline",
  "capped_loss",
  "outcome",
  "escape_step",
  "diverged_step",
  "late_slope",
  "late_slope_se",
  "late_trend",
)


def corpus_name(config: Mapping[str, Any]) -> str:
  """A run's corpus in words: 'stdlib bytes', or the text file's name."""
  source, path = dotted(config, "data.source"), dotted(config, "data.path")
  if source == "stdlib":
    return "stdlib bytes"
  return os.path.basename(path) if path else str(source)


def capped_loss(row: Mapping[str, Any]) -> float | None:
  """The final eval loss capped at the baseline; a diverged or non-finite run is the baseline."""
  loss, cap = row.get("final_eval_loss"), row.get("baseline")
  if not is_finite_number(cap):
    return None
  if row.get("outcome") == status.DIVERGED or not is_finite_number(loss):
    return cap
  return min(loss, cap)


def eval_curve(run_dir: str) -> tuple[list[int], list[float]]:
  """(steps, periodic eval losses) of a run folder's metrics.jsonl; torn lines and
  non-finite losses skipped."""
  path = os.path.join(run_dir, record_files.METRICS)
  records = read_metrics(path) if os.path.isfile(path) else []
  points = [
    (int(r["step"]), float(r["eval/loss"]))
    for r in records
    if isinstance(r, dict) and is_finite_number(r.get("eval/loss"))
  ]
  return [s for s, _ in points], [v for _, v in points]


def late_fit(
  steps: Sequence[int], losses: Sequence[float], budget: int, late_from: float = LATE_FROM
) -> tuple[float, float] | None:
  """(late_slope, its standard error) in nats per 1,000 steps; None with fewer than 3 evals.
  The standard error holds for autocorrelated evals (stats.robust_slope_with_se)."""
  late = [(s / 1000, v) for s, v in zip(steps, losses, strict=True) if s >= late_from * budget]
  return stats.robust_slope_with_se([x for x, _ in late], [y for _, y in late])


def late_slope(
  steps: Sequence[int], losses: Sequence[float], budget: int, late_from: float = LATE_FROM
) -> float | None:
  """The least-squares slope of the periodic eval loss over the evals at steps >=
  `late_from` x `budget`, in nats per 1,000 steps: negative while the loss is still coming
  down (a slow run), about 0 on a flat plateau; None with fewer than 3 such evals.

  A measurement, not a verdict: it says whether a run that has not escaped by its last step
  was still moving, the question a verdict at one step cannot answer."""
  fit = late_fit(steps, losses, budget, late_from)
  return fit[0] if fit else None


def result_row(run_dir: str) -> Row:
  """One run folder's row: variant (its sweep point's config), depth, lr, seed and budget
  (its config.json), verdict, losses, escape and divergence steps (its summary)."""
  row = run_row(run_dir)
  config = row["_config"]
  out = {
    **{k: row.get(k) for k in RESULT_COLUMNS},
    **{k: dotted(config, k) for k in ("opt.lr", "opt.warmup_steps", "opt.schedule")},
    "train.steps": dotted(config, "train.steps"),
    "data": corpus_name(config) if config else None,
  }
  out["capped_loss"] = capped_loss(out)
  if out["outcome"] != status.DIVERGED and is_finite_number(out["steps"]):
    fit = late_fit(*eval_curve(run_dir), int(out["steps"]))
    if fit:
      out["late_slope"], out["late_slope_se"] = fit
      out["late_trend"] = stats.trend(*fit)  # falling / flat / rising at 2 standard errors
  return out


def finished_rows(runs_dir: str) -> list[Row]:
  """Rows of the finished runs (trained, stuck, diverged) under `runs_dir`, sorted by
  variant, depth, lr and seed; running, interrupted and pending points are left out."""
  dirs = [os.path.join(runs_dir, n) for n in sorted(os.listdir(runs_dir))]
  rows = [result_row(d) for d in dirs if os.path.isfile(os.path.join(d, record_files.SUMMARY))]
  rows = [r for r in rows if r["outcome"] in FINISHED and r["opt.lr"] and r["num_layers"]]
  return sorted(rows, key=lambda r: (r["variant"], r["num_layers"], r["opt.lr"], r["seed"]))


def grid_lrs(runs_dir: str) -> list[float]:
  """The sweep's grid, ascending: every lr planned (sweep_point.json, run or not) for at least
  half of the sweep's (config, depth) curves. An lr planned for fewer (the left edge, run for
  deep Post-LN alone) is an extension: drawn, but outside the grid the curves are compared on."""
  planned: dict[tuple[str, Any], set[float]] = {}
  for name in os.listdir(runs_dir):
    point = read_json(os.path.join(runs_dir, name, POINT_FILE)) or {}
    overrides = point.get("overrides") or {}
    lr = overrides.get("opt.lr")
    if is_finite_number(lr):
      key = (str(point.get("config")), overrides.get("model.num_layers"))
      planned.setdefault(key, set()).add(float(lr))
  lrs = set().union(*planned.values())
  return sorted(lr for lr in lrs if 2 * sum(lr in p for p in planned.values()) >= len(planned))


def setting_title(rows: Sequence[Mapping[str, Any]]) -> str:
  """The runs' shared setting in words: corpus, budget, warmup, schedule (each value seen)."""

  def words(key: str, fmt) -> str:
    values = sorted({r.get(key) for r in rows}, key=str)
    return " / ".join("?" if v is None else fmt(v) for v in values)

  if not rows:
    return "no finished run yet"

  warm = lambda w: "no warmup" if not w else f"{w:,} warmup steps"
  return ", ".join(
    [
      words("data", str),
      words("train.steps", lambda s: f"{s:,} steps"),
      words("opt.warmup_steps", warm),
      words("opt.schedule", lambda s: f"{s} lr"),
    ]
  )
