"""What a run's summary says about it: trained, stuck (learned nothing about context) or
diverged. Pure Python, no JAX: the sweep collector imports it too.

The plateau a context-free model reaches on the eval loss is the held-out unigram
cross-entropy (`heldout_unigram_entropy` in summary.json: the train split's token
frequencies scored on the eval split), not the train split's own entropy: the two differ
by the KL divergence between the splits, 0.03-0.2 nats on real corpora. Older summaries
without it are judged against `unigram_entropy`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# A run whose final eval loss is not at least this many nats below the held-out unigram
# cross-entropy learned (almost) nothing a context-free model would not: it is "stuck".
# Why 0.1 (docs/verdict/plateau_noise.csv, scripts/plateau_noise.py): the end-of-run eval
# set (16k tokens) of the exact unigram model lands within 0.02 nats of the baseline on
# both shipped corpora, and over random 16k-token eval sets its loss has a std of 0.017-0.038
# nats; runs on the plateau were seen up to 0.03 nats below it; runs that learned context
# end 0.6 nats or more below it. 0.1 is 2.6 of the larger std and 3x the plateau dip.
STUCK_MARGIN = 0.1


def is_finite_number(x: Any) -> bool:
  """A real int or float (not bool) that is finite."""
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def baseline(summary: Mapping[str, Any]) -> float | None:
  """The no-context loss a summary is judged against (held-out when recorded)."""
  for key in ("heldout_unigram_entropy", "unigram_entropy"):
    if is_finite_number(summary.get(key)):
      return summary[key]
  return None


def classify(summary: Mapping[str, Any] | None, margin: float = STUCK_MARGIN) -> str:
  """trained | stuck | diverged | interrupted | pending | unknown, from a summary.json.

  Stuck: the final eval loss is not `margin` nats below the no-context baseline
  (`baseline`), i.e. the model learned (almost) nothing about context; it is not a NaN.
  """
  if not summary:
    return "pending"
  status = summary.get("status")
  loss, plateau = summary.get("final_eval_loss"), baseline(summary)
  if status == "diverged" or (loss is not None and not is_finite_number(loss)):
    return "diverged"
  if status == "interrupted":
    return "interrupted"
  if status != "completed" or not is_finite_number(loss) or plateau is None:
    return "unknown"
  return "stuck" if loss > plateau - margin else "trained"
