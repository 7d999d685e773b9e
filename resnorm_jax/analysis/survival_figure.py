"""The survival figure (survival.png): a cell a column, each seed's periodic eval against its
no-context loss drawn by its fate, and below it the Kaplan-Meier curves of the first passage
and of the escape kept to the end (the tables: survival.py). No JAX here."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.lr_sweep_rows import eval_curve
from resnorm_jax.analysis.stats import kaplan_meier, survival_at
from resnorm_jax.analysis.style import (
  BASELINE_STYLE,
  MARGIN_STYLE,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_label,
)
from resnorm_jax.analysis.survival import cell_key, event_times
from resnorm_jax.runs.outcome import STUCK_MARGIN


def cell_title(variant: str, n_layers: int, lr: float) -> str:
  """'Post-LN, 12 layers, lr 1e-3'; a stabilizer's cell (<base>-<part>, base one of
  STABILIZER_BASES: postnorm-attngate, deepnorm-attngate) '<Base> + <its label>' as the docs'
  tables name it."""
  from resnorm_jax.analysis.claims.stabilizers import label
  from resnorm_jax.analysis.style import STABILIZER_BASES, VARIANT_LABELS

  name = variant_label(variant)
  for base in STABILIZER_BASES:
    part = variant.removeprefix(f"{base}-")
    if part != variant and part:
      name = f"{VARIANT_LABELS[base]} + {label(part)}"
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
