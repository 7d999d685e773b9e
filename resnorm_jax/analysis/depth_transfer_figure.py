"""docs/depth_transfer/<variant>.png: loss against lr per depth parametrization and the fitted
best lr against depth (resnorm_jax/analysis/depth_transfer.py's fits). No JAX here.

The two fits' best lrs carry different kinds of uncertainty, drawn as what each is:
  5-point: +-1 standard error, estimated from the least-squares parabola's residuals (delta
    method), an error bar;
  3-point: no error is estimated (the parabola through three points is exact). Its vertex lies
    within half an lr grid step of the grid's best lr, so a shaded box spans that range, from
    halfway to the lower neighbouring lr to halfway to the upper one, labelled as the lr grid
    step's resolution, not as an error bar.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis import lr_figures, lr_sweep_rows
from resnorm_jax.analysis import lr_sensitivity as lrs
from resnorm_jax.analysis.depth_transfer import PARAMS
from resnorm_jax.analysis.style import (
  PARAM_LABELS,
  lr_label,
  param_color,
  pyplot,
  save_figure,
  variant_label,
)

Row = dict[str, Any]
GRID_STEP_LABEL = (
  "3-point: shaded = lr grid step resolution (grid best lr +- half a step, where its vertex "
  "lies; no error estimated)"
)
SE_LABEL = "5-point: error bar = +-1 s.e., estimated from the fit's residuals"


def grid_half_step(lrs_run: Sequence[float], best: float) -> tuple[float, float]:
  """(low, high): halfway in log lr from the grid's best lr to each neighbouring lr run (the
  best itself on a side with no neighbour): where a 3-point vertex can lie."""
  lrs_run = sorted(lrs_run)
  i = min(range(len(lrs_run)), key=lambda j: abs(math.log(lrs_run[j] / best)))
  low = math.sqrt(lrs_run[i - 1] * best) if i > 0 else best
  high = math.sqrt(lrs_run[i + 1] * best) if i + 1 < len(lrs_run) else best
  return low, high


def _curve_lrs(rows: Sequence[Row], param: str, depth: int) -> list[float]:
  return sorted(
    {
      float(r["opt.lr"])
      for r in rows
      if r["depth_param"] == param and int(r["num_layers"]) == depth
    }
  )


def draw_best_lrs(ax, rows: Sequence[Row], table: Sequence[Mapping[str, Any]], params) -> None:
  """Best lr against depth per parametrization: the 3-point vertex (filled) on its grid
  resolution (shaded), the 5-point vertex (open, dashed) with its estimated +-1 s.e."""
  plt = pyplot()
  for i, param in enumerate(params):
    color = param_color(param)
    shift = 1 + 0.05 * (i - 1)  # parametrizations side by side, none hidden
    three = [t for t in table if t["depth_param"] == param and t["best_lr_3pt"]]
    if three:
      xs = [t["num_layers"] * shift for t in three]
      ax.plot(xs, [t["best_lr_3pt"] for t in three], "o-", color=color,
              label=f"{PARAM_LABELS[param]}, 3pt")  # fmt: skip
      for x, t in zip(xs, three, strict=True):
        low, high = grid_half_step(
          _curve_lrs(rows, param, t["num_layers"]), float(t["grid_best_lr"])
        )
        ax.add_patch(
          plt.Rectangle(
            (x / 1.035, low), x * 1.035 - x / 1.035, high - low, color=color, alpha=0.18, lw=0
          )
        )
    five = [t for t in table if t["depth_param"] == param and t["best_lr_5pt"]]
    if five:
      best = [t["best_lr_5pt"] for t in five]
      se = [t["best_lr_5pt_se_log2"] for t in five]
      err = [[b * (1 - 2**-e) for b, e in zip(best, se, strict=True)],
             [b * (2**e - 1) for b, e in zip(best, se, strict=True)]]  # fmt: skip
      xs = [t["num_layers"] * shift * 1.012 for t in five]
      ax.errorbar(xs, best, yerr=err, fmt="s--", capsize=3, color=color, mfc="white",
                  label=f"{PARAM_LABELS[param]}, 5pt")  # fmt: skip
  handles, _ = ax.get_legend_handles_labels()
  handles += [
    plt.Rectangle((0, 0), 1, 1, color="0.35", alpha=0.25, lw=0, label=GRID_STEP_LABEL),
    plt.Line2D([], [], color="0.35", marker="s", mfc="white", ls="", label=SE_LABEL),
  ]
  for h in handles:
    h.set_label(textwrap.fill(h.get_label(), 40))
  ax.legend(handles=handles, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))


def plot_transfer(rows: Sequence[Row], table: Sequence[Row], variant: str, out: str) -> str:
  """Loss against lr, a panel per parametrization, depth as colour, the fitted best lr a
  vertical tick on each curve; a last panel: best lr against depth per parametrization."""
  plt = pyplot()
  params = [p for p in PARAMS if any(r["depth_param"] == p for r in rows)]
  depths = sorted({int(r["num_layers"]) for r in rows})
  cmap = plt.get_cmap("viridis")
  color = {d: cmap(i / max(len(depths) - 1, 1)) for i, d in enumerate(depths)}
  fig, axes = plt.subplots(1, len(params) + 1, figsize=(4.3 * (len(params) + 1) + 2.6, 4.6))
  kinds: set[str] = set()
  for ax, param in zip(axes, params, strict=False):
    ax.sharey(axes[0]) if ax is not axes[0] else None
    for depth in depths:
      curve = lrs.lr_curve(
        [r for r in rows if r["depth_param"] == param and int(r["num_layers"]) == depth]
      )
      if not curve:
        continue
      # seed 0 joined; a seed mean only where the seeds agree, their span where they split
      kinds |= lr_figures.draw_curve(ax, curve, color[depth], label=f"{depth} layers")
      fit = next((t for t in table if (t["depth_param"], t["num_layers"]) == (param, depth)), None)
      if fit and fit["best_lr_3pt"]:
        ax.axvline(fit["best_lr_3pt"], color=color[depth], ls=":", lw=1.2)
    ax.set(xscale="log", title=PARAM_LABELS[param], xlabel="peak lr (Adam)")
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("final eval loss (capped at the baseline)")
  handles, _ = axes[0].get_legend_handles_labels()
  fig.legend(handles=handles + lr_figures.mark_handles(kinds), loc="lower center", ncol=5,
             fontsize="small", title="dotted verticals: each depth's 3-point best lr",
             title_fontsize="small", frameon=False)  # fmt: skip
  ax = axes[-1]
  draw_best_lrs(ax, rows, table, params)
  ax.set(xscale="log", yscale="log", xlabel="layers", ylabel="fitted best lr",
         title="best lr against depth")  # fmt: skip
  ax.set_xticks(depths, [str(d) for d in depths])
  ticks = sorted({float(r["opt.lr"]) for r in rows})
  ax.set_yticks(ticks, [lr_label(t) for t in ticks])
  ax.minorticks_off()
  ax.grid(alpha=0.3)
  fig.suptitle(
    f"{variant_label(variant)}: does the best lr transfer across depth? "
    f"({lr_sweep_rows.setting_title(rows)})"
  )
  fig.tight_layout(rect=(0, 0.2, 1, 1))  # the legend below the panels, off the curves
  return save_figure(fig, out, tight=False)
