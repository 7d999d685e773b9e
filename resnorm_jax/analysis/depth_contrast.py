"""The CompleteP-minus-sp contrast of depth transfer (depth_transfer.py's best lrs): the
difference of the two parametrizations' slopes of log2(best lr) on log2(L), and at one depth
their best lr and best loss over seeds, each with its interval (contrast.csv). No JAX here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from resnorm_jax.analysis.depth_transfer import Row, fit_best_lr, ols_slope

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
