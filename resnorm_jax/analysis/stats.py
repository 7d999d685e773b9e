"""The statistics the result tables state: the exact interval of a proportion (k of n seeds
escaped), the Kaplan-Meier survival curve of event times with Greenwood's interval, and a
least-squares slope with its standard error and the trend it supports. Pure Python, no JAX.

A loss curve's evals are not independent draws: the residuals about a late-curve line are
autocorrelated (lag-1 up to 0.58 on the committed runs), so the ordinary least-squares
standard error understates the slope's uncertainty and calls too many flat curves rising or
falling. Every slope that is classified uses `robust_slope_with_se`: the largest of the OLS,
the AR(1)-inflated OLS and the Newey-West (HAC, Bartlett kernel) standard errors. With ~30
evals Newey-West's kernel under-corrects a lag-1 autocorrelation near 0.5 (it moved 1 of the
11 committed plateau runs); the AR(1) factor sqrt((1 + rho) / (1 - rho)) does not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

CONFIDENCE = 0.95


def slope_with_se(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
  """Least-squares slope of ys on xs and its standard error (residual variance over n - 2
  degrees of freedom); None with fewer than 3 points or no spread in xs."""
  n = len(xs)
  if n < 3:
    return None
  mx, my = statistics.fmean(xs), statistics.fmean(ys)
  sxx = sum((x - mx) ** 2 for x in xs)
  if sxx == 0:
    return None
  slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
  resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
  return slope, math.sqrt(resid / (n - 2) / sxx)


def lag1_autocorrelation(values: Sequence[float]) -> float | None:
  """The lag-1 autocorrelation of a series about its mean; None with fewer than 3 values or
  no variance."""
  n = len(values)
  if n < 3:
    return None
  m = statistics.fmean(values)
  dev = [v - m for v in values]
  var = sum(d * d for d in dev)
  if var == 0:
    return None
  return sum(a * b for a, b in zip(dev, dev[1:], strict=False)) / var


def newey_west_lags(n: int) -> int:
  """The usual automatic bandwidth, floor(4 (n / 100)^(2/9)) (Newey and West 1994), at least 1."""
  return max(1, int(4 * (n / 100) ** (2 / 9)))


def robust_slope_with_se(
  xs: Sequence[float], ys: Sequence[float], lags: int | None = None
) -> tuple[float, float] | None:
  """Least-squares slope of ys on xs and a standard error that holds for autocorrelated
  residuals: the largest of the OLS one (slope_with_se), the OLS one times
  sqrt((1 + rho) / (1 - rho)) for a positive lag-1 autocorrelation rho of the residuals (the
  AR(1) variance inflation), and the Newey-West one with a Bartlett kernel over `lags` lags
  (newey_west_lags(n) when None), small-sample scaled by n / (n - 2). None where
  slope_with_se is None."""
  fit = slope_with_se(xs, ys)
  if fit is None:
    return None
  slope, ols_se = fit
  n = len(xs)
  mx, my = statistics.fmean(xs), statistics.fmean(ys)
  dx = [x - mx for x in xs]
  sxx = sum(d * d for d in dx)
  resid = [y - my - slope * dxi for dxi, y in zip(dx, ys, strict=True)]
  u = [dxi * e for dxi, e in zip(dx, resid, strict=True)]  # the slope's score terms
  lags = newey_west_lags(n) if lags is None else lags
  meat = sum(v * v for v in u)
  for lag in range(1, min(lags, n - 1) + 1):
    weight = 1 - lag / (lags + 1)
    meat += 2 * weight * sum(u[t] * u[t - lag] for t in range(lag, n))
  nw_se = math.sqrt(max(meat, 0.0) * n / (n - 2)) / sxx
  rho = lag1_autocorrelation(resid) or 0.0
  rho = min(rho, 0.99)
  ar1_se = ols_se * math.sqrt((1 + rho) / (1 - rho)) if rho > 0 else ols_se
  return slope, max(ols_se, ar1_se, nw_se)


def trend(slope: float | None, se: float | None, k: float = 2.0) -> str | None:
  """'falling' / 'rising' when the slope is more than k standard errors from 0, else 'flat'."""
  if slope is None or se is None:
    return None
  if slope < -k * se:
    return "falling"
  if slope > k * se:
    return "rising"
  return "flat"


def _binom_cdf(k: int, n: int, p: float) -> float:
  """P(X <= k) for X ~ Binomial(n, p)."""
  return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _bisect(f, lo: float = 0.0, hi: float = 1.0, iters: int = 80) -> float:
  """The root of a decreasing-then-crossing f on [lo, hi] (f(lo) > 0 > f(hi))."""
  for _ in range(iters):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
  return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
  """The exact (Clopper-Pearson) interval of a binomial proportion k/n: the p at which
  P(X >= k) and P(X <= k) each reach (1 - confidence) / 2."""
  if not 0 <= k <= n or n <= 0:
    raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
  tail = (1 - confidence) / 2
  lo = 0.0 if k == 0 else _bisect(lambda p: tail - (1 - _binom_cdf(k - 1, n, p)))
  hi = 1.0 if k == n else _bisect(lambda p: _binom_cdf(k, n, p) - tail)
  return lo, hi


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
  """Fisher's exact test of k1 of n1 against k2 of n2 (two-sided): the probability, given the
  margins, of a table at most as likely as the one observed (hypergeometric, with a relative
  tolerance of 1e-7 for ties)."""
  if not (0 <= k1 <= n1 and 0 <= k2 <= n2 and n1 > 0 and n2 > 0):
    raise ValueError(f"need 0 <= k <= n and n > 0, got {k1}/{n1}, {k2}/{n2}")
  total, hits = n1 + n2, k1 + k2

  def prob(x: int) -> float:
    return math.comb(hits, x) * math.comb(total - hits, n1 - x) / math.comb(total, n1)

  seen = prob(k1)
  xs = range(max(0, n1 - (total - hits)), min(hits, n1) + 1)
  return min(1.0, sum(p for p in map(prob, xs) if p <= seen * (1 + 1e-7)))


def kaplan_meier(
  times: Sequence[int], events: Sequence[bool], confidence: float = CONFIDENCE
) -> list[dict[str, float]]:
  """The Kaplan-Meier estimate of P(not escaped by t) from event times (events True) and
  censoring times (False): one row per distinct event time with the survival S, the number
  at risk and the interval from Greenwood's variance on the log(-log S) scale (S stays in
  [0, 1]; at S = 0 or 1 the interval is the point)."""
  z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
  pairs = sorted(zip(times, events, strict=True))
  at_risk, s, greenwood, out = len(pairs), 1.0, 0.0, []
  i = 0
  while i < len(pairs):
    t = pairs[i][0]
    same = [e for tt, e in pairs[i:] if tt == t]
    d = sum(same)
    if d:
      s *= 1 - d / at_risk
      greenwood += d / (at_risk * (at_risk - d)) if at_risk > d else math.inf
      lo = hi = s
      if 0 < s < 1 and math.isfinite(greenwood):
        half = z * math.sqrt(greenwood) / abs(math.log(s))
        lo, hi = s ** math.exp(half), s ** math.exp(-half)
      out.append({"step": t, "at_risk": at_risk, "escaped": d, "survival": s, "lo": lo, "hi": hi})
    at_risk -= len(same)
    i += len(same)
  return out


def survival_at(curve: Sequence[Mapping[str, float]], step: int) -> Mapping[str, float]:
  """The Kaplan-Meier row in force at `step` (S = 1 before the first event)."""
  row = {"survival": 1.0, "lo": 1.0, "hi": 1.0}
  for r in curve:
    if r["step"] <= step:
      row = r
  return row


# Student's t 0.975 quantiles by degrees of freedom (1-30); above 30 the normal's 1.96 is
# within 2% of them. tests/test_stats.py checks them against the t density's integral.
T975 = (
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
  2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
  2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: float) -> float:
  """The 0.975 quantile of Student's t at `df` degrees of freedom (rounded down: wider)."""
  k = max(1, int(df))
  return T975[k - 1] if k <= len(T975) else 1.96


def mean_difference(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
  """mean(a) - mean(b) over independent seeds, its Welch standard error and 95% interval
  (Welch-Satterthwaite degrees of freedom); needs 2 or more values in each."""
  if len(a) < 2 or len(b) < 2:
    raise ValueError(f"need 2 or more seeds on each side, got {len(a)} and {len(b)}")
  va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
  diff = statistics.fmean(a) - statistics.fmean(b)
  se = math.sqrt(va + vb)
  df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else math.inf
  half = t975(df) * se
  return {"difference": diff, "se": se, "df": df, "lo": diff - half, "hi": diff + half}
