"""Slopes whose standard errors hold for autocorrelated curves (resnorm_jax/analysis/stats.py)."""

import math
import random

import numpy as np
import pytest

from resnorm_jax.analysis import stats


def _ar1(n: int, rho: float, seed: int) -> list[float]:
  rng = random.Random(seed)
  e, out = 0.0, []
  for _ in range(n):
    e = rho * e + rng.gauss(0.0, 1.0)
    out.append(e)
  return out


def test_newey_west_matches_the_sandwich_formula():
  """The HAC variance of the slope, written out with numpy: (X'X)^-1 S (X'X)^-1 with S the
  Bartlett-weighted sum of lagged score products, times n / (n - 2)."""
  xs = [i / 10 for i in range(25)]
  ys = [0.3 * x + e for x, e in zip(xs, _ar1(25, 0.5, 1), strict=True)]
  lags = 3
  x = np.column_stack([np.ones(25), xs])
  beta = np.linalg.lstsq(x, ys, rcond=None)[0]
  u = x * (np.asarray(ys) - x @ beta)[:, None]
  s = u.T @ u
  for lag in range(1, lags + 1):
    g = u[lag:].T @ u[:-lag]
    s += (1 - lag / (lags + 1)) * (g + g.T)
  bread = np.linalg.inv(x.T @ x)
  nw = math.sqrt((bread @ s @ bread)[1, 1] * 25 / 23)
  slope, se = stats.robust_slope_with_se(xs, ys, lags=lags)
  assert slope == np.float64(beta[1]).item() or abs(slope - beta[1]) < 1e-12
  assert se >= nw - 1e-12  # the robust s.e. is the largest of its three
  ols = stats.slope_with_se(xs, ys)[1]
  rho = stats.lag1_autocorrelation(list(np.asarray(ys) - x @ beta))
  assert math.isclose(se, max(nw, ols, ols * math.sqrt((1 + rho) / (1 - rho))), rel_tol=1e-12)


def test_ols_calls_autocorrelated_flat_curves_trends_the_robust_se_does_not():
  """30 evals of a flat plateau with AR(1) noise (rho 0.6): at 2 standard errors OLS calls
  a third of them rising or falling (137 of 400), the robust s.e. under half as many (60: the
  lag-1 estimate from 30 residuals is biased low, so not yet the nominal 5%)."""
  xs = [i / 20 for i in range(30)]
  ols_calls = robust_calls = 0
  for seed in range(400):
    ys = _ar1(30, 0.6, seed)
    ols_calls += stats.trend(*stats.slope_with_se(xs, ys)) != "flat"
    robust_calls += stats.trend(*stats.robust_slope_with_se(xs, ys)) != "flat"
  assert ols_calls > 100  # OLS: about a third of flat curves called a trend
  assert robust_calls < 0.5 * ols_calls


def test_a_real_trend_is_still_found_and_short_series_are_none():
  xs = [i / 20 for i in range(30)]
  ys = [-2.0 * x + 0.01 * e for x, e in zip(xs, _ar1(30, 0.5, 3), strict=True)]
  assert stats.trend(*stats.robust_slope_with_se(xs, ys)) == "falling"
  assert stats.robust_slope_with_se([1, 2], [1, 2]) is None
  assert stats.lag1_autocorrelation([1.0, 1.0, 1.0]) is None
  assert stats.newey_west_lags(30) == 3 and stats.newey_west_lags(2) == 1


def test_t_quantiles_are_the_t_distribution_s():
  """Each tabled 0.975 quantile integrates the t density to 0.975 (Simpson's rule)."""
  for df in (1, 2, 4, 8, 30):
    q = stats.t975(df)
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    xs = np.linspace(0, q, 20001)
    ys = c * (1 + xs**2 / df) ** (-(df + 1) / 2)
    area = 0.5 + (xs[1] - xs[0]) / 3 * (
      ys[0] + ys[-1] + 4 * ys[1:-1:2].sum() + 2 * ys[2:-1:2].sum()
    )
    assert abs(area - 0.975) < 3e-4, (df, area)


def test_mean_difference_is_welch_s():
  a, b = [1.60, 1.65, 1.62, 1.66, 1.61], [1.71, 1.73, 1.76, 1.70, 1.74]
  d = stats.mean_difference(a, b)
  assert math.isclose(d["difference"], np.mean(a) - np.mean(b))
  se = math.sqrt(np.var(a, ddof=1) / 5 + np.var(b, ddof=1) / 5)
  assert math.isclose(d["se"], se)
  assert d["lo"] < d["difference"] < d["hi"] < 0  # clearly below
  assert math.isclose(d["hi"] - d["difference"], stats.t975(d["df"]) * se)


def test_fisher_exact_against_hand_computed_tables():
  # 4 of 4 against 0 of 12: the observed table is the only one as unlikely, 1 / C(16, 4)
  assert stats.fisher_exact(4, 4, 0, 12) == pytest.approx(1 / 1820)
  # 3 of 3 against 0 of 3: both extreme tables, 1/20 each
  assert stats.fisher_exact(3, 3, 0, 3) == pytest.approx(0.1)
  # the same proportions: nothing to tell apart
  assert stats.fisher_exact(2, 4, 6, 12) == pytest.approx(1.0)
  # scipy.stats.fisher_exact([[1, 3], [9, 3]]) gives 0.11813186813186813
  assert stats.fisher_exact(1, 4, 9, 12) == pytest.approx(0.11813186813186813)
  # symmetric in the two groups
  assert stats.fisher_exact(1, 4, 9, 12) == pytest.approx(stats.fisher_exact(9, 12, 1, 4))
  with pytest.raises(ValueError, match="5/4"):
    stats.fisher_exact(5, 4, 0, 12)
