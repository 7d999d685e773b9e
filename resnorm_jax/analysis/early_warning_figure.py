"""docs/early_warning/auc_vs_k.png: held-out AUC against the step k a stop rule reads up to,
every point with its 95% bootstrap interval (results.csv's *_lo/*_hi columns, written by
resnorm_jax/analysis/early_warning.py). The top row draws the numbers the README's Results row
quotes (claims/early_warning.QUOTED: the all-core-signals predictor on runs still on the
plateau at k, per data set), each written beside its point, and the stop at the smallest k
whose savings it quotes; the rows below, each signal alone and all core signals together on
each data set. No JAX here; matplotlib only when drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.claims.early_warning import QUOTED, QUOTED_PREDICTOR, quoted_stop
from resnorm_jax.analysis.style import SIGNAL_COLORS, pyplot

Row = Mapping[str, Any]
# The per-signal panels: every predictor on all runs, and on the runs still on the plateau.
SIGNAL_SETS = (
  "survival",
  "stdlib grid",
  "survival, on the plateau at k",
  "stdlib grid, on the plateau at k",
)
# How each AUC column's interval was estimated (early_warning.cluster_bootstrap_auc and
# within_cell_bootstrap, 1,000 replicates, seeded).
INTERVALS = {
  "auc": "95%: bootstrap over held-out cells",
  "within_cell_auc": "95%: bootstrap over seeds within each cell",
}
COLUMN_NAMES = {"auc": "AUC, held-out cells pooled", "within_cell_auc": "AUC within a cell's seeds"}
DODGE = 1.035  # predictors at one k shifted sideways by this factor each, so bars do not overlap


def points(rows: Sequence[Row], name: str, predictor: str, column: str = "auc") -> list[tuple]:
  """(k, AUC, low, high) of one predictor on one data set, k ascending, finite AUCs only."""
  out = []
  for r in rows:
    if r["set"] == name and r["predictor"] == predictor:
      v, lo, hi = (float(r.get(c, math.nan)) for c in (column, f"{column}_lo", f"{column}_hi"))
      if math.isfinite(v):
        out.append((int(r["k"]), v, lo, hi))
  return sorted(out)


def _draw(ax, pts, color, shift=1.0, **line) -> None:
  """A predictor's AUCs joined across k, each with its interval as a bar."""
  xs = [k * shift for k, *_ in pts]
  ys = [v for _, v, _, _ in pts]
  below = [v - lo if math.isfinite(lo) else 0.0 for _, v, lo, _ in pts]
  above = [hi - v if math.isfinite(hi) else 0.0 for _, v, _, hi in pts]
  ax.errorbar(xs, ys, yerr=[below, above], color=color, capsize=2.5, elinewidth=0.9, **line)


def _frame(ax, ks: Sequence[int], title: str) -> None:
  ax.axhline(0.5, color="0.5", ls=":", lw=1)
  ax.axhline(0.9, color="0.5", ls="--", lw=1)
  ax.set(xscale="log", xlabel="step k (metrics up to k)", title=title, ylim=(-0.02, 1.04))
  ax.set_xticks(ks, [str(k) for k in ks])
  ax.set_xlim(min(ks) / 1.25, max(ks) * 1.25)
  ax.minorticks_off()
  ax.grid(alpha=0.3)


def _runs(rows: Sequence[Row], name: str) -> int:
  return max((int(r["runs"]) for r in rows if r["set"] == name), default=0)


def draw_quoted(ax, rows: Sequence[Row], key: str, name: str, column: str, ks, stop=None) -> None:
  """One quoted data set: the quoted AUC (black diamonds, its value written above each) with
  its interval; beside the survival seeds' within-cell AUC, the pooled AUC (grey, open);
  `stop` (savings.csv's quoted row) written in the panel, its k marked."""
  color = SIGNAL_COLORS[QUOTED_PREDICTOR]
  if column != "auc":
    other = points(rows, key, QUOTED_PREDICTOR, "auc")
    _draw(ax, other, "0.55", 1 / DODGE, fmt="--o", mfc="white", ms=5, lw=1)
  pts = points(rows, key, QUOTED_PREDICTOR, column)
  _draw(ax, pts, color, DODGE if column != "auc" else 1.0, fmt="-D", ms=6, lw=2)
  shift = DODGE if column != "auc" else 1.0
  for k, v, _, hi in pts:
    y = hi if math.isfinite(hi) else v
    ax.annotate(f"{v:.2f}", (k * shift, min(y, 1.0)), xytext=(0, 4), textcoords="offset points",
                ha="center", fontsize=9, fontweight="bold")  # fmt: skip
  if stop:
    k = int(stop["k"])
    ax.axvline(k, color="0.35", lw=1, ls="-.")
    text = (
      f"stop at k = {k}: saves {float(stop['core_hours_saved']):.1f} of "
      f"{float(stop['core_hours_total']):.1f} core-hours,\n"
      f"{stop['stopped_that_would_have_escaped']} of {stop['escaped']} trained runs lost"
    )
    ax.text(0.03, 0.04, text, transform=ax.transAxes, fontsize=8.5, va="bottom",
            bbox={"facecolor": "white", "edgecolor": "0.6", "alpha": 0.9})  # fmt: skip
  runs = _runs(rows, key)
  _frame(ax, ks, f"{name}: {COLUMN_NAMES[column]}\n(up to {runs} runs; bars {INTERVALS[column]})")


def draw(rows: Sequence[Row], savings: Sequence[Row] = ()):
  """The figure (matplotlib Figure, not saved): the quoted row on top, then a panel per
  SIGNAL_SETS data set with every predictor, each point with its interval."""
  plt = pyplot()
  ks = sorted({int(r["k"]) for r in rows}) or [50]
  fig = plt.figure(figsize=(16, 15))
  grid = fig.add_gridspec(3, 6, hspace=0.45, wspace=0.5)
  top = [fig.add_subplot(grid[0, 2 * i : 2 * i + 2]) for i in range(len(QUOTED))]
  stop = quoted_stop(savings)
  for i, (ax, (key, name, column)) in enumerate(zip(top, QUOTED, strict=True)):
    draw_quoted(ax, rows, key, name, column, ks, stop if "grid" in key else None)
    if i == 0:
      ax.set_ylabel("AUC of held-out scores")
  handles = [
    plt.Line2D([], [], color="black", marker="D", lw=2,
               label="quoted in the README (all core signals, on the plateau at k)"),
    plt.Line2D([], [], color="0.55", marker="o", mfc="white", ls="--",
               label="AUC pooled over cells"),
  ]  # fmt: skip
  top[0].legend(handles=handles, fontsize=8, loc="lower right")
  sets = [s for s in SIGNAL_SETS if any(r["set"] == s for r in rows)]
  predictors = list(SIGNAL_COLORS)
  for i, name in enumerate(sets):
    ax = fig.add_subplot(grid[1 + i // 2, 3 * (i % 2) : 3 * (i % 2) + 3])
    for j, predictor in enumerate(predictors):
      together = predictor == QUOTED_PREDICTOR
      shift = DODGE ** (j - (len(predictors) - 1) / 2)
      _draw(ax, points(rows, name, predictor), SIGNAL_COLORS[predictor], shift, fmt="-o",
            ms=4 if together else 3, lw=2.2 if together else 1.1, label=predictor)  # fmt: skip
    _frame(ax, ks, f"{name}: AUC, held-out cells pooled (up to {_runs(rows, name)} runs)")
    if i % 2 == 0:
      ax.set_ylabel("AUC of held-out scores")
  fig.legend(*fig.axes[-1].get_legend_handles_labels(), loc="lower center", ncol=len(predictors),
             fontsize=9, title="predictor (bars: 95% bootstrap over held-out cells)")  # fmt: skip
  fig.suptitle(
    "Which signal warns first that a run will stay on the plateau? (dotted: AUC 0.5, chance; "
    "dashed: 0.9)\nTop: the numbers the README quotes; below: each signal alone",
    fontsize=13,
  )
  fig.subplots_adjust(left=0.06, right=0.98, top=0.91, bottom=0.1)
  return fig
