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


# The CompleteP-minus-sp contrast. The weighted fit above trusts each best lr's own standard
# error; with 4 depths those are small where a parabola happens to fit well, so the contrast is
# stated three more ways: an ordinary least-squares slope with its residual-scaled standard
# error, a bootstrap over seeds, and the difference of the two parametrizations' slopes.
# Every curve here is seed 0's (the grid's), so where seeds were run does not move an argmin;
# the bootstrap draws, per (depth, lr) cell, one of the seeds run there (cells with only seed
# 0 stay fixed: the interval holds the seed noise that was measured, no more).
CONTRAST = ("completep", "sp")
CONTRAST_COLUMNS = (
  "variant", "quantity", "completep", "sp", "difference", "difference_se", "ci_lo", "ci_hi",
  "interval", "boot_failed", "replicates", "depths", "seeds",
)  # fmt: skip
# Fewer seeds than this and an interval over seeds is Student's t on the per-seed differences,
# not a bootstrap (a bootstrap of 2 or 3 values has a handful of distinct draws).
MIN_BOOTSTRAP_SEEDS = 4


def _cells(rows: Sequence[Row], variant: str, param: str) -> dict[tuple[int, float], dict]:
  """(depth, lr) -> {seed: capped loss} of one curve family."""
  out: dict[tuple[int, float], dict] = {}
  for r in rows:
    if (r["variant"], r["depth_param"]) == (variant, param) and r.get("capped_loss") is not None:
      out.setdefault((int(r["num_layers"]), float(r["opt.lr"])), {})[int(r["seed"])] = float(
        r["capped_loss"]
      )
  return out


def _best_lrs(cells: Mapping[tuple[int, float], float], neighbours: int = 2) -> dict[int, float]:
  """depth -> the fitted best lr of the curve of one loss per (depth, lr) (fit_best_lr)."""
  out = {}
  for depth in sorted({d for d, _ in cells}):
    curve = [{"lr": lr, "mean": v} for (d, lr), v in sorted(cells.items()) if d == depth]
    fit = fit_best_lr(curve, neighbours) if len(curve) >= 3 else None
    if fit:
      out[depth] = fit[0]
  return out


def ols_slope(best: Mapping[int, float]) -> tuple[float, float] | None:
  """Ordinary least-squares slope of log2(best lr) on log2(L) and its residual-scaled
  standard error; None with fewer than 3 depths."""
  from resnorm_jax.analysis.stats import slope_with_se  # (no JAX)

  depths = sorted(best)
  return slope_with_se([math.log2(d) for d in depths], [math.log2(best[d]) for d in depths])


def slope_contrast(
  rows: Sequence[Row], variant: str = "prenorm", replicates: int = 2000, seed: int = 0
) -> Row | None:
  """CompleteP's and sp's OLS slopes on seed 0's curves, their difference with its standard
  error, and a percentile 95% bootstrap interval of the difference over seeds; the base depth's
  draw is shared (the same runs stand for both)."""
  fams = {p: _cells(rows, variant, p) for p in CONTRAST}
  if any(not f for f in fams.values()):
    return None
  seed0 = {p: {k: v[0] for k, v in f.items() if 0 in v} for p, f in fams.items()}
  fits = {p: ols_slope(_best_lrs(seed0[p])) for p in CONTRAST}
  if any(f is None for f in fits.values()):
    return None
  depths = sorted(set(_best_lrs(seed0["completep"])) & set(_best_lrs(seed0["sp"])))
  rng = np.random.default_rng(seed)
  diffs, failed = [], 0
  for _ in range(replicates):
    draw: dict[tuple, float] = {}
    slopes = {}
    for p, f in fams.items():
      cells = {}
      for key, by_seed in f.items():
        shared = ("base", *key) if key[0] == min(d for d, _ in f) else (p, *key)
        if shared not in draw:
          draw[shared] = by_seed[int(rng.choice(sorted(by_seed)))]
        cells[key] = draw[shared]
      fit = ols_slope(_best_lrs(cells))
      slopes[p] = fit[0] if fit else None
    if None in slopes.values():
      failed += 1
      continue
    diffs.append(slopes["completep"] - slopes["sp"])
  lo, hi = np.percentile(diffs, [2.5, 97.5]) if diffs else (math.nan, math.nan)
  (cs, cse), (ss, sse) = fits["completep"], fits["sp"]
  seeded = sorted({s for f in fams.values() for v in f.values() for s in v})
  return {
    "variant": variant,
    "quantity": "ols slope of log2(best lr) on log2(L), seed-0 curves, 5-point vertex",
    "completep": cs,
    "sp": ss,
    "difference": cs - ss,
    "difference_se": math.sqrt(cse**2 + sse**2),
    "ci_lo": float(lo),
    "ci_hi": float(hi),
    "interval": "95% bootstrap over each cell's seeds (a cell of seed 0 alone fixed)",
    "boot_failed": failed,
    "replicates": replicates,
    "depths": " ".join(map(str, depths)),
    "seeds": " ".join(map(str, seeded)),
  }


def seeded_contrast(
  rows: Sequence[Row], depth: int, variant: str = "prenorm", replicates: int = 2000, seed: int = 0
) -> list[Row]:
  """At one depth, on the lrs where both parametrizations ran 2 or more seeds, over the seeds
  all of those ran: the best lr (3-point vertex of the seed-mean curve, in log2) and the best
  seed-mean loss of each, their differences CompleteP minus sp, and percentile 95% bootstrap
  intervals (seeds resampled with replacement within each cell); with fewer than
  MIN_BOOTSTRAP_SEEDS seeds, each seed's own best lr and best loss instead, their differences
  paired by seed, and a t interval on them (seeded_t_contrast). [] where fewer than 3 such
  lrs."""
  fams = {p: {k[1]: v for k, v in _cells(rows, variant, p).items() if k[0] == depth}
          for p in CONTRAST}  # fmt: skip
  # the lrs both ran on 2 or more seeds, and the seeds every one of them ran: seeds at every
  # lr of the curve or at none, so where seeds were run does not move the argmin
  lrs = sorted(
    lr for lr in set(fams["completep"]) & set(fams["sp"])
    if all(len(f[lr]) >= 2 for f in fams.values())
  )  # fmt: skip
  common = [set(f[lr]) for lr in lrs for f in fams.values()]
  seeds = sorted(set.intersection(*common)) if common else []
  fams = {p: {lr: {s: f[lr][s] for s in seeds} for lr in lrs} for p, f in fams.items()}
  if len(lrs) < 3 or len(seeds) < 2:
    return []
  if len(seeds) < MIN_BOOTSTRAP_SEEDS:
    return seeded_t_contrast(fams, lrs, seeds, depth, variant)

  def stats_of(f: Mapping[float, Mapping[int, float]]) -> tuple[float | None, float]:
    curve = [{"lr": lr, "mean": float(np.mean(list(f[lr].values())))} for lr in lrs]
    fit = fit_best_lr(curve, 1)
    return (math.log2(fit[0]) if fit else None), min(p["mean"] for p in curve)

  point = {p: stats_of(f) for p, f in fams.items()}
  rng = np.random.default_rng(seed)
  boot: dict[str, list[float]] = {"lr": [], "loss": []}
  failed = 0
  for _ in range(replicates):
    res = {}
    for p, f in fams.items():
      res[p] = stats_of(
        {lr: dict(enumerate(rng.choice(list(f[lr].values()), len(f[lr])))) for lr in lrs}
      )
    if res["completep"][0] is None or res["sp"][0] is None:
      failed += 1
    else:
      boot["lr"].append(res["completep"][0] - res["sp"][0])
    boot["loss"].append(res["completep"][1] - res["sp"][1])
  out = []
  for i, (key, quantity) in enumerate(
    (("lr", f"log2 best lr at {depth} layers, seed-mean 3-point vertex"),
     ("loss", f"best loss at {depth} layers, of the seed-mean curve"))
  ):  # fmt: skip
    c, s = point["completep"][i], point["sp"][i]
    lo, hi = np.percentile(boot[key], [2.5, 97.5]) if boot[key] else (math.nan, math.nan)
    out.append({
      "variant": variant, "quantity": quantity, "completep": c, "sp": s,
      "difference": (c - s) if c is not None and s is not None else None, "difference_se": None,
      "ci_lo": float(lo), "ci_hi": float(hi),
      "interval": f"95% seed bootstrap ({len(seeds)} seeds)",
      "boot_failed": failed if key == "lr" else 0,
      "replicates": replicates, "depths": str(depth), "seeds": " ".join(map(str, seeds)),
    })  # fmt: skip
  return out


def seeded_t_contrast(
  fams: Mapping[str, Mapping[float, Mapping[int, float]]],
  lrs: Sequence[float],
  seeds: Sequence[int],
  depth: int,
  variant: str,
) -> list[Row]:
  """seeded_contrast's rows on a few seeds: each seed's curve over `lrs` gives its best lr
  (3-point vertex, log2) and best loss under each parametrization; the rows hold their means
  over the seeds, the mean of the per-seed differences CompleteP minus sp, its standard error
  and a 95% Student's t interval (n - 1 degrees of freedom). A seed whose curve has no vertex
  is left out of the lr row (`boot_failed` counts them)."""
  from resnorm_jax.analysis.stats import t975  # (no JAX)

  def per_seed(f: Mapping[float, Mapping[int, float]], s: int) -> tuple[float | None, float]:
    curve = [{"lr": lr, "mean": f[lr][s]} for lr in lrs]
    fit = fit_best_lr(curve, 1)
    return (math.log2(fit[0]) if fit else None), min(p["mean"] for p in curve)

  values = {p: {s: per_seed(f, s) for s in seeds} for p, f in fams.items()}
  out = []
  for i, quantity in enumerate(
    (f"log2 best lr at {depth} layers, each seed's 3-point vertex, mean over seeds",
     f"best loss at {depth} layers, each seed's, mean over seeds")
  ):  # fmt: skip
    used = [s for s in seeds if all(values[p][s][i] is not None for p in CONTRAST)]
    c = [values["completep"][s][i] for s in used]
    b = [values["sp"][s][i] for s in used]
    diffs = [x - y for x, y in zip(c, b, strict=True)]
    row = {
      "variant": variant, "quantity": quantity, "completep": None, "sp": None,
      "difference": None, "difference_se": None, "ci_lo": math.nan, "ci_hi": math.nan,
      "interval": f"95% t over {len(used)} seeds, paired by seed",
      "boot_failed": len(seeds) - len(used), "replicates": 0, "depths": str(depth),
      "seeds": " ".join(map(str, used)),
    }  # fmt: skip
    if len(diffs) >= 2:
      d, se = float(np.mean(diffs)), float(np.std(diffs, ddof=1) / math.sqrt(len(diffs)))
      half = t975(len(diffs) - 1) * se
      row.update(
        completep=float(np.mean(c)), sp=float(np.mean(b)), difference=d, difference_se=se,
        ci_lo=d - half, ci_hi=d + half,
      )  # fmt: skip
    out.append(row)
  return out
