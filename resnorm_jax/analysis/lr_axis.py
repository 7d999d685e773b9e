"""Loss against lr along a second axis (width, corpus): each variant's curve at each value of
the axis, its best lr, boundary lr and failing lr, and how the runs at the failing lr failed.
resnorm_jax/analysis/width.py (d_model) and corpus.py (the data) are its axes. No JAX here.

The rows are the loss-vs-lr grid's (resnorm_jax/analysis/lr_sweep_rows.py: capped loss, outcome,
escape and divergence steps) with the axis's column added.
"""

from __future__ import annotations

import dataclasses
import math
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from resnorm_jax.analysis import lr_figures, lr_sweep_rows
from resnorm_jax.analysis import lr_sensitivity as lrs
from resnorm_jax.analysis.style import (
  BASELINE_STYLE,
  FINAL_BASELINE_LABEL,
  baseline_lines,
  lr_label,
  pyplot,
  variant_label,
  variant_order,
)
from resnorm_jax.files import csv_table
from resnorm_jax.runs import status
from resnorm_jax.runs.outcome import STUCK_MARGIN, is_finite_number

Row = dict[str, Any]
EDGE_FIELDS = (
  "best_lr",
  "best_loss",
  "boundary_lr",
  "failing_lr",
  "failure",
  "lr_sensitivity",
  "n_lrs",
  "seeds",
  "n_runs",
  "note",
)


@dataclasses.dataclass(frozen=True)
class Axis:
  """The column a sweep varies besides lr: its key in the rows, how its values sort, their
  colour and legend label, and the figure's title."""

  key: str
  order: Callable[[Any], Any]
  color: Callable[[Any], str]
  label: Callable[[Any], str]
  title: str


def _number(text: str) -> Any:
  """A csv cell as int, float or None (empty); other text unchanged."""
  if text == "":
    return None
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text


def grid_rows(csv_path: str, variants: Sequence[str], num_layers: int) -> list[Row]:
  """The loss-vs-lr grid's results.csv rows (docs/lr_sensitivity/) of `variants` at
  `num_layers`, cells as numbers: the reference column an axis is compared against. An
  absent file: no rows."""
  if not os.path.isfile(csv_path):
    return []
  rows = [{k: _number(v) for k, v in r.items()} for r in csv_table.read_csv(csv_path)]
  return [r for r in rows if r["variant"] in variants and r["num_layers"] == num_layers]


def _failure(members: Sequence[Mapping[str, Any]]) -> str:
  """How the runs at a failing lr failed: 'diverged', 'stuck', or both counted."""
  kinds = [m["outcome"] for m in members if m["outcome"] in (status.STUCK, status.DIVERGED)]
  if not kinds:
    return ""
  if len(set(kinds)) == 1:
    return kinds[0]
  return ", ".join(f"{kinds.count(k)} {k}" for k in (status.DIVERGED, status.STUCK))


def _failed_on_half(point: Mapping[str, Any], cap: float) -> bool:
  """Whether at least half of an lr's seeds failed: each seed's capped loss on the plateau
  (within the stuck margin of the baseline). A seed mean would mix them: one trained seed
  beside two stuck ones pulls the mean off the plateau and the lr read as not failing."""
  failed = sum(loss >= cap - STUCK_MARGIN for loss in point["losses"])
  return 2 * failed >= len(point["losses"])


def edge_row(variant: str, axis: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> Row:
  """One curve's best lr, boundary lr (the largest within 0.1 nats of the best), failing lr
  (the smallest above the best where at least half of the seeds' capped losses are on the
  plateau: within the stuck margin of the baseline) and how its runs failed; the sensitivity
  from 5 lrs. `axis`: the curve's value of the axis, as {key: value}."""
  curve = lrs.lr_curve(members)
  seeds = sorted({s for p in curve for s in p["seeds"]})
  row: Row = {
    "variant": variant,
    **axis,
    "n_lrs": len(curve),
    "seeds": " ".join(str(s) for s in seeds),
    "n_runs": sum(len(p["losses"]) for p in curve),
    "note": "",
  }
  caps = [m["baseline"] for m in members if is_finite_number(m.get("baseline"))]
  if not curve or not caps:
    return {**row, "note": "no finished run"}
  cap = sum(caps) / len(caps)
  best = min(curve, key=lambda p: p["mean"])
  row["boundary_lr"] = lrs.boundary_lr(curve, cap)
  if row["boundary_lr"] is None:
    return {**row, "note": "no lr trained"}
  row.update(best_lr=best["lr"], best_loss=best["mean"])
  failing = [p for p in curve if p["lr"] > best["lr"] and _failed_on_half(p, cap)]
  if failing:
    row["failing_lr"] = failing[0]["lr"]
    at = [m for m in members if math.isclose(float(m["opt.lr"]), failing[0]["lr"])]
    row["failure"] = _failure(at)
  else:
    row["note"] = "no failing lr above the best"
  if len(curve) >= lrs.MIN_LRS:
    row["lr_sensitivity"] = lrs.sensitivity(curve)
  return row


def edge_table(rows: Sequence[Mapping[str, Any]], axis: Axis) -> list[Row]:
  """A row per (variant, axis value) in the palette's variant order, the axis in its order."""
  groups: dict[tuple[str, Any], list[Mapping[str, Any]]] = {}
  for r in rows:
    groups.setdefault((r["variant"], r[axis.key]), []).append(r)
  order = variant_order(v for v, _ in groups)
  keys = sorted(groups, key=lambda k: (order.index(k[0]), axis.order(k[1])))
  return [edge_row(v, {axis.key: a}, groups[(v, a)]) for v, a in keys]


def edge_line(t: Mapping[str, Any], where: str) -> str:
  """An edge_table row in one line: '<variant> <where>: best_lr .., boundary_lr .., failing_lr
  ..; <failure>; <note>' (the scripts' printout)."""
  keys = ("best_lr", "boundary_lr", "failing_lr")
  text = ", ".join(f"{k} {t[k]:g}" for k in keys if t.get(k) is not None)
  extra = "; ".join(x for x in (t.get("failure"), t.get("note")) if x)
  return f"  {t['variant']} {where}: {text}{'; ' + extra if extra else ''}"


def draw_curves(
  rows: Sequence[Mapping[str, Any]],
  axis: Axis,
  reference: Sequence[Mapping[str, Any]] = (),
  names: tuple[str, str] = ("", ""),
):
  """Capped final eval loss against lr: a panel per variant, a colour per value of the axis
  (every run a marker, seed 0's runs joined, the seed mean a bar where the seeds agree, x a
  diverged run: lr_figures.draw_curve, values side by side by lr_figures.DODGE), each
  value's own no-context baseline, named where a panel has several. With `reference` rows (sp
  beside muP), a second row of panels draws them the same way; `names` titles the two rows."""
  plt = pyplot()
  variants = variant_order(r["variant"] for r in rows) or ["(no run)"]
  sets = [rows, reference] if reference else [rows]
  values = sorted({r[axis.key] for rs in sets for r in rs}, key=axis.order)
  n = len(variants)
  fig, grid = plt.subplots(
    len(sets),
    n,
    figsize=(4.4 * n + 2.6, 4.0 * len(sets) + 0.8),
    sharey=True,
    sharex="col",
    squeeze=False,
  )
  everything = [r for rs in sets for r in rs]
  losses = [r["capped_loss"] for r in everything if r["capped_loss"] is not None]
  caps = [r["baseline"] for r in everything if is_finite_number(r["baseline"])]
  kinds: set[str] = set()
  several = False  # a panel with several baselines, each named on its line
  for k, (axes, these) in enumerate(zip(grid, sets, strict=True)):
    for j, (ax, variant) in enumerate(zip(axes, variants, strict=True)):
      panel = [r for r in these if r["variant"] == variant]
      here = [v for v in values if any(r[axis.key] == v for r in panel)]
      for i, value in enumerate(here):
        curve = lrs.lr_curve([r for r in panel if r[axis.key] == value])
        shift = lr_figures.DODGE ** (i - (len(here) - 1) / 2)
        kinds |= lr_figures.draw_curve(ax, curve, axis.color(value), shift=shift)
      several |= _baselines(ax, panel, axis)
      lrs_here = sorted({float(r["opt.lr"]) for r in everything if r["variant"] == variant})
      title = variant_label(variant) + (f", {names[k]}" if names[k] else "")
      ax.set(xscale="log", title=title, xlabel="peak lr (Adam)")
      ax.tick_params(labelbottom=True)
      ax.set_xticks(
        lrs_here, [lr_label(x) for x in lrs_here], rotation=45, ha="right", fontsize="small"
      )
      ax.minorticks_off()
      ax.grid(alpha=0.3)
      if j == 0:
        ax.set_ylabel("final eval loss, capped at the baseline")
  if losses and caps:
    grid[0][0].set_ylim(min(losses) - 0.08, max(caps) + 0.12)
  handles = [
    plt.Line2D([], [], color=axis.color(v), marker="o", label=axis.label(v)) for v in values
  ]
  handles += lr_figures.mark_handles(kinds)
  label = FINAL_BASELINE_LABEL + (" (each its own, named on its line)" if several else "")
  handles += [plt.Line2D([], [], **BASELINE_STYLE, label=label)]
  for h in handles:
    h.set_label(textwrap.fill(h.get_label(), 34))
  grid[0][-1].legend(
    handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small"
  )
  fig.suptitle(f"{axis.title}\n{lr_sweep_rows.setting_title(everything)}")
  return fig


def _baselines(ax, panel: Sequence[Mapping[str, Any]], axis: Axis) -> bool:
  """Each no-context baseline of a panel's rows, dashed; where the panel has several (one per
  corpus), each in its value's colour and named at the left above its line. Returns whether
  it had several."""
  by_cap: dict[float, list[Any]] = {}
  for r in panel:
    if is_finite_number(r["baseline"]):
      values = by_cap.setdefault(round(r["baseline"], 4), [])
      values += [r[axis.key]] if r[axis.key] not in values else []
  for cap, values in sorted(by_cap.items()):
    if len(by_cap) == 1:
      baseline_lines(ax, cap, margin=False)
      continue
    color = axis.color(values[0]) if len(values) == 1 else BASELINE_STYLE["color"]
    ax.axhline(cap, **{**BASELINE_STYLE, "color": color})
    names = ", ".join(axis.label(v) for v in sorted(values, key=axis.order))
    ax.annotate(
      f"no-context loss, {names}",
      (0.02, cap),
      xycoords=("axes fraction", "data"),
      xytext=(0, 2),
      textcoords="offset points",
      fontsize="x-small",
      color=color,
      va="bottom",
    )
  return len(by_cap) > 1
