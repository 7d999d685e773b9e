"""Does the best lr transfer across depth? Loss-vs-lr curves per depth parametrization, the
best lr per depth from a fit in log lr, and the slope of best lr against depth. No JAX here.

Rows are lr_sweep_rows.py's (final eval loss capped at the no-context baseline), each with the
run's `model.depth_param` (config.json; "sp" where absent). Standard parametrization's rows
are the loss-vs-lr grid's runs (docs/lr_sensitivity/runs); a parametrized run at its base
depth is sp's run bit for bit (tests/test_depth_param.py), so the base depth's sp rows stand
for every parametrization there.

The best lr of a curve, two ways (the loss rises more steeply above the best lr than below,
so a parabola's vertex depends on how many points it spans; both are reported):
  3-point: the parabola in log2(lr) through the lowest seed-mean point and its two
    neighbours (exact); its resolution taken as half the grid spacing (0.5 in log2).
  5-point: the least-squares parabola through the lowest point and up to two neighbours on
    each side; a standard error from the fit's residuals (delta method).
A curve whose lowest point is its smallest or largest lr has no fitted best lr: the grid does
not bracket it. The slope of log2(best lr) against log2(L) is a weighted least-squares line
(weights 1/se^2) for each fit; 0 means the best lr transfers across depth.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from resnorm_jax.data.fs import read_json
from resnorm_jax.tools import lr_sensitivity as lrs
from resnorm_jax.tools import lr_sweep_rows
from resnorm_jax.tools.style import lr_label, pyplot, save_figure, variant_label

Row = dict[str, Any]
PARAMS = ("sp", "depth_mup", "completep")
PARAM_LABELS = {
  "sp": "standard (sp)",
  "depth_mup": "depth-muP (a=1/2)",
  "completep": "CompleteP (a=1)",
}
FITS = {"3pt": 1, "5pt": 2}  # fit name -> points on each side of the lowest it may use
BEST_COLUMNS = (
  "variant", "depth_param", "num_layers", "lrs", "grid_best_lr", "grid_best_loss",
  "best_lr_3pt", "best_lr_3pt_se_log2", "best_lr_5pt", "best_lr_5pt_se_log2",
)  # fmt: skip
SLOPE_COLUMNS = ("variant", "depth_param", "fit", "depths", "slope", "slope_se")


def depth_param(run_dir: str) -> str:
  """The run's depth parametrization as its config.json records it ("sp" if absent)."""
  config = read_json(os.path.join(run_dir, "config.json")) or {}
  return str((config.get("model") or {}).get("depth_param") or "sp")


def rows_of(runs_dir: str, depths: Sequence[int] | None = None) -> list[Row]:
  """Finished runs' rows under `runs_dir`, each with its depth_param (optionally only the
  given depths)."""
  out = []
  for r in lr_sweep_rows.finished_rows(runs_dir):
    if depths is None or int(r["num_layers"]) in depths:
      out.append({**r, "depth_param": depth_param(os.path.join(runs_dir, r["name"]))})
  return out


def with_base_depth(rows: Sequence[Row], base_depth: int) -> list[Row]:
  """`rows` plus, for every (variant, parametrization) present, sp's base-depth rows as that
  parametrization's (the same runs bit for bit)."""
  out = list(rows)
  base = [r for r in rows if r["depth_param"] == "sp" and int(r["num_layers"]) == base_depth]
  for variant, param in sorted({(r["variant"], r["depth_param"]) for r in rows}):
    if param != "sp":
      out += [{**r, "depth_param": param} for r in base if r["variant"] == variant]
  return out


def fit_best_lr(curve: Sequence[Mapping[str, Any]], neighbours: int) -> tuple[float, float] | None:
  """(best lr, standard error of its log2) from the parabola in log2(lr) through the lowest
  seed-mean point and up to `neighbours` points on each side; None when the lowest point is
  at an end of the curve or the fit is not convex."""
  means = [p["mean"] for p in curve]
  i = int(np.argmin(means))
  if i == 0 or i == len(curve) - 1:
    return None
  pts = curve[max(0, i - neighbours) : i + neighbours + 1]
  x = np.log2([p["lr"] for p in pts])
  y = np.asarray([p["mean"] for p in pts])
  design = np.stack([x**2, x, np.ones_like(x)], axis=1)
  coef, *_ = np.linalg.lstsq(design, y, rcond=None)
  a, b, _ = coef
  if a <= 0:
    return None
  vertex = -b / (2 * a)
  dof = len(x) - 3
  if dof > 0:
    sigma2 = float(np.sum((y - design @ coef) ** 2)) / dof
    cov = sigma2 * np.linalg.inv(design.T @ design)
    grad = np.asarray([b / (2 * a**2), -1 / (2 * a), 0.0])
    se = float(math.sqrt(max(grad @ cov @ grad, 0.0)))
  else:  # three points: the parabola is exact; half the grid spacing as the resolution
    se = float(np.diff(x).mean()) / 2
  return float(2**vertex), se


def best_lr_table(rows: Sequence[Row]) -> list[Row]:
  """One row per (variant, parametrization, depth): the grid's best lr and the fitted one."""
  out = []
  keys = sorted({(r["variant"], r["depth_param"], int(r["num_layers"])) for r in rows})
  for variant, param, depth in keys:
    curve = lrs.lr_curve(
      [
        r
        for r in rows
        if (r["variant"], r["depth_param"], int(r["num_layers"])) == (variant, param, depth)
      ]
    )
    if not curve:
      continue
    best = min(curve, key=lambda p: p["mean"])
    row = {
      "variant": variant,
      "depth_param": param,
      "num_layers": depth,
      "lrs": len(curve),
      "grid_best_lr": best["lr"],
      "grid_best_loss": best["mean"],
    }
    for name, neighbours in FITS.items():
      fit = fit_best_lr(curve, neighbours) if len(curve) >= 3 else None
      row[f"best_lr_{name}"], row[f"best_lr_{name}_se_log2"] = fit or (None, None)
    out.append(row)
  return out


def depth_slopes(table: Sequence[Row]) -> list[Row]:
  """Weighted least-squares slope of log2(best lr) against log2(L) per (variant,
  parametrization, fit), with its standard error; needs fitted best lrs at >= 2 depths."""
  out = []
  groups = sorted({(t["variant"], t["depth_param"]) for t in table})
  for (variant, param), fit in ((g, f) for g in groups for f in FITS):
    key = f"best_lr_{fit}"
    pts = [
      t
      for t in table
      if (t["variant"], t["depth_param"]) == (variant, param) and t[key] is not None
    ]
    if len(pts) < 2:
      continue
    x = np.log2([t["num_layers"] for t in pts])
    y = np.log2([t[key] for t in pts])
    w = 1 / np.maximum(np.asarray([t[f"{key}_se_log2"] for t in pts]), 1e-3) ** 2
    xm = float(np.sum(w * x) / np.sum(w))
    sxx = float(np.sum(w * (x - xm) ** 2))
    slope = float(np.sum(w * (x - xm) * (y - np.sum(w * y) / np.sum(w))) / sxx)
    depths = " ".join(str(t["num_layers"]) for t in pts)
    out.append(
      {
        "variant": variant,
        "depth_param": param,
        "fit": fit,
        "depths": depths,
        "slope": slope,
        "slope_se": math.sqrt(1 / sxx),
      }
    )
  return out


def plot_transfer(rows: Sequence[Row], table: Sequence[Row], variant: str, out: str) -> str:
  """Loss against lr, a panel per parametrization, depth as colour, the fitted best lr a
  vertical tick on each curve; a last panel: best lr against depth per parametrization."""
  plt = pyplot()
  params = [p for p in PARAMS if any(r["depth_param"] == p for r in rows)]
  depths = sorted({int(r["num_layers"]) for r in rows})
  cmap = plt.get_cmap("viridis")
  color = {d: cmap(i / max(len(depths) - 1, 1)) for i, d in enumerate(depths)}
  fig, axes = plt.subplots(1, len(params) + 1, figsize=(4.3 * (len(params) + 1), 4.6))
  for ax, param in zip(axes, params, strict=False):
    ax.sharey(axes[0]) if ax is not axes[0] else None
    for depth in depths:
      curve = lrs.lr_curve(
        [r for r in rows if r["depth_param"] == param and int(r["num_layers"]) == depth]
      )
      if not curve:
        continue
      ax.plot([p["lr"] for p in curve], [p["mean"] for p in curve], "o-", color=color[depth],
              label=f"{depth} layers")  # fmt: skip
      fit = next((t for t in table if (t["depth_param"], t["num_layers"]) == (param, depth)), None)
      if fit and fit["best_lr_3pt"]:
        ax.axvline(fit["best_lr_3pt"], color=color[depth], ls=":", lw=1.2)
    ax.set(xscale="log", title=PARAM_LABELS[param], xlabel="peak lr (Adam)")
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("final eval loss (capped at the baseline)")
  axes[0].legend(fontsize="small", title="dotted: 3-point best lr", title_fontsize="small")
  ax = axes[-1]
  for i, param in enumerate(params):
    for fit, style in (("3pt", "o-"), ("5pt", "s--")):
      key = f"best_lr_{fit}"
      pts = [t for t in table if t["depth_param"] == param and t[key]]
      if not pts:
        continue
      ls = [t["num_layers"] * (1 + 0.04 * (i - 1)) for t in pts]  # side by side, not hidden
      best = [t[key] for t in pts]
      se = [t[f"{key}_se_log2"] for t in pts]
      err = [[b * (1 - 2**-e) for b, e in zip(best, se, strict=True)],
             [b * (2**e - 1) for b, e in zip(best, se, strict=True)]]  # fmt: skip
      ax.errorbar(ls, best, yerr=err, fmt=style, capsize=3, color=f"C{i}", mfc="white" if
                  fit == "5pt" else None, label=f"{PARAM_LABELS[param]}, {fit}")  # fmt: skip
  ax.set(xscale="log", yscale="log", xlabel="layers", ylabel="fitted best lr (+-1 s.e.)",
         title="best lr against depth")  # fmt: skip
  ax.set_xticks(depths, [str(d) for d in depths])
  ticks = sorted({float(r["opt.lr"]) for r in rows})
  ax.set_yticks(ticks, [lr_label(t) for t in ticks])
  ax.minorticks_off()
  ax.grid(alpha=0.3)
  ax.legend(fontsize="small")
  fig.suptitle(
    f"{variant_label(variant)}: does the best lr transfer across depth? "
    f"({lr_sweep_rows.setting_title(rows)})"
  )
  return save_figure(fig, out)


def describe(table: Sequence[Row], slopes: Sequence[Row]) -> list[str]:
  """Lines a reader can quote: each curve's best lr and each parametrization's slope."""
  lines = []
  for t in table:
    best = ", ".join(
      f"{fit} {lr_label(t[f'best_lr_{fit}'])} (x/ {2 ** t[f'best_lr_{fit}_se_log2']:.2f})"
      for fit in FITS
      if t[f"best_lr_{fit}"]
    )
    best = f"fitted {best}" if best else "not bracketed by the grid"
    lines.append(
      f"{t['variant']} {t['depth_param']} L{t['num_layers']}: {t['lrs']} lrs, grid best "
      f"{lr_label(t['grid_best_lr'])} ({t['grid_best_loss']:.3f}), {best}"
    )
  for s in slopes:
    lines.append(
      f"{s['variant']} {s['depth_param']} ({s['fit']}): d log2(best lr) / d log2(L) = "
      f"{s['slope']:+.3f} +- {s['slope_se']:.3f} over L = {s['depths']}"
    )
  return lines
