"""At Post-LN's edge, is a run's fate set by its initialization or by its data order? The
factorial of init seeds (`seed`) x data seeds (`data.seed`) of configs/sweeps/init_or_data.py,
read from its run folders, and what each factor explains of the fate:

- the fate: kept (an escape that lasts to the end: the run's summary `escape_step`, the
  survival protocol's kept) and the first passage (the first periodic eval 0.1 nats below its
  eval set's no-context loss, censored at the horizon);
- a two-way analysis of variance without replication (one run per cell of the factorial): the
  share of the total sum of squares of each factor's main effect, the rest (interaction and
  noise together, which one run per pair cannot tell apart) as the residual;
- a permutation test per factor: its sum of squares against the same with its labels shuffled
  within each level of the other factor (the other factor's effect kept), `PERMUTATIONS` draws;
- a logistic model with both factors as categorical effects (ridge `L2` for separation): the
  deviance each factor removes beside the other;
- init-time scores (experiments/init_predictors.py) and the early-warning rule's features at k
  (resnorm_jax/runs/stop_features.py), each scored by its leave-one-run-out AUC within the cell.
No JAX here.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from resnorm_jax.analysis.early_warning import auc, fit_logistic
from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.runs import record_files, status, stop_features
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import STUCK_MARGIN, curve_baseline

NAME = re.compile(r"-i(?P<init>\d+)-d(?P<data>\d+)$")
PERMUTATIONS = 20000
ALPHA = 0.05  # each factor's permutation test's level the verdict reads
CSV_COLUMNS = (
  "name",
  "init_seed",
  "data_seed",
  "kept",
  "first_passage",
  "horizon",
  "final_eval_loss",
)  # init_or_data.csv's (scripts/init_or_data.py)
L2 = 0.1
RULE_KS = (25, 50, 100)
Run = dict[str, Any]


def first_passage(records: Sequence[Mapping[str, Any]], baseline: float | None) -> int | None:
  """The first periodic eval `STUCK_MARGIN` below the eval set's no-context loss."""
  if baseline is None:
    return None
  for r in records:
    loss = r.get("eval/loss")
    if isinstance(loss, (int, float)) and loss <= baseline - STUCK_MARGIN:
      return r["step"]
  return None


def read_runs(sweep_dir: str) -> list[Run]:
  """The factorial's completed runs: init, data seed, kept, first passage, horizon, metrics."""
  out = []
  for name in sorted(os.listdir(sweep_dir)):
    m, run_dir = NAME.search(name), os.path.join(sweep_dir, name)
    summary = read_json(os.path.join(run_dir, record_files.SUMMARY))
    metrics = os.path.join(run_dir, record_files.METRICS)
    if not m or not isinstance(summary, dict) or summary.get("status") != status.COMPLETED:
      continue
    if not os.path.isfile(metrics):
      continue
    records = read_metrics(metrics)
    out.append(
      {
        "name": name,
        "init": int(m["init"]),
        "data": int(m["data"]),
        "kept": int(summary.get("escape_step") is not None),
        "first_passage": first_passage(records, curve_baseline(summary)),
        "horizon": int(summary["steps"]),
        "final_eval_loss": summary.get("final_eval_loss"),
        "entropy": float(summary.get("unigram_entropy") or 0.0),
        "records": records,
      }
    )
  return out


def complete_grid(runs: Sequence[Run]) -> tuple[list[int], list[int]] | None:
  """(init seeds, data seeds) when every pair of them has run, else None."""
  inits, datas = sorted({r["init"] for r in runs}), sorted({r["data"] for r in runs})
  have = {(r["init"], r["data"]) for r in runs}
  if (
    len(inits) < 2 or len(datas) < 2 or any(p not in have for p in itertools.product(inits, datas))
  ):
    return None
  return inits, datas


def _matrix(runs: Sequence[Run], value: str, inits: list[int], datas: list[int]) -> np.ndarray:
  by = {(r["init"], r["data"]): r[value] for r in runs}
  return np.array([[float(by[(i, d)]) for d in datas] for i in inits])


def anova(y: np.ndarray) -> dict[str, float]:
  """Shares of the total sum of squares of a two-way table y[init, data] (one run a cell):
  init, data and the residual (interaction and noise); NaN shares when y is constant."""
  grand = y.mean()
  ss_total = float(((y - grand) ** 2).sum())
  ss_init = float(y.shape[1] * ((y.mean(axis=1) - grand) ** 2).sum())
  ss_data = float(y.shape[0] * ((y.mean(axis=0) - grand) ** 2).sum())
  share = (lambda ss: ss / ss_total) if ss_total > 0 else (lambda ss: math.nan)
  return {
    "ss_total": ss_total,
    "init": share(ss_init),
    "data": share(ss_data),
    "residual": share(ss_total - ss_init - ss_data),
  }


def permutation_p(y: np.ndarray, axis: int, draws: int = PERMUTATIONS, seed: int = 0) -> float:
  """P-value of a factor's sum of squares (axis 0: init, rows; 1: data, columns) against its
  labels shuffled within each level of the other factor; (count + 1) / (draws + 1)."""
  if not np.ptp(y):
    return math.nan
  rng = np.random.default_rng(seed)
  stat = lambda m: float(((m.mean(axis=1 - axis) - m.mean()) ** 2).sum())  # noqa: E731
  observed = stat(y)
  count = 0
  for _ in range(draws):
    z = y.copy()
    if axis == 0:  # shuffle the rows' labels within each column
      for j in range(z.shape[1]):
        z[:, j] = rng.permutation(z[:, j])
    else:
      for i in range(z.shape[0]):
        z[i, :] = rng.permutation(z[i, :])
    count += stat(z) >= observed - 1e-12
  return (count + 1) / (draws + 1)


def _deviance(x: np.ndarray, y: np.ndarray) -> float:
  w = fit_logistic(x, y, L2) if x.shape[1] else fit_logistic(np.zeros((len(y), 0)), y, L2)
  xb = np.hstack([x, np.ones((len(y), 1))])
  p = np.clip(1 / (1 + np.exp(-np.clip(xb @ w, -30, 30))), 1e-12, 1 - 1e-12)
  return float(-2 * np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)))


def logistic_deviance(runs: Sequence[Run], inits: list[int], datas: list[int]) -> dict[str, float]:
  """Deviances of logistic models of kept: null, init only, data only, both (dummy coded,
  ridge L2): what each factor removes beside the other is deviance(other) - deviance(both)."""
  y = np.array([r["kept"] for r in runs], float)
  dummies = (
    lambda key, levels: np.array(  # noqa: E731
      [[float(r[key] == lv) for lv in levels[1:]] for r in runs]
    ).reshape(len(runs), -1)
  )
  xi, xd = dummies("init", inits), dummies("data", datas)
  null = _deviance(np.zeros((len(y), 0)), y)
  init, data = _deviance(xi, y), _deviance(xd, y)
  both = _deviance(np.hstack([xi, xd]), y)
  return {"null": null, "init": init, "data": data, "both": both,
          "init_beside_data": data - both, "data_beside_init": init - both}  # fmt: skip


def loo_auc(values: Sequence[float], labels: Sequence[int]) -> float:
  """Leave-one-run-out AUC of one score: each run's held-out score is its value signed by the
  direction (a 1-D logistic fit's slope) the other runs give; NaN with one class."""
  v, y = np.asarray(values, float), np.asarray(labels, int)
  if len(set(y.tolist())) < 2 or not np.all(np.isfinite(v)):
    return math.nan
  z = (v - v.mean()) / (v.std() or 1.0)
  held = []
  for i in range(len(v)):
    rest = np.arange(len(v)) != i
    if len(set(y[rest].tolist())) < 2:
      return math.nan
    w = fit_logistic(z[rest][:, None], y[rest], 1.0)
    held.append(w[0] * z[i])
  return auc(held, y)


def rule_scores(runs: Sequence[Run], k: int) -> dict[str, list[float]]:
  """The early-warning rule's features at step k of every run: {feature: [value per run]};
  an empty dict when a run did not log to k."""
  feats = [stop_features.features(r["records"], k, r["entropy"]) for r in runs]
  if any(f is None for f in feats):
    return {}
  return {c: [f[c] for f in feats] for c in feats[0]}


def predictors(runs: Sequence[Run], init_scores: Mapping[str, Mapping[str, float]]) -> list[dict]:
  """Rows (kind, k, score, loo_auc, separation, auc_lo, auc_hi: auc_interval's): each
  init-time score of `init_scores` ({run name: {score: value}}), and the rule's features at
  each of RULE_KS, leave-one-run-out."""
  labels = [r["kept"] for r in runs]
  rows = []
  names = sorted({s for v in init_scores.values() for s in v})
  for s in names:
    values = [init_scores.get(r["name"], {}).get(s, math.nan) for r in runs]
    rows.append({"kind": "init", "k": 0, "score": s, "loo_auc": loo_auc(values, labels),
                 "separation": separation(values, labels)})  # fmt: skip
  for k in RULE_KS:
    feats = rule_scores(runs, k)
    for s, values in feats.items():
      rows.append({"kind": "rule feature", "k": k, "score": s,
                   "loo_auc": loo_auc(values, labels),
                   "separation": separation(values, labels)})  # fmt: skip
  n_pos = sum(labels)
  for row in rows:
    row["auc_lo"], row["auc_hi"] = auc_interval(row["loo_auc"], n_pos, len(labels) - n_pos)
  return rows


def init_columns(runs: Sequence[Run], init_scores: Mapping[str, Mapping[str, float]]) -> list:
  """Each init-time score's values over the runs, in predictors()' order (for best_of_p)."""
  names = sorted({s for v in init_scores.values() for s in v})
  return [[init_scores.get(r["name"], {}).get(s, math.nan) for r in runs] for s in names]


def separation(values: Sequence[float], labels: Sequence[int]) -> float:
  """How well the score's ranking separates the kept runs in sample, either direction:
  max(AUC, 1 - AUC), 0.5 to 1 (an upper bound: the direction is chosen on the same runs)."""
  v = np.asarray(values, float)
  if not np.all(np.isfinite(v)) or len(set(labels)) < 2:
    return math.nan
  a = auc(v, labels)
  return max(a, 1 - a)


def read_init_scores(path: str) -> dict[str, dict[str, float]]:
  if not os.path.isfile(path):
    return {}
  return {
    r["name"]: {k: float(v) for k, v in r.items() if k not in ("name", "seed", "data_seed")}
    for r in csv_table.read_csv(path)
  }


def fmt(x: float, digits: int = 2) -> str:
  return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def verdict(kept_share: dict, p_init: float, p_data: float, n_kept: int, n: int) -> str:
  """What the factorial says, by rule (ALPHA on each factor's permutation test)."""
  if n_kept in (0, n):
    return (
      f"Not decided: {n_kept} of {n} runs kept an escape, so the cell is not at the edge and "
      "there is no fate to explain."
    )
  init_on, data_on = p_init < ALPHA, p_data < ALPHA
  if init_on and not data_on:
    head = "**The initialization decides.**"
  elif data_on and not init_on:
    head = "**The data order decides.**"
  elif init_on and data_on:
    head = "**Both decide.**"
  else:
    head = "**Neither factor alone is told apart from chance.**"
  return (
    f"{head} Of the variance of kept, the init seed explains {fmt(kept_share['init'])} "
    f"(permutation p {fmt(p_init, 3)}), the data seed {fmt(kept_share['data'])} (p "
    f"{fmt(p_data, 3)}), and {fmt(kept_share['residual'])} is left to their interaction and "
    f"noise, which one run per pair cannot tell apart; {n_kept} of {n} runs kept an escape."
  )


def from_csv(rows: Sequence[Mapping[str, str]]) -> list[Run]:
  """init_or_data.csv's rows as runs (no curves): what the README's row reads."""
  return [
    {"name": r["name"], "init": int(r["init_seed"]), "data": int(r["data_seed"]),
     "kept": int(r["kept"]), "horizon": int(r["horizon"]),
     "first_passage": int(r["first_passage"]) if r["first_passage"] else None}
    for r in rows
  ]  # fmt: skip


def decide(runs: Sequence[Run]) -> dict[str, Any] | None:
  """The factorial's answer from its runs: shares, permutation p-values and the verdict; None
  while a pair is missing."""
  grid = complete_grid(runs)
  if grid is None:
    return None
  ys = _matrix(runs, "kept", *grid)
  horizon = max(r["horizon"] for r in runs)
  yp = _matrix([dict(r, fp=r["first_passage"] or horizon + 25) for r in runs], "fp", *grid)
  share_k, share_p = anova(ys), anova(yp)
  pk = (permutation_p(ys, 0), permutation_p(ys, 1))
  pp = (permutation_p(yp, 0), permutation_p(yp, 1))
  n_kept, n = int(ys.sum()), ys.size
  text = verdict(share_k, *pk, n_kept, n) + " " + passage_sentence(share_p, *pp)
  return {"grid": grid, "share_kept": share_k, "share_passage": share_p, "p_kept": pk,
          "p_passage": pp, "kept": n_kept, "n": n, "horizon": horizon,
          "verdict": text}  # fmt: skip


def passage_sentence(share: dict, p_init: float, p_data: float) -> str:
  """Whether a run leaves the plateau at all (its first passage, never counted past the
  horizon), by the same rule: which factor's permutation test is below ALPHA."""
  on = [name for name, p in (("the init seed", p_init), ("the data seed", p_data)) if p < ALPHA]
  who = " and ".join(on) if on else "neither factor"
  return (
    f"Whether and when a run first leaves the plateau is decided by {who}: the init seed "
    f"explains {fmt(share['init'])} of the first passage's variance (p {fmt(p_init, 3)}), the "
    f"data seed {fmt(share['data'])} (p {fmt(p_data, 3)})."
  )


def auc_interval(a: float, n_pos: int, n_neg: int, z: float = 1.96) -> tuple[float, float]:
  """The 95% interval of an AUC from its standard error (Hanley and McNeil 1982: the AUC's
  variance from the counts of each class alone), clipped to [0, 1]; NaN for a NaN AUC."""
  if math.isnan(a) or not n_pos or not n_neg:
    return math.nan, math.nan
  q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
  var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
  se = math.sqrt(max(var, 0.0))
  return max(0.0, a - z * se), min(1.0, a + z * se)


def best_of_p(
  columns: Sequence[Sequence[float]], labels: Sequence[int], draws: int = 1000, seed: int = 0
) -> float:
  """The chance of a best held-out AUC as high as the observed best among several scores: the
  runs' kept labels permuted `draws` times, every score's loo_auc recomputed and the best
  taken, so picking the best of many is paid for (add-one permutation p)."""
  y = np.asarray(labels, int)
  best = lambda ys: max((a for c in columns if not math.isnan(a := loo_auc(c, ys))),  # noqa: E731
                        default=math.nan)  # fmt: skip
  seen = best(y)
  if math.isnan(seen):
    return math.nan
  rng = np.random.default_rng(seed)
  hits = sum(best(rng.permutation(y)) >= seen - 1e-12 for _ in range(draws))
  return (hits + 1) / (draws + 1)


def seed_odds(runs: Sequence[Run], factor: str) -> list[tuple[int, int, int]]:
  """(seed, kept, runs) per seed of a factor ('init' or 'data'), the seeds in order."""
  seeds = sorted({r[factor] for r in runs})
  return [
    (s, sum(r["kept"] for r in runs if r[factor] == s), sum(r[factor] == s for r in runs))
    for s in seeds
  ]
