"""The lines a run prints when it ends (the single run's and each population member's): its
rounded results, where its summary is, how to compare, resume, or train on a run a stop rule
stopped. JAX-free, so the results build prints a committed run's end line as the run did
(the README's sample of the main job). No JAX."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.config import cli
from resnorm_jax.runs import expected as expected_lib
from resnorm_jax.runs import status
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE

STOP_KEY = "train.stop_when"  # the stop rule's key (train/stop_rule.py)


def end_message(
  summary: Mapping[str, Any],
  workdir: str,
  argv: Sequence[str] | None,
  summary_written: bool = True,
) -> str:
  """The end-of-run lines: rounded results, where the summary is (`summary_written` False:
  that it could not be written), how to compare or resume."""
  r = lambda x, fmt=".4f": "-" if x is None else format(x, fmt)
  on = lambda key: f" on {summary[key]:,} tokens" if summary.get(key) else ""
  baseline = summary.get("heldout_unigram_entropy", summary.get("unigram_entropy"))
  tps = summary.get("tokens_per_second")
  # Each eval beside its own kind: the end-of-run eval (the verdict's, judged against the
  # held-out no-context loss) and the periodic eval with its best (a smaller eval set).
  periodic = f"best periodic eval {r(summary.get('best_eval_loss'))}"  # a summary from before
  if "periodic_eval_loss" in summary:
    own = summary.get(EVAL_SET_BASELINE)  # the periodic eval set's own no-context loss
    own = "" if own is None else f"no-context {own:.3f}; "
    periodic = (
      f"periodic eval {r(summary['periodic_eval_loss'])}{on('periodic_eval_tokens')} "
      f"({own}best {r(summary.get('best_eval_loss'))})"
    )
  final_on = on("final_eval_tokens")
  if summary.get("final_eval_distinct_tokens"):  # a held-out split smaller than the eval
    final_on += f" ({summary['final_eval_distinct_tokens']:,} distinct)"
  lines = [
    f"{summary['status']} ({summary.get('outcome', '?')}) at step {summary['steps']}: "
    f"train {r(summary.get('final_train_loss'))}; final eval {r(summary.get('final_eval_loss'))}"
    f"{final_on} (no-context {r(baseline, '.3f')}); {periodic}; "
    f"{r(tps, ',.0f')} tokens/s, {cli.format_duration(summary.get('wall_seconds') or 0)}",
  ]
  if summary.get("expected"):  # a named experiment's expected outcome, and whether it held
    lines.append(expected_lib.line(summary["expected"], summary.get("outcome")))
  lines += [
    f"  summary: {os.path.join(workdir, 'summary.json')}"
    + ("" if summary_written else " could not be written (the error above); these are its values"),
    f"  compare: tensorboard --logdir {os.path.dirname(os.path.normpath(workdir)) or '.'}",
  ]
  if summary["status"] in status.RESUMABLE and argv:
    lines.append(f"  resume:  {cli.resume_command(argv, workdir)}")
  if summary["status"] == status.STOPPED_EARLY and "stop_step" in summary:
    lines.insert(1, f"  {stopped_line(summary, workdir, argv)}")
  return "\n".join(lines)


def stopped_line(summary: Mapping[str, Any], workdir: str, argv: Sequence[str] | None) -> str:
  """The line a run stopped early prints: by which rule, its score, and how to go on."""
  how = (
    resume_to_end_command(argv, workdir)
    if argv
    else f"the same command with --config.{STOP_KEY}= (off)"
  )
  return (
    f"stopped early at step {summary['stop_step']} by the stop rule {summary['stop_rule']} "
    f"(score {summary['stop_score']:.4g} < threshold {summary['stop_threshold']:.4g}), its "
    f"checkpoint saved; to train it to train.steps: {how}"
  )


def resume_to_end_command(argv: Sequence[str], workdir: str) -> str:
  """The command that trains a stopped run to its end: the run's own command line `argv`
  with its workdir, any train.stop_when replaced by `--config.train.stop_when=` (off)."""
  flag = f"--config.{STOP_KEY}"
  kept, skip = [], False
  for a in argv:
    if skip:
      skip = False
    elif a == flag:
      skip = True  # its value is the next argument
    elif not a.startswith(flag + "="):
      kept.append(a)
  return cli.resume_command([*kept, flag + "="], workdir)


def progress_line(
  n: int, steps: int, loss: float, eval_loss: float | None, lr: float, tps: float, eta: float
) -> str:
  """The line a run prints every train.log_every steps: its step, train loss, the periodic
  eval where one ran, lr, rate and the time left at that rate."""
  ev = f" | eval {eval_loss:.4f}" if eval_loss is not None else ""
  return (
    f"step {n:>6}/{steps} | loss {loss:.4f}{ev} | lr {lr:.2e} | {tps:,.0f} tok/s | "
    f"ETA {cli.format_duration(eta)}"
  )
