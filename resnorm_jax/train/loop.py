"""The training run: run(config, workdir) trains, evaluates, logs and checkpoints.

Order of work: validate everything (config, data, mesh: run_setup.build) before anything
compiles; lock the workdir (one run at a time: workdir.py) and refuse another experiment or
say a completed run has nothing to do, before anything is written; restore or initialize
the sharded state; compile the step ahead of time (timed);
then train: a Trainer reads the device back once per step (one step behind) and writes
metrics, TensorBoard and checkpoints, its bookkeeping in a RunLog; one ExitStack closes the
checkpointer and writers on every exit path; summary.json last. Divergence ends the run
with status "diverged" (a result, not a crash); SIGTERM/SIGINT save at the current step and
end with "interrupted" (with several processes, at the same step on all: preemption.py); a
stop rule (train.stop_when, off by default: stop_rule.py) that judges the run doomed at its
step k saves there and ends it "stopped_early", to be resumed to the end with the rule off.
An I/O fault (a full disk, a failed checkpoint save: noticed at the step after the save
ended) ends it with status "failed": one line naming the file and the free space,
metrics.jsonl cut back to the checkpoint it resumes from, summary.json if it can be written.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.data import batches as batches_lib
from resnorm_jax.data import sources
from resnorm_jax.runs import expected as expected_lib
from resnorm_jax.runs import metrics_file, outcome
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs.expected import Expected
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE
from resnorm_jax.train import (
  banner,
  depth_profile,
  io_errors,
  optim,
  preemption,
  resume_policy,
  run_files,
  run_log,
)
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train import sharding as shard_lib
from resnorm_jax.train import stop_rule as stop_rule_lib
from resnorm_jax.train.io_faults import IOFaults, RunFailed, cut_back_to_checkpoint
from resnorm_jax.train.run_log import RunLog, end_message
from resnorm_jax.train.writers import MetricWriter


def _record_depth_param_table(run_setup, state, start: int, resolved: dict, is_main: bool) -> None:
  """Under a depth parametrization (depth_mup, completep) or muP's width rules (mup), what
  they do to each parameter (group, branch multiplier, Adam lr, eps and weight decay, init
  statistics): printed and kept in config.json as `depth_param_table` (a record, not config:
  same_experiment)."""
  if run_setup.mcfg.depth_param == "sp" and run_setup.mcfg.width_param == "sp":
    return
  rows = optim.group_table(run_setup.config.opt, run_setup.mcfg, state.params)
  resolved["depth_param_table"] = rows
  if is_main:
    print(f"per-parameter groups (init statistics at step {start}):", flush=True)
    print(optim.format_group_table(run_setup.mcfg, rows), flush=True)


SEED_MAX = 2**31 - 1  # a population stacks its members' seeds as int32; PRNG keys wrap at 2^32


def check_seed(config: ConfigDict) -> None:
  """ValueError unless config.seed is an integer in [0, SEED_MAX]: checked before anything
  is written (an unchecked seed of -1 trains, writes a checkpoint, then fails at the first
  batch)."""
  seed = config.seed
  if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
    raise ValueError(f"seed={seed!r} must be an integer in [0, {SEED_MAX}]")


def final_eval_batches(train_cfg: ConfigDict) -> int:
  """Held-out batches of the end-of-run eval: at least train.final_eval_tokens tokens (and
  never fewer than train.eval_batches), so a verdict near the plateau rests on enough text."""
  per_batch = train_cfg.batch_size * train_cfg.seq_len
  return max(train_cfg.eval_batches, -(-train_cfg.final_eval_tokens // per_batch))


def eval_tokens(train_cfg: ConfigDict) -> dict[str, int]:
  """Tokens of the periodic eval (eval/loss) and of the end-of-run eval (eval/final_loss)."""
  per_batch = train_cfg.batch_size * train_cfg.seq_len
  return {
    "periodic": train_cfg.eval_batches * per_batch,
    "final": final_eval_batches(train_cfg) * per_batch,
  }


def default_workdir(config: ConfigDict, overrides: Mapping[str, Any] | None = None) -> str:
  """runs/<config name>-<overrides>-<timestamp> (`postnorm_96L-L12-warmup200-20261130-123614`).

  One process's clock, so single-process runs only.
  """
  label = cli.override_label(overrides or {})
  parts = [config.name, label, time.strftime("%Y%m%d-%H%M%S")]
  return os.path.join("runs", "-".join(p for p in parts if p))


def run(
  config: ConfigDict,
  workdir: str | None = None,
  *,
  overrides: Mapping[str, Any] | None = None,
  argv: Sequence[str] | None = None,
  expected: Expected | None = None,
) -> dict:
  """Trains `config` in `workdir` (default: default_workdir); returns the summary.

  `overrides` ({dotted key: value} given on the command line) name the default workdir;
  `argv` (the command line's arguments) is printed back as the command that resumes an
  interrupted run, with its --workdir. `expected` (a named config's EXPECTED, where it
  applies to this run: train/expected.py) is recorded in summary.json and the end line.
  Signal handlers are installed first: a SIGTERM/SIGINT during setup or compilation stops
  the run as soon as the state exists (saved at its step), never with a traceback.
  """
  with preemption.StopSignals() as signals, preemption.exit_on_peer_failure():
    return _run(config, workdir, signals, overrides, argv, expected)


class Trainer:
  """Drives one run's compiled step: train, evaluate, log, checkpoint, stop on a signal or
  when its stop rule (kw `stop_rule`, a stop_rule.StopRule; None: off) says so."""

  def __init__(self, run_setup: setup_lib.RunSetup, batches: setup_lib.Batches, log: RunLog, **kw):
    self.config, self.batches, self.log = run_setup.config, batches, log
    self.checkpointer: ckpt_lib.Checkpointer = kw["checkpointer"]
    self.signals: preemption.StopSignals = kw["signals"]
    self.config_dict: dict = kw["config_dict"]  # frozen into each checkpoint's meta
    self.data_files: dict | None = kw.get("data_files")  # the data's fingerprint, too
    self.step_fn, self.eval_fn = kw["step_fn"], kw["eval_fn"]  # compiled
    self.stop_rule: stop_rule_lib.StopRule | None = kw.get("stop_rule")
    t = self.config.train
    # Periodic evals use the first train.eval_batches batches; the end-of-run eval adds more
    # of the same stream, up to train.final_eval_tokens tokens.
    self.n_final_eval = final_eval_batches(t)
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
      return _agreed(stop)

  def train(self, state, start: int):
    """(state, status) after training from step `start`: completed, interrupted (saved),
    stopped_early (saved at the stop rule's step k) or diverged (the last finite checkpoint
    kept). Step n's metrics are read while n+1 runs."""
    t = self.config.train
    status, stop, pending = "completed", t.steps, None
    # A run that starts at or after the rule's step k is not judged (it was, or it resumes a
    # run stopped there with the rule off).
    judge_at = None if self.stop_rule is None or start >= self.stop_rule.k else self.stop_rule.k
    self.reached = start
    if self.signals.should_stop(start):  # signalled during setup or compilation: no training
      status, stop = "interrupted", start
    for step in range(start, stop):
      state, metrics = self.step_fn(state, self.batches.train(step))
      n = self.reached = step + 1
      self.checkpointer.check()  # a save that ended in an error stops the run here
      if pending is not None and not self.log.record_step(*pending):
        return state, "diverged"
      pending = (n, metrics)
      if n % t.eval_every == 0 or n == t.steps:
        self.evaluate_at(state, n)
      if n == judge_at:  # step k's row is logged first: the rule reads it
        ok, pending = self.log.record_step(*pending), None
        if not ok:
          return state, "diverged"
        if self.stops_by_rule():
          status = stop_rule_lib.STATUS  # saved below, at step k
          break
      if self.signals.should_stop(n):  # every process stops at the same n
        status = "interrupted"
        break
      if n % t.checkpoint_every == 0 and n < t.steps:
        # Log step n before saving it: a checkpoint never runs ahead of metrics.jsonl, its
        # meta holds the exact interval losses, and a diverged step is never saved.
        if pending is not None:  # else logged already (the stop rule's step)
          ok, pending = self.log.record_step(*pending), None
          if not ok:
            return state, "diverged"
        self.save(state)
    if pending is not None and not self.log.record_step(*pending):
      return state, "diverged"
    self.save(state)
    return state, status


def _workdir(config: ConfigDict, workdir: str | None, overrides) -> str:
  if workdir is not None:
    workdir_lib.check_workdir(workdir)
    return workdir
  if jax.process_count() > 1:  # each host's clock would name a different folder
    raise ValueError(
      f"--workdir is required with {jax.process_count()} processes: a folder every host sees"
    )
  return default_workdir(config, overrides)


def _agreed(ok: bool) -> bool:
  """Process 0's `ok`, on every process (one process: `ok`)."""
  if jax.process_count() == 1:
    return ok
  from jax.experimental import multihost_utils

  return bool(multihost_utils.broadcast_one_to_all(np.int32(ok)))


@contextlib.contextmanager
def _workdir_lock(workdir: str):
  """The workdir's lock for the block, taken by process 0 alone (the workdir is one folder
  every host sees); when it is busy every process refuses (ValueError, exit status 2)."""
  busy: ValueError | None = None
  with contextlib.ExitStack() as held:
    if jax.process_index() == 0:
      try:
        held.enter_context(workdir_lib.hold(workdir))
      except ValueError as e:  # in use, or not writable
        busy = e
    if not _agreed(busy is None):
      raise busy or workdir_lib.WorkdirInUse(f"{workdir} is in use by another run (process 0)")
    yield


def _restore_or_init(
  run_setup: setup_lib.RunSetup, checkpointer, config_dict: dict, workdir: str, data_files: dict
):
  """(state, start step, resumed summary fields, resumed interval losses): the newest intact
  checkpoint, else a fresh state. A checkpoint of another experiment, or of other data, is
  refused (ValueError naming the keys or files) before anything is written."""
  restored = checkpointer.restore_latest(run_setup.abstract, config_dict, data_files)
  if restored is None:
    if epath.Path(workdir, "metrics.jsonl").exists():
      print(f"no checkpoint in {checkpointer.directory}: starting from step 0", flush=True)
    return run_setup.init_state(), 0, {}, []
  state, meta, start = restored
  print(f"resuming from step {start} ({checkpointer.directory})", flush=True)
  resumed, interval = resume_policy.resumed_run(meta)
  note_extension(resumed, meta, run_setup.config.train.steps, start)
  switched = resume_policy.continued_from(
    meta, meta.get(ckpt_lib.WRITTEN_BY), start, ckpt_lib.SINGLE_RUN["program"]
  )
  if switched is not None:
    resumed["continued_from"] = switched
    if switched["step"] == start:
      writer = switched["written_by"]
      print(
        f"note: the checkpoint of step {start} was written by {writer.get('program')} "
        f"({writer.get('members')} members, this one in slot {writer.get('slot')}); going on "
        "as a single run, the same experiment but another XLA program: the losses after this "
        "step may differ in the last bits from that program's (summary.json: continued_from)",
        flush=True,
      )
  return state, start, resumed, interval


def note_extension(resumed: dict, meta: dict, steps: int, start: int) -> None:
  """Records in `resumed` (summary.json's `extended`) and says when the run from the
  checkpoint of `start` goes on as a run of another train.steps than it recorded (only an
  extension gets here: run_files.completed_run refuses the rest)."""
  extended = resume_policy.extension(meta, steps, start)
  if extended is None:
    return
  resumed["extended"] = extended
  last = extended[-1]
  if last["step"] == start and last["to_steps"] == steps:
    print(
      f"extending the run from train.steps={last['from_steps']} to {steps} at step {start} "
      "(its lr schedule does not depend on the total; summary.json: extended)",
      flush=True,
    )


def _run(
  config: ConfigDict,
  workdir: str | None,
  signals: preemption.StopSignals,
  overrides: Mapping[str, Any] | None = None,
  argv: Sequence[str] | None = None,
  expected: Expected | None = None,
) -> dict:
  wall_start = time.time()
  setup_lib.keep_freed_host_memory()
  shard_lib.maybe_initialize_distributed(config.dist)
  signals.after_distributed_init()  # several processes: a stop is agreed by all
  check_seed(config)
  run_setup = setup_lib.build(config)  # everything validated before anything compiles
  workdir = _workdir(config, workdir, overrides)
  corpus = sources.load_corpus(config.data, run_setup.mcfg.vocab_size, config.train.seq_len)
  # One run per workdir for the run's whole life, summary included; a second is refused
  # before it reads anything: it would resume this one's checkpoint and rewrite its files.
  lock = contextlib.ExitStack()
  try:
    workdir_lib.make_writable(workdir)  # a read-only or unmakeable folder: bad input, exit 2
    lock.enter_context(_workdir_lock(workdir))
  except workdir_lib.NotWritable:  # unless it holds this run completed: nothing to write
    done = run_files.completed_run(config, workdir)
    if done is None:
      raise
    print(f"already completed at step {done['steps']}: nothing to do (read only)", flush=True)
    print(end_message(done, workdir, None), flush=True)
    return done
  with lock:
    done = run_files.completed_run(config, workdir)
    if done is not None:  # a rerun of a finished run: nothing to train, nothing to rewrite
      print(f"already completed at step {done['steps']}: nothing to do", flush=True)
      print(end_message(done, workdir, None), flush=True)
      return done
    stopped = stop_rule_lib.stopped_run(config, workdir)
    if stopped is not None:  # stopped on purpose, and the rule is still set: as completed
      print(f"already stopped early at step {stopped['steps']}: nothing to do", flush=True)
      print(end_message(stopped, workdir, argv), flush=True)
      return stopped
    return _train(run_setup, corpus, workdir, signals, argv, wall_start, expected)


def _short_heldout(corpus, t: ConfigDict) -> dict[str, int]:
  """{final_eval_distinct_tokens: N} and a warning, once, when the held-out split has fewer
  tokens than the end-of-run eval asks for (its windows repeat); else {}."""
  asked = eval_tokens(t)["final"]
  if len(corpus.val) >= asked:
    return {}
  n = final_eval_batches(t)
  distinct = batches_lib.distinct_eval_targets(
    len(corpus.val), n, batch_size=t.batch_size, seq_len=t.seq_len
  )
  print(
    f"warning: the held-out split has {len(corpus.val):,} tokens, fewer than the {asked:,} "
    f"the end-of-run eval scores: it scores {distinct:,} distinct tokens, with repeats "
    "(hold out more: data.val_fraction, or prepare_data --val_fraction)",
    flush=True,
  )
  return {"final_eval_distinct_tokens": distinct}


def _metric_writer(config: ConfigDict, workdir: str, start: int, baselines, is_main: bool):
  """The run's MetricWriter (metrics.jsonl cut back to `start`, TensorBoard, depth images); an
  I/O error is a RunFailed line (nothing trained yet, no summary to write)."""
  t = config.train
  depth_images, profile_every = depth_profile.drawing(
    config.diag.get("depth_images", "eval"), t.eval_every
  )
  try:
    return MetricWriter(
      workdir,
      enabled=is_main,
      truncate_after=start,
      profile_every=profile_every,  # diag.depth_images: at each evaluation, at the end, never
      depth_images=depth_images,
      # The plateau of the periodic eval curve it is drawn beside: its own eval set's.
      no_context_loss=baselines[EVAL_SET_BASELINE],
      eval_tokens=eval_tokens(t),
    )
  except OSError as e:
    raise RunFailed(io_errors.describe_io_error(e, workdir, "writing metrics.jsonl")) from e


def _train(
  run_setup: setup_lib.RunSetup,
  corpus,
  workdir: str,
  signals: preemption.StopSignals,
  argv: Sequence[str] | None,
  wall_start: float,
  expected: Expected | None = None,
) -> dict:
  """Trains in a locked workdir, resuming its checkpoint if any; writes summary.json last."""
  config = run_setup.config
  t, vocab = config.train, run_setup.mcfg.vocab_size
  is_main = jax.process_index() == 0
  baselines = outcome.no_context_losses(corpus, t, vocab)
  short = _short_heldout(corpus, t)  # a held-out split smaller than the end-of-run eval
  config_dict = config.to_dict()
  # A checkpoint belongs to its data: a prepared folder's manifest fingerprint is frozen too.
  config_dict["data_fingerprint"] = corpus.split.get("manifest", {}).get("fingerprint")
  faults = IOFaults()
  with contextlib.ExitStack() as resources:  # closed on every exit path, errors included
    try:
      checkpointer = ckpt_lib.Checkpointer(os.path.join(workdir, "ckpt"), keep=t.keep_checkpoints)
    except OSError as e:
      raise RunFailed(io_errors.describe_io_error(e, workdir, "creating ckpt/")) from e
    resources.callback(faults.close, checkpointer.close)
    state, start, resumed, interval = _restore_or_init(
      run_setup, checkpointer, config_dict, workdir, corpus.fingerprint
    )
    resolved = run_files.resolved_config(config, run_setup.mcfg, corpus.split, corpus.fingerprint)
    _record_depth_param_table(run_setup, state, start, resolved, is_main)
    if is_main:
      run_files.write_config(workdir, resolved, start)
    batches = setup_lib.batches(run_setup, corpus)
    extra = {"devices": shard_lib.device_info(), "workdir": workdir}  # a CPU fallback shows
    compile_start = time.time()
    step_fn = run_setup.compile_step()
    extra["compile_seconds"] = time.time() - compile_start
    eval_fn = run_setup.compile_eval()
    print(banner.run_banner(run_setup, corpus, baselines, extra), flush=True)
    writer = _metric_writer(config, workdir, start, baselines, is_main)
    # TensorBoard's warning held for a full disk: said after the run, unless its error did.
    resources.callback(faults.close, functools.partial(writer.close, release_warning=False))
    log = RunLog(config, run_setup.schedule, writer, resumed, interval)
    rule = stop_rule_lib.for_run(t, workdir, baselines["unigram_entropy"])
    log.wall_start, log.compile_seconds = wall_start, extra["compile_seconds"]
    trainer = Trainer(
      run_setup,
      batches,
      log,
      checkpointer=checkpointer,
      signals=signals,
      config_dict=config_dict,
      data_files=corpus.fingerprint,
      step_fn=step_fn,
      eval_fn=eval_fn,
      stop_rule=rule,
    )
    with faults.caught():
      state, status = trainer.train(state, start)
    final_step = trainer.reached if faults.error else int(jax.device_get(state.step))
  writer.release_warning(say=faults.error is None)
  summary = run_files.summary(
    status if faults.error is None else "failed",
    final_step,
    log,
    checkpointer,
    config,
    baselines=baselines,
    short=short,
    data_split=corpus.split,
    devices=extra["devices"],
    provenance=resolved["provenance"],
  )
  if writer.tb_error:  # TensorBoard's curves stopped there; metrics.jsonl has every row
    summary["tensorboard_error"] = writer.tb_error
  if summary["status"] == stop_rule_lib.STATUS:  # stop_rule, stop_score, stop_threshold, stop_step
    summary.update(rule.fields)
  if faults.error is not None:
    cut_back_to_checkpoint(summary, checkpointer, faults, workdir, is_main)
  # trained | stuck | diverged | interrupted | stopped_early
  run_files.add_outcome(summary, workdir, vocab)
  if expected is not None:
    summary["expected"] = expected_lib.record(expected, summary.get("outcome"))
  if is_main:
    # After the fault's one error line (a full disk: free space, then resume), summary.json
    # and TensorBoard's HParams that cannot be written are the same fault: not said again.
    quiet = faults.error is not None
    try:
      run_files.write_summary(workdir, config, summary, quiet=quiet)  # and TensorBoard's HParams
    except OSError:
      if not quiet:
        raise
  print(end_message(summary, workdir, argv), flush=True)
  return summary
