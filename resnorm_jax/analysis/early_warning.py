"""Tell a doomed run early: from the metrics a run logged up to step k, predict whether it will
leave the no-context plateau and stay off it to the end. No JAX here (numpy only).

A run's label is 1 when its escape lasted to its end: for a survival run (docs/survival/), an
escape that lasts to the end (docs/survival's kept); for a loss-vs-lr run, the end-of-run
verdict `trained` (its eval 0.1 nats below the held-out no-context loss at the last step).
Its features at step k are read from metrics.jsonl (logged every 10 steps), for each
signal (SIGNALS):
  level  the mean of the last 3 logged values at or before k (the loss as a gap to the
         corpus's own unigram entropy, so a corpus with another plateau reads the same),
  slope  the least-squares slope over the logged values in [k/2, k], per 1,000 steps,
  ratio  log(level / the value at step 10) (the loss: the gap's change since step 10).
Two kinds of predictor, both inspectable:
  one signal: a threshold on one feature (its direction and threshold fitted on the training
    folds: the AUC of the feature's ranking is what is reported);
  all signals: an L2-regularised logistic regression on the standardised features the runs
    share (fitted by Newton's method).
Evaluation holds out whole cells (variant, depth, lr, corpus): a test cell never trains the
model, so what is measured is how the rule carries to a configuration it has not seen. AUC
intervals are percentile intervals of a bootstrap over cells (runs of a cell move together);
the AUC within cells (the mean over cells of the AUC among one cell's seeds) has a bootstrap
over runs within each cell (the cells kept, their seeds redrawn). Both seeded: a rebuild
writes the same bounds.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from resnorm_jax.runs import record_files
from resnorm_jax.runs.stop_features import (
  CORE,
  KINDS,
  RULE_VERSION,
  SIGNALS,
)

Row = dict[str, Any]


def read_metrics(run_dir: str) -> list[dict[str, float]]:
  """The logged rows of a run's metrics.jsonl with a train loss (eval-only rows dropped)."""
  path = os.path.join(run_dir, record_files.METRICS)
  out = []
  with open(path) as f:
    for line in f:
      line = line.strip()
      if line:
        row = json.loads(line)
        if "train/loss" in row:
          out.append(row)
  return out


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
  """The probability that a random positive scores above a random negative (ties count
  half): the Mann-Whitney statistic. NaN when one class is absent."""
  s, y = np.asarray(scores, float), np.asarray(labels, int)
  pos, neg = s[y == 1], s[y == 0]
  if pos.size == 0 or neg.size == 0:
    return math.nan
  greater = (pos[:, None] > neg[None, :]).sum()
  ties = (pos[:, None] == neg[None, :]).sum()
  return float((greater + 0.5 * ties) / (pos.size * neg.size))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50) -> np.ndarray:
  """Weights (bias last) of an L2-regularised logistic regression by Newton's method; the
  bias is not penalised."""
  n, d = x.shape
  xb = np.hstack([x, np.ones((n, 1))])
  w = np.zeros(d + 1)
  penalty = np.full(d + 1, l2)
  penalty[-1] = 0.0
  for _ in range(iters):
    p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
    grad = xb.T @ (p - y) + penalty * w
    hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(penalty + 1e-9)
    step = np.linalg.solve(hess, grad)
    w -= step
    if np.max(np.abs(step)) < 1e-8:
      break
  return w


class Standardised:
  """A logistic regression on standardised features (training-fold means and deviations;
  missing values at the mean)."""

  def __init__(self, x: np.ndarray, y: np.ndarray, l2: float = 1.0):
    self.mean = np.nanmean(x, axis=0)
    self.std = np.nanstd(x, axis=0)
    self.std[~(self.std > 0)] = 1.0
    self.w = fit_logistic(self._z(x), y, l2)

  def _z(self, x: np.ndarray) -> np.ndarray:
    z = (x - self.mean) / self.std
    return np.where(np.isfinite(z), z, 0.0)

  def score(self, x: np.ndarray) -> np.ndarray:
    return np.hstack([self._z(x), np.ones((len(x), 1))]) @ self.w


def grouped_scores(
  x: np.ndarray, y: np.ndarray, groups: Sequence[str], fit: Callable, folds: int | None = None
) -> np.ndarray:
  """Held-out scores: each group's runs scored by a model fitted on the other groups (every
  group its own fold, or `folds` folds of whole groups)."""
  names = sorted(set(groups))
  if folds and folds < len(names):
    fold_of = {g: i % folds for i, g in enumerate(names)}
  else:
    fold_of = {g: i for i, g in enumerate(names)}
  g = np.asarray([fold_of[x] for x in groups])
  out = np.full(len(y), np.nan)
  for f in sorted(set(g)):
    test = g == f
    train = ~test
    if len(set(y[train])) < 2:
      continue
    out[test] = fit(x[train], y[train]).score(x[test])
  return out


class OneSignal:
  """A threshold on one signal: of its features (level, slope, ratio) the one, and the
  direction, that rank the training runs best; the held-out AUC of that oriented feature is
  what is reported, so the choice of feature is made without the test cells."""

  def __init__(self, x: np.ndarray, y: np.ndarray):
    best = (-1.0, 0, 1.0)
    for j in range(x.shape[1]):
      col = x[:, j]
      ok = np.isfinite(col)
      a = auc(col[ok], y[ok]) if ok.sum() >= 2 else math.nan
      if math.isfinite(a) and max(a, 1 - a) > best[0]:
        best = (max(a, 1 - a), j, 1.0 if a >= 0.5 else -1.0)
    _, self.column, self.sign = best
    col = x[:, self.column]
    self.fill = float(np.nanmedian(col)) if np.isfinite(col).any() else 0.0

  def score(self, x: np.ndarray) -> np.ndarray:
    col = x[:, self.column]
    return self.sign * np.where(np.isfinite(col), col, self.fill)


def within_cell_auc(scores: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> float:
  """The mean over cells with both outcomes of the AUC among that cell's runs: how well the
  rule tells apart seeds of one configuration (NaN when no cell has both)."""
  vals = []
  g = np.asarray(groups)
  for name in sorted(set(groups)):
    m = g == name
    a = auc(scores[m], y[m])
    if math.isfinite(a):
      vals.append(a)
  return float(np.mean(vals)) if vals else math.nan


def cluster_bootstrap_auc(
  scores: np.ndarray, y: np.ndarray, groups: Sequence[str], replicates: int = 1000, seed: int = 0
) -> tuple[float, float]:
  """Percentile 95% interval of the AUC over resampled groups (with replacement)."""
  names = sorted(set(groups))
  idx = {g: np.flatnonzero(np.asarray(groups) == g) for g in names}
  rng = np.random.default_rng(seed)
  vals = []
  for _ in range(replicates):
    pick = np.concatenate([idx[names[i]] for i in rng.integers(0, len(names), len(names))])
    a = auc(scores[pick], y[pick])
    if math.isfinite(a):
      vals.append(a)
  if not vals:
    return math.nan, math.nan
  lo, hi = np.percentile(vals, [2.5, 97.5])
  return float(lo), float(hi)


def within_cell_bootstrap(
  scores: np.ndarray, y: np.ndarray, groups: Sequence[str], replicates: int = 1000, seed: int = 0
) -> tuple[float, float]:
  """Percentile 95% interval of within_cell_auc over runs resampled with replacement inside
  each cell (the cells fixed: the question is which seeds of a configuration escape, and the
  seeds are what was sampled). A replicate where no cell has both outcomes is left out."""
  g = np.asarray(groups)
  # a cell with one outcome has no AUC in any resample: only the cells with both count
  idx = [np.flatnonzero(g == name) for name in sorted(set(groups))]
  idx = [i for i in idx if 0 < y[i].sum() < i.size]
  rng = np.random.default_rng(seed)
  vals = []
  for _ in range(replicates if idx else 0):
    cells = [auc(scores[p], y[p]) for p in (rng.choice(i, size=i.size) for i in idx)]
    cells = [a for a in cells if math.isfinite(a)]
    if cells:
      vals.append(float(np.mean(cells)))
  if not vals:
    return math.nan, math.nan
  lo, hi = np.percentile(vals, [2.5, 97.5])
  return float(lo), float(hi)


def matrix(
  runs: Sequence[Row], k: int, columns: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, list[str], list[Row]]:
  """(features, labels, groups, the runs kept): the runs that logged to step k."""
  xs, ys, gs, kept = [], [], [], []
  for r in runs:
    f = r["features"].get(k)
    if f is None:
      continue
    xs.append([f[c] for c in columns])
    ys.append(r["label"])
    gs.append(r["group"])
    kept.append(r)
  return np.asarray(xs, float).reshape(-1, len(columns)), np.asarray(ys, int), gs, kept


def evaluate(runs: Sequence[Row], k: int, replicates: int = 1000, folds: int = 10) -> list[Row]:
  """Per predictor (each signal alone, its feature chosen on the training folds; all core
  signals together): the AUC of the held-out scores (whole cells held out) with its
  cluster-bootstrap interval, and the mean AUC within cells with its within-cell bootstrap
  interval, on the runs that logged to k."""
  out = []
  core = [f"{s}:{kind}" for s in CORE for kind in KINDS]
  for name in [*SIGNALS, "all core signals"]:
    together = name == "all core signals"
    cols = core if together else [f"{name}:{kind}" for kind in KINDS]
    x, y, g, _ = matrix(runs, k, cols)
    if not together:  # the runs that logged this signal
      ok = np.isfinite(x).any(axis=1)
      x, y, g = x[ok], y[ok], [gg for gg, o in zip(g, ok, strict=True) if o]
    if len(y) < 4 or len(set(y)) < 2 or len(set(g)) < 2:
      continue
    scores = grouped_scores(x, y, g, Standardised if together else OneSignal, folds=folds)
    keep = np.isfinite(scores)
    kept_groups = [gg for gg, kk in zip(g, keep, strict=True) if kk]
    lo, hi = cluster_bootstrap_auc(scores[keep], y[keep], kept_groups, replicates)
    y_kept, s_kept = y[keep], scores[keep]
    w_lo, w_hi = within_cell_bootstrap(s_kept, y_kept, kept_groups, replicates)
    out.append({"k": k, "predictor": name, "runs": int(keep.sum()), "positives": int(y_kept.sum()),
                "cells": len(set(g)), "auc": auc(s_kept, y_kept), "auc_lo": lo, "auc_hi": hi,
                "within_cell_auc": within_cell_auc(s_kept, y_kept, kept_groups),
                "within_cell_auc_lo": w_lo, "within_cell_auc_hi": w_hi})  # fmt: skip
  return out


def transfer(
  train: Sequence[Row], test: Sequence[Row], k: int, replicates: int = 1000
) -> Row | None:
  """The all-core-signals model fitted on `train` (one corpus) and scored on `test` (another):
  AUC with its cluster-bootstrap interval over the test cells; the AUC within test cells with
  its within-cell bootstrap interval."""
  core = [f"{s}:{kind}" for s in CORE for kind in KINDS]
  xa, ya, _, _ = matrix(train, k, core)
  xb, yb, gb, _ = matrix(test, k, core)
  if len(set(ya)) < 2 or len(set(yb)) < 2:
    return None
  scores = Standardised(xa, ya).score(xb)
  lo, hi = cluster_bootstrap_auc(scores, yb, gb, replicates)
  w_lo, w_hi = within_cell_bootstrap(scores, yb, gb, replicates)
  return {"k": k, "predictor": "all core signals", "runs": len(yb), "positives": int(yb.sum()),
          "cells": len(set(gb)), "auc": auc(scores, yb), "auc_lo": lo, "auc_hi": hi,
          "within_cell_auc": within_cell_auc(scores, yb, gb),
          "within_cell_auc_lo": w_lo, "within_cell_auc_hi": w_hi}  # fmt: skip


def replay(runs: Sequence[Row], k: int, folds: int = 10, max_lost: float = 0.0) -> Row | None:
  """Replays a stop rule at step k on a sweep's runs, cross-fitted: each fold of whole cells
  is scored by the all-core-signals model fitted on the other folds, with the threshold the
  highest that stops no training-fold run that kept its escape (max_lost: the fraction of
  them it may stop). Returns what stopping would have saved (the stopped runs' remaining wall
  time) and lost (stopped runs that kept an escape)."""
  core = [f"{s}:{kind}" for s in CORE for kind in KINDS]
  x, y, groups, kept = matrix(runs, k, core)
  if len(set(y)) < 2:
    return None
  names = sorted(set(groups))
  fold = np.asarray([names.index(g) % folds for g in groups])
  stop = np.zeros(len(y), bool)
  for f in sorted(set(fold)):
    test, train = fold == f, fold != f
    if len(set(y[train])) < 2:
      continue
    model = Standardised(x[train], y[train])
    pos = np.sort(model.score(x[train])[y[train] == 1])
    threshold = float(pos[int(math.floor(max_lost * len(pos)))]) - 1e-9
    stop[test] = model.score(x[test]) < threshold
  saved = sum(
    float(r["wall_seconds"]) * max(0.0, 1 - k / float(r["steps"]))
    for r, s in zip(kept, stop, strict=True)
    if s
  )
  return {
    "k": k,
    "runs": len(kept),
    "escaped": int(y.sum()),
    "stopped": int(stop.sum()),
    "stopped_that_would_have_escaped": int((stop & (y == 1)).sum()),
    "stuck_not_stopped": int((~stop & (y == 0)).sum()),
    "core_hours_saved": saved / 3600,
    "core_hours_total": sum(float(r["wall_seconds"]) for r in kept) / 3600,
  }


def still_on_plateau(runs: Sequence[Row], k: int) -> list[Row]:
  """The runs that had not escaped by step k (first passage after k, or none): the runs a
  stop rule at k has to judge."""
  return [r for r in runs if r.get("escape_at") is None or r["escape_at"] > k]


def fit_rule(runs: Sequence[Row], k: int, provenance: Mapping[str, Any]) -> dict[str, Any]:
  """The stop rule at step k fitted on `runs`, as JSON-ready data."""
  core = [f"{s}:{kind}" for s in CORE for kind in KINDS]
  x, y, groups, _ = matrix(runs, k, core)
  if len(set(y)) < 2:
    raise ValueError(f"a stop rule at step {k} needs runs that escaped and runs that did not")
  model = Standardised(x, y)
  threshold = float(np.min(model.score(x)[y == 1])) - 1e-9
  return {
    "version": RULE_VERSION,
    "k": k,
    "features": core,
    "mean": [float(v) for v in model.mean],
    "std": [float(v) for v in model.std],
    "weights": [float(v) for v in model.w],
    "threshold": threshold,
    "provenance": {
      **provenance,
      "runs": len(y),
      "escaped": int(y.sum()),
      "cells": len(set(groups)),
    },
  }
