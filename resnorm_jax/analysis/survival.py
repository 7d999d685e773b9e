"""Escape from the plateau as an event in time: per run its first passage below the margin,
every relapse above it and the fraction of evals below; per cell (variant, depth, lr) the
escape probability with an exact 95% interval and a Kaplan-Meier survival curve of escape
times (configs/sweeps/survival.py, docs/survival/). scripts/survival.py is the command line.
No JAX here.

The event is the first periodic eval at or below `baseline - margin`, where the baseline is
the periodic eval set's own no-context loss (`periodic_eval_no_context_loss` in summary.json,
the plateau of that curve). A run that never gets there is censored at its last eval: it had
not escaped by then, which says nothing about later. The project's escape step
(outcome.escape_step: from then on below at every eval to the end) is the same event with no
relapse after it; the two are told apart by the relapse count.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.lr_sweep_rows import eval_curve
from resnorm_jax.analysis.stats import (
  clopper_pearson,
  fisher_exact,
  kaplan_meier,
  robust_slope_with_se,
  survival_at,
  trend,
)
from resnorm_jax.analysis.style import (
  lr_label,
)
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files, status
from resnorm_jax.runs.outcome import STUCK_MARGIN, escape_step, is_finite_number
from resnorm_jax.runs.sweep_results import dotted, run_row

Row = dict[str, Any]
MARGINS = (0.05, STUCK_MARGIN, 0.2)  # the margin's effect: the escape read at each
RUN_COLUMNS = (
  "name",
  "variant",
  "num_layers",
  "opt.lr",
  "seed",
  "steps",
  "eval_every",
  "eval_tokens",
  "periodic_baseline",
  "first_passage",
  "relapses",
  "relapse_steps",
  "escape_step",
  "fraction_below",
  "min_eval_gap",
  "final_eval_gap",
  "late_slope",
  "late_slope_se",
  "late_trend",
  *(f"first_passage_m{m:g}" for m in MARGINS),
)


def passages(
  evals: Sequence[tuple[int, float]], baseline: float, margin: float = STUCK_MARGIN
) -> dict[str, Any]:
  """A curve's crossings of `baseline - margin`: first_passage (the first eval step at or
  below it, None when none), relapse_steps (each later eval step where it is back above after
  having been below), fraction_below (of all evals) and escape_step (below from then on to
  the end: outcome.escape_step). A non-finite loss is above."""
  threshold = baseline - margin
  first, relapses, below_count, was_below = None, [], 0, False
  points = sorted(evals)
  for step, loss in points:
    below = is_finite_number(loss) and loss <= threshold
    below_count += below
    if below and first is None:
      first = step
    if was_below and not below:
      relapses.append(step)
    was_below = below
  return {
    "first_passage": first,
    "relapse_steps": relapses,
    "fraction_below": below_count / len(points) if points else None,
    "escape_step": escape_step(points, baseline, margin),
  }


# A survival point's name: <variant>-L<layers>-lr<lr>-s<seed> (configs/sweeps/survival.py,
# stabilizers.py); its variant part names what the config file alone does not (postnorm-softcap).
POINT_NAME = re.compile(r"^(?P<variant>.+)-L\d+-lr[^-]+-s\d+$")


def cell_variant(name: str, config_variant: str | None) -> str | None:
  """The variant a run's cell is named by: its point name's variant part, else its config's."""
  m = POINT_NAME.match(name)
  return m.group("variant") if m else config_variant


def run_record(run_dir: str) -> Row:
  """One finished run folder's row (RUN_COLUMNS) from its config, summary and curve."""
  row = run_row(run_dir)
  config = row["_config"]
  summary = read_json(os.path.join(run_dir, record_files.SUMMARY)) or {}
  base = summary.get("periodic_eval_no_context_loss")
  steps, losses = eval_curve(run_dir)
  evals = list(zip(steps, losses, strict=True))
  name = os.path.basename(os.path.normpath(run_dir))
  out: Row = {
    "name": name,
    "variant": cell_variant(name, row.get("variant")),
    "num_layers": row.get("num_layers"),
    "opt.lr": dotted(config, "opt.lr"),
    "seed": row.get("seed"),
    "steps": summary.get("steps"),
    "eval_every": dotted(config, "train.eval_every"),
    "eval_tokens": summary.get("periodic_eval_tokens") or _eval_tokens(config),
    "periodic_baseline": base,
    "outcome": row.get("outcome"),
  }
  if not is_finite_number(base) or not evals:
    return out
  p = passages(evals, base)
  out.update(
    first_passage=p["first_passage"],
    relapses=len(p["relapse_steps"]),
    relapse_steps=" ".join(str(s) for s in p["relapse_steps"]),
    escape_step=p["escape_step"],
    fraction_below=round(p["fraction_below"], 4),
    min_eval_gap=round(min(losses) - base, 4),
    final_eval_gap=round(losses[-1] - base, 4),
  )
  for m in MARGINS:
    out[f"first_passage_m{m:g}"] = passages(evals, base, m)["first_passage"]
  budget = int(out["steps"] or steps[-1])
  late = [(s / 1000, v) for s, v in evals if s >= budget / 2]
  fit = robust_slope_with_se([x for x, _ in late], [y for _, y in late])
  if fit:
    out["late_slope"], out["late_slope_se"] = round(fit[0], 4), round(fit[1], 4)
    out["late_trend"] = trend(*fit)
  return out


def _eval_tokens(config: Mapping[str, Any] | None) -> int | None:
  """Tokens of one periodic eval: eval_batches x batch_size x seq_len."""
  parts = [dotted(config, k) for k in ("train.eval_batches", "train.batch_size", "train.seq_len")]
  return math.prod(parts) if all(isinstance(p, int) for p in parts) else None


def finished_runs(runs_dir: str, pattern: str | None = None) -> list[Row]:
  """Rows of the completed runs under `runs_dir` (those whose folder name `pattern`, a
  regular expression, matches, when given), sorted by cell and seed; each row's `_dir` is its
  folder."""
  rows = []
  for name in sorted(os.listdir(runs_dir)):
    if pattern is not None and not re.search(pattern, name):
      continue
    path = os.path.join(runs_dir, name)
    summary = read_json(os.path.join(path, record_files.SUMMARY)) or {}
    if summary.get("status") in (status.COMPLETED, status.DIVERGED):
      rows.append({**run_record(path), "_dir": path})
  return sorted(rows, key=cell_key_and_seed)


def cell_key(row: Mapping[str, Any]) -> tuple:
  """(variant, num_layers, lr): the cell a run belongs to."""
  return (row["variant"], row["num_layers"], row["opt.lr"])


def cell_key_and_seed(row: Mapping[str, Any]) -> tuple:
  return (*cell_key(row), row["seed"] if row["seed"] is not None else -1)


def event_times(rows: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[bool]]:
  """(time, escaped) per run: its first passage, or its last step (censored) when none."""
  escaped = [r.get("first_passage") is not None for r in rows]
  times = [r["first_passage"] if e else r["steps"] for r, e in zip(rows, escaped, strict=True)]
  return times, escaped


def cell_summary(rows: Sequence[Mapping[str, Any]], horizon: int) -> Row:
  """One cell's escape probability by `horizon` steps: k of n runs with a first passage at
  or before it (every run must have run that far), the exact 95% interval, and the
  Kaplan-Meier estimate over all runs (longer runs included, censored at their last step)."""
  variant, n_layers, lr = cell_key(rows[0])
  usable = [r for r in rows if (r.get("steps") or 0) >= horizon]
  k = sum(1 for r in usable if r.get("first_passage") is not None and r["first_passage"] <= horizon)
  n = len(usable)
  lo, hi = clopper_pearson(k, n) if n else (None, None)
  km = kaplan_meier(*event_times(rows))
  longest = max(r["steps"] for r in rows)
  at_end = survival_at(km, longest)
  firsts = sorted(r["first_passage"] for r in rows if r.get("first_passage") is not None)
  out: Row = {
    "variant": variant,
    "num_layers": n_layers,
    "lr": lr_label(lr),
    "seeds": n,
    "horizon": horizon,
    "escaped": k,
    "p_escape": round(k / n, 4) if n else None,
    "ci_lo": round(lo, 4) if lo is not None else None,
    "ci_hi": round(hi, 4) if hi is not None else None,
    "median_first_passage": statistics.median(firsts) if firsts else None,
    "first_passages": " ".join(str(s) for s in firsts),
    "relapsed_runs": sum(1 for r in rows if (r.get("relapses") or 0) > 0),
    "escaped_for_good": sum(1 for r in rows if r.get("escape_step") is not None),
    "longest_steps": longest,
    "km_escape_by_longest": round(1 - at_end["survival"], 4),
    "km_lo": round(1 - at_end["hi"], 4),
    "km_hi": round(1 - at_end["lo"], 4),
  }
  for m in MARGINS:
    key = f"first_passage_m{m:g}"
    out[f"escaped_m{m:g}"] = sum(1 for r in usable if r.get(key) is not None and r[key] <= horizon)
  stuck = [r for r in rows if r.get("first_passage") is None and r.get("late_trend")]
  for t in ("falling", "flat", "rising"):
    out[f"never_{t}"] = sum(1 for r in stuck if r["late_trend"] == t)
  return out


def cells(rows: Sequence[Mapping[str, Any]], horizon: int) -> list[Row]:
  """cell_summary of every cell, in row order."""
  groups: dict[tuple, list[Mapping[str, Any]]] = {}
  for r in rows:
    if r.get("first_passage") is not None or r.get("periodic_baseline") is not None:
      groups.setdefault(cell_key(r), []).append(r)
  return [cell_summary(g, horizon) for g in groups.values()]


def compare_kept(cells: Sequence[dict[str, Any]], baselines: set[str]) -> None:
  """Adds `kept_p_vs_baseline` to each cell that is not a baseline variant's: Fisher's exact
  test (two-sided) of its escapes kept to the end against the baseline cell's of the same
  depth and lr (None where there is none)."""
  base = {(c["num_layers"], c["lr"]): c for c in cells if c["variant"] in baselines}
  for c in cells:
    if c["variant"] in baselines:
      continue
    b = base.get((c["num_layers"], c["lr"]))
    c["kept_p_vs_baseline"] = (
      round(
        fisher_exact(c["escaped_for_good"], c["seeds"], b["escaped_for_good"], b["seeds"]),
        4,
      )
      if b
      else None
    )


CELL_COLUMNS = (
  "variant",
  "num_layers",
  "lr",
  "seeds",
  "horizon",
  "escaped",
  "p_escape",
  "ci_lo",
  "ci_hi",
  "median_first_passage",
  "first_passages",
  "relapsed_runs",
  "escaped_for_good",
  "longest_steps",
  "km_escape_by_longest",
  "km_lo",
  "km_hi",
  *(f"escaped_m{m:g}" for m in MARGINS),
  "never_falling",
  "never_flat",
  "never_rising",
)
