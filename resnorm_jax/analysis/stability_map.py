"""A sweep's depth x variant stability map (scripts/plot_curves.py --stability_map): a cell per
(variant, depth) of its results.csv, coloured by the most common outcome and annotated with
the mean final eval loss. The stability boundary is boundary.py's. No JAX here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from resnorm_jax.analysis.style import (
  STATUS_COLORS,
  STATUS_HATCHES,
  pyplot,
  save_figure,
  text_color,
)
from resnorm_jax.files import csv_table


def read_results(path: str) -> list[dict[str, str]]:
  """Rows of a sweep's results.csv; ValueError without the columns a map needs."""
  rows = csv_table.read_csv(path)
  rows = [{**r, "outcome": r.get("outcome", r.get("status"))} for r in rows]  # old: status
  missing = {"variant", "num_layers", "outcome", "final_eval_loss"} - set(rows[0] if rows else {})
  if not rows or missing:
    raise ValueError(f"{path}: no rows or missing columns {sorted(missing)}")
  return rows


def stability_cells(rows: Sequence[dict[str, str]]):
  """(variants, depths, {(variant, depth): (status, text)}): most common status per cell,
  text the mean final eval loss (with the number of runs when several)."""
  variants = list(dict.fromkeys(r["variant"] for r in rows))
  depths = sorted({int(r["num_layers"]) for r in rows if r["num_layers"]})
  groups: dict[tuple[str, int], list[dict[str, str]]] = {}
  for r in rows:
    if r["num_layers"]:
      groups.setdefault((r["variant"], int(r["num_layers"])), []).append(r)
  cells = {}
  for key, members in groups.items():
    statuses = [m["outcome"] for m in members]
    status = max(dict.fromkeys(statuses), key=statuses.count)
    losses = [float(m["final_eval_loss"]) for m in members if m["final_eval_loss"]]
    losses = [x for x in losses if math.isfinite(x)]
    text = f"{sum(losses) / len(losses):.2f}" if losses else status
    cells[key] = (status, text + (f"\n(n={len(members)})" if len(members) > 1 else ""))
  return variants, depths, cells


def plot_stability_map(rows: Sequence[dict[str, str]], out: str, title: str = "") -> str:
  """A variant x depth grid colored by status, annotated with the final eval loss."""
  from matplotlib.patches import Patch

  plt = pyplot()
  variants, depths, cells = stability_cells(rows)
  fig, ax = plt.subplots(figsize=(1.6 * len(depths) + 3, 0.45 * len(variants) + 1.6))
  for i, v in enumerate(variants):
    for j, d in enumerate(depths):
      status, text = cells.get((v, d), ("pending", ""))
      face = STATUS_COLORS.get(status, "#ffffff")
      hatch = STATUS_HATCHES.get(status)
      ax.add_patch(plt.Rectangle((j, i), 1, 1, fc=face, ec="white", hatch=hatch))
      ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=8, color=text_color(face))
  ax.set(xlim=(0, len(depths)), ylim=(len(variants), 0), xlabel="layers N")
  ax.set_xticks([j + 0.5 for j in range(len(depths))], [str(d) for d in depths])
  ax.set_yticks([i + 0.5 for i in range(len(variants))], variants)
  ax.set_title(title or "final eval loss by variant and depth")
  used = [s for s in STATUS_COLORS if any(c[0] == s for c in cells.values())]
  handles = [
    Patch(fc=STATUS_COLORS[s], ec="0.6", hatch=STATUS_HATCHES.get(s), label=s) for s in used
  ]
  ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
  return save_figure(fig, out)
