"""What a run's first steps say about its fate: the features of its logged metrics at step k
and the stop rule that judges them, as data (train.stop_when). resnorm_jax/analysis/
early_warning.py fits and evaluates the rule on committed runs; a run applies it here.
numpy only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

SIGNALS = (
  "train/loss",
  "grad_norm",
  "update_norm",
  "param_norm",
  "attn_logit_max",
  "output_logit_rms",
)
KINDS = ("level", "slope", "ratio")
KS = (50, 100, 200, 400)
CORE = ("train/loss", "grad_norm", "update_norm", "param_norm")  # logged by every run


def _series(rows: Sequence[Mapping[str, float]], signal: str) -> tuple[np.ndarray, np.ndarray]:
  pts = [
    (r["step"], r[signal])
    for r in rows
    if signal in r and r[signal] is not None and math.isfinite(r[signal])
  ]
  if not pts:
    return np.zeros(0), np.zeros(0)
  s, v = zip(*pts, strict=True)
  return np.asarray(s, float), np.asarray(v, float)


def features(
  rows: Sequence[Mapping[str, float]], k: int, entropy: float
) -> dict[str, float] | None:
  """`signal:kind` -> value at step k (NaN where the run did not log the signal); None when
  the run logged nothing by step k (it ended, diverged, earlier)."""
  out: dict[str, float] = {}
  steps, _ = _series(rows, "train/loss")
  if steps.size == 0 or steps.max() < k:
    return None
  for signal in SIGNALS:
    s, v = _series(rows, signal)
    if signal == "train/loss":
      v = v - entropy
    upto = s <= k
    if upto.sum() < 3:
      for kind in KINDS:
        out[f"{signal}:{kind}"] = math.nan
      continue
    level = float(np.mean(v[upto][-3:]))
    window = upto & (s >= k / 2)
    xs, ys = s[window] / 1000, v[window]
    slope = float(np.polyfit(xs, ys, 1)[0]) if xs.size >= 3 else math.nan
    first = float(v[0])
    if signal == "train/loss":
      ratio = level - first  # a gap can cross 0: its change, not its ratio
    else:
      ratio = math.log(level / first) if level > 0 and first > 0 else math.nan
    out[f"{signal}:level"], out[f"{signal}:slope"], out[f"{signal}:ratio"] = level, slope, ratio
  return out


# A stop rule as data: what train.stop_when reads. The all-core-signals model fitted on every
# stdlib run (survival and grid), its standardisation, the step k it judges at and the
# threshold below which a run is stopped (the highest that stops no training run that kept
# its escape), with the provenance a reader needs to trust it.
RULE_VERSION = 1


def rule_score(rule: Mapping[str, Any], feats: Mapping[str, float]) -> float:
  """The rule's score of one run's features at its step k (higher: more likely to escape)."""
  x = np.asarray([feats.get(c, math.nan) for c in rule["features"]], float)
  z = (x - np.asarray(rule["mean"])) / np.asarray(rule["std"])
  z = np.where(np.isfinite(z), z, 0.0)
  w = np.asarray(rule["weights"])
  return float(z @ w[:-1] + w[-1])


def rule_says_stop(
  rule: Mapping[str, Any], rows: Sequence[Mapping[str, float]], entropy: float
) -> tuple[bool, float] | None:
  """(stop?, score) for a run whose logged metrics are `rows`, judged at the rule's step k;
  None before the run has logged to step k."""
  feats = features(rows, int(rule["k"]), entropy)
  if feats is None:
    return None
  score = rule_score(rule, feats)
  return score < float(rule["threshold"]), score


def load_rule(path: str) -> dict[str, Any]:
  """A stop rule written by scripts/early_warning.py; ValueError naming the file when it is
  not one."""
  try:
    with open(path) as f:
      rule = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError(f"train.stop_when={path!r}: not a readable stop rule ({e})") from None
  need = {"version", "k", "features", "mean", "std", "weights", "threshold"}
  if not isinstance(rule, dict) or not need <= set(rule) or rule["version"] != RULE_VERSION:
    raise ValueError(
      f"train.stop_when={path!r}: not a stop rule of version {RULE_VERSION} "
      f"(needs {', '.join(sorted(need))}; scripts/early_warning.py writes one)"
    )
  problem = rule_problem(rule)
  if problem:
    raise ValueError(f"train.stop_when={path!r}: {problem}")
  return rule


def _finite(x: Any) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def rule_problem(rule: dict[str, Any]) -> str | None:
  """What makes a loaded rule unusable, checked whole when the run starts (not at step k):
  a feature no run logs, lengths that disagree, a weight, mean, deviation or threshold that is
  not a finite number; None when it is usable."""
  features = rule["features"]
  known = {f"{s}:{k}" for s in SIGNALS for k in KINDS}
  if not isinstance(features, list) or not features:
    return "its features must be a non-empty list"
  unknown = [f for f in features if f not in known]
  if unknown:
    return (
      f"its feature {unknown[0]!r} is none a run logs (valid: signal:kind, signals "
      f"{', '.join(SIGNALS)}; kinds {', '.join(KINDS)})"
    )
  n = len(features)
  for key, length in (("mean", n), ("std", n), ("weights", n + 1)):
    values = rule[key]
    if not isinstance(values, list) or len(values) != length:
      got = len(values) if isinstance(values, list) else type(values).__name__
      return (
        f"its {key} has {got} values, not {length} ({n} features{' + a bias' * (key == 'weights')})"
      )
    if not all(_finite(v) for v in values):
      return f"its {key} holds a value that is not a finite number"
  if not _finite(rule["threshold"]):
    return f"its threshold={rule['threshold']!r} is not a finite number"
  return None
