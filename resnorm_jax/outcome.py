"""What a run's summary says about it: trained, stuck (learned nothing about context) or
diverged. Pure Python, no JAX: the sweep collector imports it too."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# A run whose final eval loss is within this many nats of the unigram entropy (or above it)
# learned nothing a context-free model would not: it is "stuck".
STUCK_MARGIN = 0.05


def _finite(x: Any) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def classify(summary: Mapping[str, Any] | None, margin: float = STUCK_MARGIN) -> str:
  """trained | stuck | diverged | interrupted | pending | unknown, from a summary.json.

  Stuck: the final eval loss is within `margin` nats of the unigram entropy or above it,
  i.e. the model learned (almost) nothing about context; it is not a NaN.
  """
  if not summary:
    return "pending"
  status = summary.get("status")
  loss, unigram = summary.get("final_eval_loss"), summary.get("unigram_entropy")
  if status == "diverged" or (loss is not None and not _finite(loss)):
    return "diverged"
  if status == "interrupted":
    return "interrupted"
  if status != "completed" or not _finite(loss) or not _finite(unigram):
    return "unknown"
  return "stuck" if loss >= unigram - margin else "trained"
