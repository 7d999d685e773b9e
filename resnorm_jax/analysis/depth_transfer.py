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
    neighbours (exact). Its vertex lies within half a grid step of the grid's best lr (the
    middle point is the lowest), so best_lr_3pt_se_log2 holds that half step (0.5 in log2):
    a resolution, assigned, not an estimated error; it weighs the 3-point slope (equal
    weights on a uniform grid). The figure draws it as the bracket it is
    (depth_transfer_figure.py).
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

from resnorm_jax.analysis import lr_sensitivity as lrs
from resnorm_jax.analysis import lr_sweep_rows
from resnorm_jax.analysis.style import lr_label
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files

Row = dict[str, Any]
PARAMS = ("sp", "depth_mup", "completep")
FITS = {"3pt": 1, "5pt": 2}  # fit name -> points on each side of the lowest it may use
BEST_COLUMNS = (
  "variant", "depth_param", "num_layers", "lrs", "grid_best_lr", "grid_best_loss",
  "best_lr_3pt", "best_lr_3pt_se_log2", "best_lr_5pt", "best_lr_5pt_se_log2",
)  # fmt: skip
SLOPE_COLUMNS = ("variant", "depth_param", "fit", "depths", "slope", "slope_se")


def depth_param(run_dir: str) -> str:
  """The run's depth parametrization as its config.json records it ("sp" if absent)."""
  config = read_json(os.path.join(run_dir, record_files.CONFIG)) or {}
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
  parametrization, fit), with its standard error (1/se^2 weights: it trusts each best lr's
  own error); needs fitted best lrs at >= 2 depths. Beside each, with 3 depths or more, the
  ordinary least-squares slope of the same points with its residual-scaled standard error
  (fit '<fit>-ols')."""
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
    ols = ols_slope({t["num_layers"]: t[key] for t in pts})
    if ols:  # the same best lrs, unweighted, with the residual-scaled standard error
      out.append({**out[-1], "fit": f"{fit}-ols", "slope": ols[0], "slope_se": ols[1]})
  return out


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


def ols_slope(best: Mapping[int, float]) -> tuple[float, float] | None:
  """Ordinary least-squares slope of log2(best lr) on log2(L) and its residual-scaled
  standard error; None with fewer than 3 depths."""
  from resnorm_jax.analysis.stats import slope_with_se  # (no JAX)

  depths = sorted(best)
  return slope_with_se([math.log2(d) for d in depths], [math.log2(best[d]) for d in depths])
