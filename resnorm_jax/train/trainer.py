"""A single run's Trainer: it drives the compiled step (train, evaluate, log, checkpoint) and
stops on a signal (preemption.py) or when the run's stop rule (stop_rule.py) says so. The step
is read back once per step, one step behind; its bookkeeping is a RunLog (run_log.py)."""

from __future__ import annotations

import jax
import numpy as np

from resnorm_jax.runs import metrics_file
from resnorm_jax.runs import status as run_status
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import eval_budget, preemption, resume_policy, run_log
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train import stop_rule as stop_rule_lib
from resnorm_jax.train.run_log import RunLog


class Trainer:
  """Drives one run's compiled step: train, evaluate, log, checkpoint, stop on a signal or
  when its stop rule (`stop_rule`, a stop_rule.StopRule; None: off) says so."""

  def __init__(
    self,
    run_setup: setup_lib.RunSetup,
    batches: setup_lib.Batches,
    log: RunLog,
    *,
    checkpointer: ckpt_lib.Checkpointer,
    signals: preemption.StopSignals,
    config_dict: dict,
    step_fn,
    eval_fn,
    data_files: dict | None = None,
    stop_rule: stop_rule_lib.StopRule | None = None,
  ):
    self.config, self.batches, self.log = run_setup.config, batches, log
    self.checkpointer, self.signals = checkpointer, signals
    self.config_dict = config_dict  # frozen into each checkpoint's meta
    self.data_files = data_files  # the data's fingerprint, too
    self.step_fn, self.eval_fn = step_fn, eval_fn  # compiled
    self.stop_rule = stop_rule
    t = self.config.train
    # Periodic evals use the first train.eval_batches batches; the end-of-run eval adds more
    # of the same stream, up to train.final_eval_tokens tokens.
    self.n_final_eval = eval_budget.final_eval_batches(t)
    self.eval_batches = [batches.held_out(i) for i in range(t.eval_batches)]
    self.reached = 0  # the last step dispatched

  def evaluate(self, state, n_batches: int) -> float:
    """Mean held-out loss on the first n_batches batches; not training time."""
    with self.log.paused():
      while len(self.eval_batches) < n_batches:
        self.eval_batches.append(self.batches.held_out(len(self.eval_batches)))
      # One batch in flight at a time: XLA:CPU deadlocked (an all-reduce waiting for 7 of 8
      # fake devices, then an abort) with the end-of-run eval's 64 batches dispatched at once.
      losses = [jax.device_get(self.eval_fn(state, b)) for b in self.eval_batches[:n_batches]]
      return float(np.mean(losses))

  def evaluate_at(self, state, n: int) -> None:
    """eval/loss (the curve) and best_eval_loss always use the periodic eval set, so a run
    extended later has the same curve as one run to the end at once; the verdict's
    final_eval_loss adds the rest of the final_eval_tokens at the last step."""
    t = self.config.train
    # Step n may still be running: its compute is training time, not eval time (an eval
    # row's tokens/s was 15x too high).
    jax.block_until_ready(state)
    self.log.record_eval(n, self.evaluate(state, t.eval_batches), t.eval_batches)
    if n == t.steps and self.n_final_eval > t.eval_batches:
      loss = self.evaluate(state, self.n_final_eval)
      self.log.record_eval(n, loss, self.n_final_eval, final=True)

  def save(self, state) -> None:
    """Saves the state (its step already logged); blocking time is not training time."""
    results = {**self.log.results(), **self.log.totals()}
    rule = self.stop_rule
    if rule is not None and rule.fields:  # stopped by it: the stop is in the checkpoint too,
      # so a resume that lost summary.json still knows (stop_rule.stopped_run)
      results.update(status=stop_rule_lib.STATUS, **rule.fields)
    meta = resume_policy.run_meta(
      self.config_dict, self.log.interval_losses, results, self.data_files
    )
    with self.log.paused():
      with run_log.naming_write_errors(self.log.writer):
        self.log.writer.flush()  # a gs:// workdir uploads its curve: never behind a checkpoint
      self.checkpointer.save(state, meta, force=True)

  def stops_by_rule(self) -> bool:
    """The stop rule's verdict once step k's row is logged: process 0 reads metrics.jsonl
    (every segment of the run) and judges, and every process follows its verdict."""
    rule, stop = self.stop_rule, False
    with self.log.paused():
      if jax.process_index() == 0:
        with run_log.naming_write_errors(self.log.writer):
          self.log.writer.flush()  # a gs:// workdir: uploaded before it is read back
        stop = rule.judge(metrics_file.read_metrics(rule.metrics_path), self.reached)
      return preemption.agreed(stop)

  def train(self, state, start: int):
    """(state, status) after training from step `start`: completed, interrupted (saved),
    stopped_early (saved at the stop rule's step k) or diverged (the last finite checkpoint
    kept). Step n's metrics are read while n+1 runs."""
    t = self.config.train
    status, stop, pending = run_status.COMPLETED, t.steps, None
    # A run that starts at or after the rule's step k is not judged (it was, or it resumes a
    # run stopped there with the rule off).
    judge_at = None if self.stop_rule is None or start >= self.stop_rule.k else self.stop_rule.k
    self.reached = start
    if self.signals.should_stop(start):  # signalled during setup or compilation: no training
      status, stop = run_status.INTERRUPTED, start
    for step in range(start, stop):
      state, metrics = self.step_fn(state, self.batches.train(step))
      n = self.reached = step + 1
      self.checkpointer.check()  # a save that ended in an error stops the run here
      if pending is not None and not self.log.record_step(*pending):
        return state, run_status.DIVERGED
      pending = (n, metrics)
      if n % t.eval_every == 0 or n == t.steps:
        self.evaluate_at(state, n)
      if n == judge_at:  # step k's row is logged first: the rule reads it
        ok, pending = self.log.record_step(*pending), None
        if not ok:
          return state, run_status.DIVERGED
        if self.stops_by_rule():
          status = stop_rule_lib.STATUS  # saved below, at step k
          break
      if self.signals.should_stop(n):  # every process stops at the same n
        status = run_status.INTERRUPTED
        break
      if n % t.checkpoint_every == 0 and n < t.steps:
        # Log step n before saving it: a checkpoint never runs ahead of metrics.jsonl, its
        # meta holds the exact interval losses, and a diverged step is never saved.
        if pending is not None:  # else logged already (the stop rule's step)
          ok, pending = self.log.record_step(*pending), None
          if not ok:
            return state, run_status.DIVERGED
        self.save(state)
    if pending is not None and not self.log.record_step(*pending):
      return state, run_status.DIVERGED
    self.save(state)
    return state, status
