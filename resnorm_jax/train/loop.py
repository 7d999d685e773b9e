"""The training run: run(config, workdir) trains, evaluates, logs and checkpoints.

Order of work: validate everything (config, data, mesh: run_setup.build) before anything
compiles; lock the workdir (one run at a time: workdir.py) and refuse another experiment or
say a completed run has nothing to do, before anything is written; restore or initialize
the sharded state; compile the step ahead of time (timed); then train: a Trainer
(trainer.py) reads the device back once per step (one step behind) and writes metrics,
TensorBoard and checkpoints, its bookkeeping in a RunLog; one ExitStack closes the
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
from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.data import sources
from resnorm_jax.runs import expected as expected_lib
from resnorm_jax.runs import outcome, record_files
from resnorm_jax.runs import status as run_status
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs.end_line import end_message
from resnorm_jax.runs.expected import Expected
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE
from resnorm_jax.train import (
  banner,
  depth_profile,
  eval_budget,
  io_errors,
  preemption,
  resume_policy,
  run_files,
)
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train import sharding as shard_lib
from resnorm_jax.train import stop_rule as stop_rule_lib
from resnorm_jax.train import trainer as trainer_lib
from resnorm_jax.train.io_faults import IOFaults, RunFailed, cut_back_to_checkpoint
from resnorm_jax.train.optimizers import group_table
from resnorm_jax.train.run_log import RunLog
from resnorm_jax.train.writers import MetricWriter


def _record_depth_param_table(run_setup, state, start: int, resolved: dict, is_main: bool) -> None:
  """Under a depth parametrization (depth_mup, completep) or muP's width rules (mup), what
  they do to each parameter (group, branch multiplier, Adam lr, eps and weight decay, init
  statistics): printed and kept in config.json as `depth_param_table` (a record, not config:
  same_experiment)."""
  if run_setup.mcfg.depth_param == "sp" and run_setup.mcfg.width_param == "sp":
    return
  rows = group_table.group_table(run_setup.config.opt, run_setup.mcfg, state.params)
  resolved["depth_param_table"] = rows
  if is_main:
    print(f"per-parameter groups (init statistics at step {start}):", flush=True)
    print(group_table.format_group_table(run_setup.mcfg, rows), flush=True)


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


def _workdir(config: ConfigDict, workdir: str | None, overrides) -> str:
  if workdir is not None:
    workdir_lib.check_workdir(workdir)
    return workdir
  if jax.process_count() > 1:  # each host's clock would name a different folder
    raise ValueError(
      f"--workdir is required with {jax.process_count()} processes: a folder every host sees"
    )
  return default_workdir(config, overrides)


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
    if not preemption.agreed(busy is None):
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
    if epath.Path(workdir, record_files.METRICS).exists():
      print(f"no checkpoint in {checkpointer.directory}: starting from step 0", flush=True)
    return run_setup.init_state(), 0, {}, []
  state, meta, start = restored
  print(f"resuming from step {start} ({checkpointer.directory})", flush=True)
  resumed, interval = resume_policy.resumed_run(meta, workdir, start)
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
  setup_lib.check_seed(config)  # (validate checks it too: a sweep before any point runs)
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
    if run_files.lost_config_json(workdir):
      print("WARNING: config.json is not rebuilt: the folder is read only", flush=True)
    print(f"already completed at step {done['steps']}: nothing to do (read only)", flush=True)
    print(end_message(done, workdir, None), flush=True)
    return done
  with lock:
    done = run_files.completed_run(config, workdir)
    if done is not None:  # a rerun of a finished run: nothing to train, nothing to rewrite
      if jax.process_index() == 0:  # but a lost config.json is rebuilt (sample reads it)
        run_files.rebuild_lost_config(workdir, config, run_setup.mcfg, corpus, done)
      print(f"already completed at step {done['steps']}: nothing to do", flush=True)
      print(end_message(done, workdir, None), flush=True)
      return done
    stopped = stop_rule_lib.stopped_run(config, workdir)
    if stopped is not None:  # stopped on purpose, and the rule is still set: as completed
      print(f"already stopped early at step {stopped['steps']}: nothing to do", flush=True)
      print(end_message(stopped, workdir, argv), flush=True)
      return stopped
    return _train(run_setup, corpus, workdir, signals, argv, wall_start, expected)


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
      eval_tokens=eval_budget.eval_tokens(t),
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
  short = eval_budget.short_heldout(corpus, t)  # a held-out split smaller than the end-of-run eval
  config_dict = config.to_dict()
  # A checkpoint belongs to its data: a prepared folder's manifest fingerprint is frozen too.
  config_dict["data_fingerprint"] = corpus.split.get("manifest", {}).get("fingerprint")
  faults = IOFaults()
  with contextlib.ExitStack() as resources:  # closed on every exit path, errors included
    try:
      checkpointer = ckpt_lib.Checkpointer(
        os.path.join(workdir, record_files.CHECKPOINTS), keep=t.keep_checkpoints
      )
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
    log = RunLog(config, run_setup.schedule, writer, resumed, interval, checkpointer.save_seconds)
    rule = stop_rule_lib.for_run(t, workdir, baselines["unigram_entropy"])
    log.wall_start, log.compile_seconds = wall_start, extra["compile_seconds"]
    trainer = trainer_lib.Trainer(
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
    status if faults.error is None else run_status.FAILED,
    final_step,
    log,
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
  written = _write_summary(workdir, config, summary, quiet=faults.error is not None)
  print(end_message(summary, workdir, argv, summary_written=written), flush=True)
  return summary


def _write_summary(workdir: str, config: ConfigDict, summary: dict, quiet: bool) -> bool:
  """summary.json and TensorBoard's HParams, by process 0; False when the disk refused
  summary.json after the run's fault (`quiet`: its one error line said it, not said again).
  A disk that fills at the summary itself is the run's only fault: RunFailed, one line."""
  if jax.process_index() != 0:
    return True  # process 0's to write
  try:
    run_files.write_summary(workdir, config, summary, quiet=quiet)  # and TensorBoard's HParams
  except OSError as e:
    unwritten = io_errors.describe_io_error(e, workdir, f"writing {record_files.SUMMARY}")
    if not quiet:
      raise RunFailed(
        f"{unwritten}; the run ended {summary['status']} at step {summary['steps']} without "
        "it: free space, then the same command writes it (from the newest checkpoint)"
      ) from None
    return False
  return True
