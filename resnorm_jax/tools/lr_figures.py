"""The figures of an lr sweep: capped final eval loss against lr (a panel per depth, a colour per
variant, every run a marker) and LR sensitivity and the boundary lr against depth; and
write_outputs, a sweep's tables and figures in one folder (scripts/lr_sensitivity.py).
The rows are lr_sweep_rows.py's, the sensitivity lr_sensitivity.py's. No JAX here.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.tools.lr_sensitivity import MIN_LRS, TABLE_COLUMNS, lr_curve, sensitivity_table
from resnorm_jax.tools.lr_sweep_rows import RESULT_COLUMNS, setting_title, write_csv
from resnorm_jax.tools.style import (
  BASELINE_STYLE,
  FINAL_BASELINE_LABEL,
  baseline_lines,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_label,
  variant_order,
)
from resnorm_jax.train.outcome import is_finite_number


def draw_curves(rows: Sequence[Mapping[str, Any]]):
  """The figure of `plot_curves` (matplotlib Figure, not saved)."""
  plt = pyplot()
  depths = sorted({int(r["num_layers"]) for r in rows})
  variants = variant_order(r["variant"] for r in rows)
  panels = max(len(depths), 1)
  fig, axes = plt.subplots(1, panels, figsize=(max(4.2 * panels + 2.4, 8.5), 4.8), sharey=True)
  axes = list(axes) if len(depths) > 1 else [axes]
  lrs = sorted({float(r["opt.lr"]) for r in rows})
  losses = [r["capped_loss"] for r in rows if r["capped_loss"] is not None]
  caps = [r["baseline"] for r in rows if is_finite_number(r["baseline"])]
  for ax, depth in zip(axes, depths, strict=False):
    panel = [r for r in rows if int(r["num_layers"]) == depth]
    for variant in variants:
      curve = lr_curve([r for r in panel if r["variant"] == variant])
      if curve:
        _draw_curve(ax, curve, variant_color(variant))
    for cap in sorted({round(r["baseline"], 4) for r in panel if is_finite_number(r["baseline"])}):
      baseline_lines(ax, cap, margin=False)
    ax.set(xscale="log", title=f"{depth} layers", xlabel="peak lr (Adam)")
    ax.set_xticks(lrs, [lr_label(lr) for lr in lrs], rotation=45, ha="right", fontsize="small")
    ax.minorticks_off()
    ax.grid(alpha=0.3)
  if losses and caps:
    axes[0].set_ylim(min(losses) - 0.08, max(caps) + 0.12)
  axes[0].set_ylabel("final eval loss, capped at the baseline")
  handles = [
    plt.Line2D([], [], color=variant_color(v), marker="o", label=variant_label(v)) for v in variants
  ]
  grey = "0.35"
  handles += [
    plt.Line2D([], [], color=grey, marker="o", ms=4, label="seed 0 (the line joins its lrs)"),
    plt.Line2D([], [], color=grey, marker="o", ms=4, mfc="white", ls="", label="other seeds"),
    plt.Line2D([], [], color=grey, marker="_", ms=14, mew=2, ls="", label="mean over seeds"),
    plt.Line2D([], [], color=grey, marker="x", ls="", label="diverged (drawn at the cap)"),
    plt.Line2D([], [], **BASELINE_STYLE, label=FINAL_BASELINE_LABEL),
  ]
  axes[-1].legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
  setting = (
    f"{setting_title(rows)}; every run a marker, the seed mean a bar where an lr has several seeds"
  )
  # wrapped to the figure's width: a one-panel figure cut the line at both ends
  width = int(fig.get_figwidth() * 11)
  fig.suptitle("Final eval loss against lr\n" + textwrap.fill(setting, width))
  return fig


def plot_curves(rows: Sequence[Mapping[str, Any]], out: str) -> str:
  """Capped final eval loss against lr, a panel per depth, a colour per variant: every run a
  marker (seed 0 filled, others open, x for a diverged run), a line only through seed 0's
  runs (each vertex a run's loss), the seed mean a bar at each lr with several seeds; the
  held-out no-context baseline dashed. Nothing is drawn between lrs but seed 0's line."""
  return save_figure(draw_curves(rows), out)


def _draw_curve(ax, curve: Sequence[Mapping[str, Any]], color: str) -> None:
  """One variant on one panel: a marker per run, seed 0's runs joined, the seed mean a bar."""
  seed0 = [
    (p["lr"], loss)
    for p in curve
    for loss, seed in zip(p["losses"], p["seeds"], strict=True)
    if seed == 0
  ]
  if len(seed0) > 1:
    ax.plot([x for x, _ in seed0], [y for _, y in seed0], "-", color=color, lw=1.4)
  for p in curve:
    for loss, seed, diverged in zip(p["losses"], p["seeds"], p["diverged"], strict=True):
      if diverged:
        ax.plot(p["lr"], loss, "x", color=color, ms=7)
      else:
        ax.plot(p["lr"], loss, "o", color=color, ms=4, mfc=color if seed == 0 else "white")
    if len(p["losses"]) > 1:
      ax.plot(p["lr"], p["mean"], "_", color=color, ms=14, mew=2)


def plot_sensitivity(table: Sequence[Mapping[str, Any]], out: str, title: str = "") -> str:
  """LR sensitivity against depth, a line per variant; the boundary lr beside it."""
  plt = pyplot()
  fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
  computed = [t for t in table if t["lr_sensitivity"] is not None]
  # A curve with no lr off the plateau has a sensitivity of ~0 by construction: drawn as a
  # labelled cross, not as a measured point of its line.
  done = [t for t in computed if t["boundary_lr"] is not None]
  untrained = [t for t in computed if t["boundary_lr"] is None]
  depths = sorted({t["num_layers"] for t in computed})
  variants = variant_order(t["variant"] for t in done)
  for i, variant in enumerate(variants):
    pts = [t for t in done if t["variant"] == variant]
    color = variant_color(variant)
    xs = [t["num_layers"] for t in pts]
    left.plot(
      xs, [t["lr_sensitivity"] for t in pts], "-o", color=color, label=variant_label(variant)
    )
    partial = [t for t in pts if t["note"].startswith("partial")]  # open: lrs still to run
    for t in partial:
      left.plot(t["num_layers"], t["lr_sensitivity"], "o", color=color, mfc="white", ms=7)
    # Several variants often share an lr of the grid: each is shifted sideways by 2% of its
    # depth so none hides another; the lr (the y value) is drawn exactly.
    shift = 1.02 ** (i - (len(variants) - 1) / 2)
    bounded = [t for t in pts if t["boundary_lr"]]
    right.plot(
      [t["num_layers"] * shift for t in bounded],
      [t["boundary_lr"] for t in bounded],
      "-o",
      color=color,
      label=variant_label(variant),
    )
    best = [t["best_lr"] for t in pts]
    right.plot([x * shift for x in xs], best, ":s", mfc="white", color=color, alpha=0.7)
  for t in untrained:
    color = variant_color(t["variant"])
    left.plot(t["num_layers"], t["lr_sensitivity"], "x", color=color, ms=9, mew=2)
    left.annotate(
      f"{t['variant']}: no lr trained",
      (t["num_layers"], t["lr_sensitivity"]),
      textcoords="offset points",
      xytext=(-6, 8),
      ha="right",
      fontsize="small",
      color=color,
    )
  lrs = sorted({t[k] for t in done for k in ("best_lr", "boundary_lr") if t[k]})
  for t in untrained:  # no boundary to draw: named at the foot of its depth
    right.annotate(
      f"{t['variant']}: none",
      (t["num_layers"], 0.02),
      xycoords=("data", "axes fraction"),
      ha="right",
      fontsize="small",
      color=variant_color(t["variant"]),
    )
  left.set(ylabel="LR sensitivity (nats)", title="E_lr[min(loss, baseline)] - min_lr loss")
  right.set(yscale="log", ylabel="peak lr", title="largest lr within 0.1 nats of the best")
  right.set_yticks(lrs, [lr_label(lr) for lr in lrs])
  for ax in (left, right):
    ax.set(xscale="log", xlabel="layers N")
    if depths:
      ax.set_xticks(depths, [str(d) for d in depths])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
  right.plot([], [], ":s", mfc="white", color="0.35", label="best lr (dotted)")
  if any(t["note"].startswith("partial") for t in done):
    left.plot([], [], "o", color="0.35", mfc="white", label="partial curve (lrs to run)")
    left.legend(fontsize="small")
  if not computed:
    left.text(
      0.5, 0.5, f"no curve with >= {MIN_LRS} lrs yet", ha="center", transform=left.transAxes
    )
  right.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
  fig.suptitle(title or "LR sensitivity against depth (Wortsman et al. 2023)")
  return save_figure(fig, out)


def write_outputs(
  rows: Sequence[Mapping[str, Any]], out_dir: str, grid: Sequence[float] = ()
) -> dict[str, str]:
  """results.csv, sensitivity.csv, curves.png and sensitivity.png of finished runs' rows
  (`grid`: the sweep's lrs, to note partial curves)."""
  table = sensitivity_table(rows, grid=grid)
  os.makedirs(out_dir, exist_ok=True)
  names = ("results.csv", "sensitivity.csv", "curves.png", "sensitivity.png")
  paths = {name: os.path.join(out_dir, name) for name in names}
  write_csv(rows, RESULT_COLUMNS, paths["results.csv"])
  write_csv(table, TABLE_COLUMNS, paths["sensitivity.csv"])
  plot_curves(rows, paths["curves.png"])
  plot_sensitivity(table, paths["sensitivity.png"], f"LR sensitivity: {setting_title(rows)}")
  return paths
