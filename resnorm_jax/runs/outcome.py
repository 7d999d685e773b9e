"""What a run's summary says about it: trained, stuck (learned nothing about context) or
diverged at its budget (its last step), and from its curve when it escaped the plateau for
good and when it diverged. Pure Python, no JAX: the sweep collector imports it too.

The plateau a context-free model reaches on the eval loss is the held-out unigram
cross-entropy (`heldout_unigram_entropy` in summary.json: the train split's token
frequencies scored on the eval split), not the train split's own entropy: the two differ
by the KL divergence between the splits, 0.03-0.2 nats on real corpora. Older summaries
without it are judged against `unigram_entropy`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from resnorm_jax.runs import status as run_status

# A run whose final eval loss is not at least this many nats below the held-out unigram
# cross-entropy learned (almost) nothing a context-free model would not: it is "stuck".
# Why 0.1 (docs/verdict/plateau_noise.csv, scripts/plateau_noise.py): the end-of-run eval
# set (16k tokens) of the exact unigram model lands within 0.02 nats of the baseline on
# both shipped corpora, and over random 16k-token eval sets its loss has a std of 0.017-0.038
# nats. Of the 331 runs in docs/verdict/escape_steps.csv the stuck ones end at most
# 0.045 nats below it (one that dipped below the plateau and came back), the trained ones at
# least 0.147 below (42 of the 249 less than 0.6 below). 0.1 is 2.6 of the larger std and
# about twice the deepest stuck run's dip. The verdict is at the run's last step: a run still
# on the plateau there is slow or stuck within that budget, not unstable.
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


def classify(
  summary: Mapping[str, Any] | None, margin: float = STUCK_MARGIN, vocab_size: int | None = None
) -> str:
  """trained | stuck | diverged | interrupted | stopped_early | pending | unknown, from a
  summary.json: the verdict at budget_steps (the run's last step, summary["steps"]), from its
  final eval loss; stopped_early (train.stop_when ended it at its rule's step) has none.

  Diverged: the loop said so (a non-finite loss or gradient), a final loss is not finite, or,
  with `vocab_size` known, the final train or eval loss is above `divergence_ceiling` (a run
  that blew up and trained on: lr 1.0 under Muon ends at 77 nats, far above any plateau).
  Stuck: the final eval loss is not `margin` nats below the no-context baseline (`baseline`),
  i.e. the model learned (almost) nothing about context by then. When the run left the
  plateau for good, or blew up, over its whole curve: `curve_fields`.
  """
  if not summary:
    return "pending"
  status = summary.get("status")
  loss, plateau = summary.get("final_eval_loss"), baseline(summary)
  if status == run_status.DIVERGED or (loss is not None and not is_finite_number(loss)):
    return run_status.DIVERGED
  if vocab_size and any(
    is_finite_number(v) and v > divergence_ceiling(vocab_size)
    for v in (loss, summary.get("final_train_loss"))
  ):
    return run_status.DIVERGED
  if status in (
    run_status.INTERRUPTED,
    run_status.STOPPED_EARLY,
  ):  # no verdict: it did not reach its budget
    return status
  if status != run_status.COMPLETED or not is_finite_number(loss) or plateau is None:
    return "unknown"
  return run_status.STUCK if loss > plateau - margin else run_status.TRAINED


# Curves: when a run left the plateau for good, and when it blew up. `classify` is the verdict
# at the run's budget (its last step); these say when, so "stuck" can be told from "slow".

# A run has diverged once its train loss is non-finite, or once it rises more than this many
# nats above ln(vocab_size), the loss of the uniform predictor, after it had come below ln(V)
# (see `diverged_step`). One nat above uniform: the model puts on average e^-1 of the uniform
# probability on the next token, confidently wrong, worse than knowing nothing. Of the 331 runs
# committed under docs/ outside docs/lr_sensitivity/ (none diverged), none rose back above ln(V)
# once below it (the highest later train loss: 5.543 against ln 256 = 5.545); of the loss-vs-lr
# and budget runs one crossed the bound for one logged step and came back (docs/results.md,
# the budget test); and on the stuck plateau (2.1-2.3 nats
# below ln 256) the 10-step mean train loss moves a median 0.03 nats between logged steps, at
# most 0.9: a healthy or stuck run does not cross the bound by noise.
DIVERGED_MARGIN = 1.0
# And a run has diverged once a logged train loss (or its final loss) is above CEILING_FACTOR x
# ln(V), whatever it did before: the armed rule above never fires for a run that blows up
# before it ever comes below ln(V) (Muon at lr 1.0: 76.8 nats at step 30, lr 10: 11,510). Twice
# the uniform loss is a mean probability of 1/V^2 on the next token; the highest train loss of
# the 985 curves committed under docs/ is 8.18 nats (a DeepNorm run's first logged step, V =
# 256: ceiling 11.09), so no committed start or plateau comes within 2.9 nats of it.
CEILING_FACTOR = 2.0


def escape_step(
  evals: Sequence[tuple[int, float]], baseline: float, margin: float = STUCK_MARGIN
) -> int | None:
  """The first eval step from which the eval loss stays `margin` nats below `baseline` at every
  later eval to the end of the curve, else None (a non-finite loss is never below)."""
  escaped = None
  for step, loss in sorted(evals):
    below = is_finite_number(loss) and loss <= baseline - margin
    if not below:
      escaped = None
    elif escaped is None:
      escaped = step
  return escaped


def divergence_bound(vocab_size: int, margin: float = DIVERGED_MARGIN) -> float:
  """The train loss above which a run that had come below ln(vocab_size) has diverged."""
  return math.log(vocab_size) + margin


def divergence_ceiling(vocab_size: int) -> float:
  """The loss above which a run has diverged whatever came before: CEILING_FACTOR x ln(V)."""
  return CEILING_FACTOR * math.log(vocab_size)


def diverged_step(
  train_curve: Sequence[tuple[int, float]],
  bound: float,
  armed_below: float | None = None,
  ceiling: float = math.inf,
) -> int | None:
  """The first logged step whose train loss is non-finite, above `ceiling`, or above `bound`
  after an earlier logged loss came below `armed_below` (default: `bound`), else None.

  Why armed: a run may start above the bound and fall through it (the first logged loss of
  committed runs reaches 7.8 nats for DeepNorm and 6.2 for Post-LN, ln 256 = 5.55); only a
  rise after it came below counts. Arming below ln(V) rather than at the bound leaves a nat
  between the two, so a run hovering at the bound cannot flicker into "diverged". A spike
  that recovers still counts: this is the first instability; the verdict at the budget
  (`classify`) says how it ended.
  """
  armed_below = bound if armed_below is None else armed_below
  armed = False
  for step, loss in sorted(train_curve):
    if not is_finite_number(loss) or loss > ceiling or (armed and loss > bound):
      return step
    armed = armed or loss < armed_below
  return None


# The no-context loss of the periodic eval set itself (the first train.eval_batches held-out
# batches): the plateau the `eval/loss` curve sits on. On stdlib's 8k tokens it is 3.299,
# 0.060 above the whole held-out split's 3.238, so an escape judged against the latter would
# ask the curve for 0.16 nats, not the margin (docs/verdict/eval_set_baselines.csv).
EVAL_SET_BASELINE = "periodic_eval_no_context_loss"


def no_context_losses(corpus: Any, train_cfg: Any, vocab: int) -> dict[str, float]:
  """The no-context losses a run is judged against, as its summary records them: the train
  split's unigram entropy, the held-out split's unigram cross-entropy (the verdict's
  baseline) and that of the periodic eval's own tokens (EVAL_SET_BASELINE, the curve's).
  `corpus` has .train and .val token arrays; `train_cfg` is the config's train section. The
  single run and the population both call this (NumPy, imported here only)."""
  from resnorm_jax.data import batches, unigram

  t = train_cfg
  eval_targets = batches.eval_targets(
    corpus.val, t.eval_batches, batch_size=t.batch_size, seq_len=t.seq_len
  )
  train = unigram.Counted(corpus.train, vocab)  # scored three times, counted once
  return {
    "unigram_entropy": unigram.unigram_entropy(train, vocab),
    "heldout_unigram_entropy": unigram.heldout_unigram_entropy(train, corpus.val, vocab),
    EVAL_SET_BASELINE: unigram.heldout_unigram_entropy(train, eval_targets, vocab),
  }


def curve_baseline(summary: Mapping[str, Any]) -> float | None:
  """The plateau of the periodic eval curve: its own eval set's no-context loss when
  recorded, else the whole held-out split's (`baseline`)."""
  if is_finite_number(summary.get(EVAL_SET_BASELINE)):
    return summary[EVAL_SET_BASELINE]
  return baseline(summary)


def _curve(records: Iterable[Mapping[str, Any]], key: str) -> list[tuple[int, float]]:
  """(step, value) of `key` in metrics rows, by step; the last row of a step wins."""
  points = {r["step"]: r[key] for r in records if key in r and isinstance(r.get("step"), int)}
  return sorted(points.items())


def curve_fields(
  records: Sequence[Mapping[str, Any]],
  summary: Mapping[str, Any],
  vocab_size: int | None,
  margin: float = STUCK_MARGIN,
) -> dict[str, int | None]:
  """{"escape_step", "diverged_step"} of a run from its metrics rows (metrics.jsonl) and
  summary.

  diverged_step: `diverged_step` of the train loss against `divergence_bound(vocab_size)`
  (armed below ln(V)) and `divergence_ceiling(vocab_size)` (always; only non-finite losses
  count when vocab_size is unknown), else the
  summary's last step when `classify` calls the run diverged (a status or a final eval loss
  no curve point shows). escape_step: `escape_step` of the periodic eval curve (`eval/loss`,
  not the end-of-run `eval/final_loss`) against that eval set's own no-context loss
  (`curve_baseline`; the whole split's `baseline` for runs that predate it), counting only evals
  after diverged_step: a run that blew up did not stay escaped, and one that recovered
  escapes anew. The verdict (`classify`, the final eval loss at the run's last step) may
  disagree with escape_step near the margin: the two use different eval sets.
  """
  train, evals = _curve(records, "train/loss"), _curve(records, "eval/loss")
  if vocab_size:
    bound, uniform = divergence_bound(vocab_size), math.log(vocab_size)
    ceiling = divergence_ceiling(vocab_size)
    diverged = diverged_step(train, bound, armed_below=uniform, ceiling=ceiling)
  else:
    diverged = diverged_step(train, math.inf)
  if diverged is None and classify(summary, margin, vocab_size) == run_status.DIVERGED:
    diverged = summary.get("steps") or (train[-1][0] if train else None)
  plateau = curve_baseline(summary)
  after = [(s, v) for s, v in evals if diverged is None or s > diverged]
  escaped = None if plateau is None else escape_step(after, plateau, margin)
  return {"escape_step": escaped, "diverged_step": diverged}
