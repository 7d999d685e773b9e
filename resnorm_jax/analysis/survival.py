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

import csv
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
  BASELINE_STYLE,
  MARGIN_STYLE,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_label,
)
from resnorm_jax.config.nofollow import open_nofollow
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files
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
    if summary.get("status") in ("completed", "diverged"):
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


def write_csv(rows: Sequence[Mapping[str, Any]], path: str, columns: Sequence[str]) -> str:
  """rows as CSV with `columns` (missing values empty)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open_nofollow(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
    w.writeheader()
    for r in rows:
      w.writerow({c: "" if r.get(c) is None else r[c] for c in columns})
  return path


def cell_title(variant: str, n_layers: int, lr: float) -> str:
  """'Post-LN, 12 layers, lr 1e-3'; a stabilizer's cell (postnorm-<part>) 'Post-LN + <its
  label>' as the docs' tables name it."""
  from resnorm_jax.analysis.claims.stabilizers import BASE, label, stabilizer_of
  from resnorm_jax.analysis.style import VARIANT_LABELS

  part = stabilizer_of(variant)
  name = f"{VARIANT_LABELS[BASE]} + {label(part)}" if part else variant_label(variant)
  return f"{name}, {n_layers} layers, lr {lr_label(lr)}"


# How a run's escape ended, in survival.png: kept (below the margin from its escape step to the
# end: outcome.escape_step), fell back (a first passage, then above the margin at the end) or
# never (no first passage). Kept runs in their variant's colour, fell-back runs black dash-dot.
FATES = ("kept", "fell back", "never")
FATE_LABELS = {
  "kept": "escaped and kept it to the end",
  "fell back": "escaped, fell back above the margin, ended there",
  "never": "never escaped",
}
FATE_STYLES = {
  "kept": {"ls": "-", "lw": 0.9},
  "fell back": {"ls": "-.", "lw": 1.4, "color": "black"},
  "never": {"ls": "-", "lw": 0.8, "color": "0.65"},
}


def fate(row: Mapping[str, Any]) -> str:
  """'kept', 'fell back' or 'never' (FATES) of a runs.csv row."""
  if row.get("escape_step") is not None:
    return "kept"
  return "fell back" if row.get("first_passage") is not None else "never"


def _km_steps(times: Sequence[int], events: Sequence[bool]) -> tuple[list, list, list, list]:
  """The Kaplan-Meier staircase of not-yet-escaped: xs, survival, its 95% band's lo and hi."""
  km = kaplan_meier(times, events)
  xs, ys, los, his = [0], [1.0], [1.0], [1.0]
  for row in km:
    xs += [row["step"], row["step"]]
    ys += [ys[-1], row["survival"]]
    los += [los[-1], row["lo"]]
    his += [his[-1], row["hi"]]
  xs.append(max(times))
  return xs, ys + ys[-1:], los + los[-1:], his + his[-1:]


def kept_times(rows: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[bool]]:
  """(time, kept) per run: its escape step when it kept the escape to the end, else its last
  step (censored)."""
  kept = [r.get("escape_step") is not None for r in rows]
  times = [r["escape_step"] if k else r["steps"] for r, k in zip(rows, kept, strict=True)]
  return times, kept


WRAP = 4  # cells a row in the survival figure


def draw_survival(runs_dir: str, rows: Sequence[Mapping[str, Any]]):
  """The figure of plot_survival (matplotlib Figure, not saved)."""
  from matplotlib.lines import Line2D

  plt = pyplot()
  groups: dict[tuple, list[Mapping[str, Any]]] = {}
  for r in rows:
    groups.setdefault(cell_key(r), []).append(r)
  n = max(len(groups), 1)
  cols = min(n, WRAP)  # cells wrap at WRAP a row: the figure stays readable at page width
  rows_of_cells = -(-n // cols)
  fig, axes = plt.subplots(
    2 * rows_of_cells, cols, figsize=(3.6 * cols, 3.5 * 2 * rows_of_cells + 0.8), squeeze=False
  )
  for j in range(n, rows_of_cells * cols):  # the last row's empty places
    axes[2 * (j // cols)][j % cols].axis("off")
    axes[2 * (j // cols) + 1][j % cols].axis("off")
  drawn: set[str] = set()
  for j, (key, members) in enumerate(groups.items()):
    color = variant_color(key[0])
    top, bottom = axes[2 * (j // cols)][j % cols], axes[2 * (j // cols) + 1][j % cols]
    bottom.sharex(top)
    for r in sorted(members, key=lambda r: FATES.index(fate(r)), reverse=True):
      steps, losses = eval_curve(r.get("_dir") or os.path.join(runs_dir, r["name"]))
      gaps = [v - r["periodic_baseline"] for v in losses]
      kind = fate(r)
      drawn.add(kind)
      top.plot(steps, gaps, **{"color": color, **FATE_STYLES[kind]}, alpha=0.9)
    top.axhline(0, **BASELINE_STYLE)
    top.axhline(-STUCK_MARGIN, **MARGIN_STYLE)
    top.set_ylim(-0.8, 0.15)
    top.set_title(cell_title(*key), fontsize=9)
    times, events = event_times(members)
    xs, ys, los, his = _km_steps(times, events)
    bottom.plot(xs, ys, color=color, lw=1.5)
    bottom.fill_between(xs, los, his, color=color, alpha=0.15, lw=0)
    km = kaplan_meier(times, events)
    for t, e in zip(times, events, strict=True):
      if not e:
        bottom.plot([t], [survival_at(km, t)["survival"]], "|", color="k", ms=8)
    kept_xs, kept_ys, _, _ = _km_steps(*kept_times(members))
    bottom.plot(kept_xs, kept_ys, color="black", ls="--", lw=1.3)
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_xlabel("step")
    k, kept = sum(events), sum(kept_times(members)[1])
    bottom.set_title(f"escaped {k} of {len(members)}, kept to the end {kept}", fontsize=9)
  for i in range(rows_of_cells):
    axes[2 * i][0].set_ylabel("periodic eval - its no-context loss")
    axes[2 * i + 1][0].set_ylabel("fraction not yet escaped (KM, 95%)")
  runs = []
  for f in FATES:
    if f in drawn:
      look = {"color": "0.3", **FATE_STYLES[f]}  # kept: its variant's colour, here grey
      label = f"top: {FATE_LABELS[f]}" + (" (the variant's colour)" if f == "kept" else "")
      runs.append(Line2D([], [], **look, label=label))
  curves = [
    Line2D([], [], color="0.3", lw=1.5, label="bottom: not yet past the margin (first passage)"),
    Line2D([], [], color="black", ls="--", lw=1.3, label="bottom: not yet escaped for good"),
    Line2D([], [], color="k", marker="|", ls="", ms=8, label="bottom: a run censored at its end"),
  ]
  lines = [
    Line2D([], [], **BASELINE_STYLE, label="its eval set's no-context loss"),
    Line2D([], [], **MARGIN_STYLE, label=f"{STUCK_MARGIN:g} nats below it: the margin"),
  ]
  fig.legend(handles=runs + lines + curves, loc="lower center", ncol=3, fontsize=9, frameon=False)
  fig.suptitle(
    f"Escape from the plateau: the first periodic eval {STUCK_MARGIN:g} nats below its eval "
    "set's no-context loss, and whether the run stayed below to the end\n(Kaplan-Meier with "
    "its 95% band: first passage; dashed: the escape kept to the end, a fell-back run censored)",
    fontsize=10,
  )
  height = fig.get_figheight()
  fig.tight_layout(rect=(0, 1.0 / height, 1, 1 - 0.55 / height))  # the legend; the title
  return fig


def plot_survival(runs_dir: str, rows: Sequence[Mapping[str, Any]], out: str) -> str:
  """A column per cell: on top each seed's periodic eval loss minus its eval set's
  no-context loss (0 dashed, -margin dotted: the rule's own lines), drawn by its fate: kept
  to the end (its variant's colour), fell back (black dash-dot) or never escaped (grey); below,
  the Kaplan-Meier fraction of runs not yet past the margin against step, with its 95% band
  and censoring ticks, and (black dashed) the fraction not yet escaped for good (escape step,
  a fell-back run censored at its end)."""
  return save_figure(draw_survival(runs_dir, rows), out, tight=False)


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
