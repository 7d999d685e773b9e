"""Is the plateau permanent? The budget test's tables and figures (configs/sweeps/budget.py):
the same points as the loss-vs-lr sweep run longer, to tell a run that is slow from one that
is stuck: when, if ever, each seed escaped the plateau. scripts/budget.py is the command line.
No JAX here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.lr_sweep_rows import Row, eval_curve
from resnorm_jax.analysis.style import (
  SEED_STYLES,
  baseline_lines,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_order,
)
from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.runs import record_files
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE, is_finite_number

BUDGET_COLUMNS = (
  "name",
  "variant",
  "num_layers",
  "lr",
  "warmup",
  "schedule",
  "seed",
  "steps",
  "escape_step",
  "final_eval_loss",
  "baseline",
  "outcome",
  "diverged_step",
  "late_slope",
  "late_slope_se",
  "late_trend",
)
SETTING = ("variant", "num_layers", "lr", "warmup", "schedule")


def budget_row(row: Mapping[str, Any]) -> Row:
  """A results row (`result_row`) in the budget table's columns."""
  renamed = {"lr": "opt.lr", "warmup": "opt.warmup_steps", "schedule": "opt.schedule"}
  return {k: row.get(renamed.get(k, k)) for k in BUDGET_COLUMNS}


def escaped_fraction(escape_steps: Sequence[int | None], steps: int) -> list[tuple[int, float]]:
  """(step, fraction of the runs escaped by then) at 0, each escape step and `steps`: a step
  function; a run that never escaped (None) counts in the total only."""
  if not escape_steps:
    return []
  n = len(escape_steps)
  done = sorted(s for s in escape_steps if s is not None)
  points = [(0, 0.0)] + [(s, sum(d <= s for d in done) / n) for s in dict.fromkeys(done)]
  return points + [(steps, len(done) / n)]


def setting_label(setting: Sequence[Any]) -> str:
  """A budget setting in words: 'postnorm, 24 layers, lr 1e-3, no warmup, constant'."""
  variant, depth, lr, warmup, schedule = setting
  warm = "no warmup" if not warmup else f"warmup {warmup:,}"
  return f"{variant}, {depth} layers, lr {lr_label(float(lr))}, {warm}, {schedule}"


def plot_survival(rows: Sequence[Mapping[str, Any]], out: str) -> str:
  """Fraction of seeds escaped against step, a line per setting (its variant's colour, a dash
  pattern per setting of one variant); a tick on the x axis at each run's budget."""
  plt = pyplot()
  groups: dict[tuple, list[Mapping[str, Any]]] = {}
  for r in rows:
    groups.setdefault(tuple(r[k] for k in SETTING), []).append(r)
  order = {v: i for i, v in enumerate(variant_order(k[0] for k in groups))}
  fig, ax = plt.subplots(figsize=(11, 5))
  dashes = ("-", "--", ":", "-.")
  seen: dict[str, int] = {}
  for setting in sorted(groups, key=lambda k: (order[k[0]], *map(str, k[1:]))):
    members = groups[setting]
    steps = max(int(m["steps"] or 0) for m in members)
    points = escaped_fraction([m["escape_step"] for m in members], steps)
    style = dashes[seen.get(setting[0], 0) % len(dashes)]
    seen[setting[0]] = seen.get(setting[0], 0) + 1
    label = f"{setting_label(setting)} (n={len(members)})"
    xs, ys = zip(*points, strict=True)
    ax.step(xs, ys, where="post", ls=style, color=variant_color(setting[0]), label=label)
  ax.set(xlabel="step", ylabel="fraction of seeds escaped", ylim=(-0.03, 1.03))
  ax.set_title(
    "Seeds escaped from the plateau, by step\n"
    "(eval loss 0.1 nats below the no-context baseline from then to the end)"
  )
  ax.grid(alpha=0.3)
  if groups:
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
  else:
    ax.text(0.5, 0.5, "no finished budget run yet", ha="center", transform=ax.transAxes)
  return save_figure(fig, out)


CELL = ("num_layers", "lr", "warmup", "schedule")


def plot_budget_curves(
  rows: Sequence[Mapping[str, Any]], runs_dir: str, out: str, mark_step: int = 0
) -> str:
  """Periodic eval loss against step of every budget run, a panel per cell (depth, lr, warmup,
  schedule), a line per run (its variant's colour, a dash pattern per seed), the eval set's
  no-context loss dashed and the escape threshold (0.1 below it) dotted; `mark_step` (the
  loss-vs-lr sweep's budget) a vertical line."""
  plt = pyplot()
  cells: dict[tuple, list[Mapping[str, Any]]] = {}
  for r in rows:
    cells.setdefault(tuple(r[k] for k in CELL), []).append(r)
  keys = sorted(cells, key=lambda k: tuple(map(str, k)))
  panels = max(len(keys), 1)
  cols = min(panels, 3)
  nrows = -(-panels // cols)
  fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols + 2, 3.6 * nrows), squeeze=False)
  flat = [ax for row in axes for ax in row]
  for ax in flat[panels:]:
    ax.set_visible(False)
  for ax, key in zip(flat, keys, strict=False):
    depth, lr, warmup, schedule = key
    for r in sorted(cells[key], key=lambda r: (r["variant"], r["seed"])):
      steps, losses = eval_curve(os.path.join(runs_dir, r["name"]))
      style = SEED_STYLES[int(r["seed"] or 0) % len(SEED_STYLES)]
      color = variant_color(r["variant"])
      ax.plot(steps, losses, ls=style, color=color, lw=1.2, label=f"{r['variant']} s{r['seed']}")
      summary = read_json(os.path.join(runs_dir, r["name"], record_files.SUMMARY)) or {}
      cap = summary.get(EVAL_SET_BASELINE)
      if is_finite_number(cap):
        baseline_lines(ax, cap)
    if mark_step:
      ax.axvline(mark_step, color="0.6", lw=0.8)
    warm = "no warmup" if not warmup else f"warmup {warmup:,}"
    ax.set_title(f"{depth} layers, lr {lr_label(float(lr))}, {warm}, {schedule}", fontsize="medium")
    ax.set_ylim(None, 3.6)
    ax.set(xlabel="step", ylabel="periodic eval loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower left")
  if not keys:
    flat[0].text(0.5, 0.5, "no finished budget run yet", ha="center", transform=flat[0].transAxes)
  note = f"\ngrey line: step {mark_step:,}, the loss-vs-lr sweep's budget" if mark_step else ""
  fig.suptitle(
    "Budget runs: periodic eval loss by step\ndashed: the eval set's no-context loss; "
    f"dotted: 0.1 below it, the escape threshold{note}",
    fontsize="medium",
  )
  return save_figure(fig, out)


def write_budget(
  rows: Sequence[Mapping[str, Any]], out_dir: str, runs_dir: str = "", mark_step: int = 0
) -> dict[str, str]:
  """budget.csv and budget.png (survival) of finished budget runs' results rows, and with
  `runs_dir` budget_curves.png (their eval curves)."""
  os.makedirs(out_dir, exist_ok=True)
  paths = {"csv": os.path.join(out_dir, "budget.csv"), "png": os.path.join(out_dir, "budget.png")}
  table = [budget_row(r) for r in rows]
  csv_table.write_csv(paths["csv"], table, BUDGET_COLUMNS, extrasaction="ignore")
  plot_survival(table, paths["png"])
  if runs_dir:
    paths["curves"] = plot_budget_curves(
      table, runs_dir, os.path.join(out_dir, "budget_curves.png"), mark_step
    )
  return paths
