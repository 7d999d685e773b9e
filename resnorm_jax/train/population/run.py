"""A sweep as one program: runs whose configs differ only in opt.lr and seed, trained by one
vmapped step on one device (population.py), each member writing the run folder its single run
(loop.py) would write.

A member is an ordinary run: config.json, metrics.jsonl and TensorBoard through its own
MetricWriter, its own RunLog (the lr of its own schedule), checkpoints of its slice of the
state in the single-run format (a single run of its config resumes them; a population goes on
only from its own, below), summary.json with loop.py's fields, and TensorBoard hparams. It
trains on the batches its single run draws (run_setup.Batches of its own seed); the held-out
batches do not depend on the seed and are shared. One run_setup.build, one corpus, one compiled
step. As loop.py does, each member's workdir is locked for the program's
life, and a workdir holding another experiment is refused before anything is written. Its
members come from a points file (population/points.py); config.json and summary.json are
written by the single run's code (run_files.py), the banner beside the run's (banner.py).

An I/O fault (a full disk, a failed checkpoint save) ends every live member of the program
"failed" as loop.py ends a run: one line each naming the file and the free space, its
metrics.jsonl cut back to its newest checkpoint, its summary.json when the disk allows, exit
status 1 (experiments/train_population.py); the same command resumes.

A member whose loss or gradient goes non-finite ends "diverged" at that step: its summary is
written, its last finite checkpoint kept and its files closed; its slot is held frozen and the
others go on. A SIGINT/SIGTERM saves every live member at the current step and ends them
"interrupted". The same call resumes, in the same program: one slot per point of the points
file, in its order, whatever each member's step. The program starts at the lowest step of a
member to train; a member whose checkpoint is at a later step is held frozen in its slot
(population.train_steps' `active`: no update, nothing logged or saved) until the program
reaches its step, and a completed member is held for the whole run. A member's slice of the
program depends on no other slot, so every member's losses are those of the population never
interrupted, bit for bit. Its checkpoints record the program that wrote them (its size and
the member's slot): one written by another program (a single run, a population of another
size, another slot) would train on as a different XLA program, its losses off in the last
bits, and is refused before compiling, naming the command that continues it. A stop rule
(train.stop_when) is not applied to members: refused before compiling in one line.

Output: the program's line, then each member's lines as its single run prints them
(step lines, divergence, end message), prefixed with its folder name: `[name] step ...`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.data import fs, sources
from resnorm_jax.runs import end_line, outcome, record_files, status
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE, classify
from resnorm_jax.train import (
  banner,
  depth_profile,
  eval_budget,
  io_errors,
  io_faults,
  loop,
  preemption,
  resume_policy,
  run_files,
  run_log,
  stop_rule,
)
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train import sharding as shard_lib
from resnorm_jax.train.optimizers.schedules import make_schedule
from resnorm_jax.train.population import points as population_points
from resnorm_jax.train.population import program as population
from resnorm_jax.train.population import trainer as population_trainer
from resnorm_jax.train.population.member import Member, Prefixed, Shared
from resnorm_jax.train.writers import MetricWriter


def run(
  configs: Sequence[ConfigDict],
  workdirs: Sequence[str],
  *,
  argv: Sequence[str] | None = None,
  commands: Sequence[str] | None = None,
) -> list[dict]:
  """Trains `configs` (differing only in opt.lr and seed) as one program, member i in
  `workdirs[i]`; returns their summaries. `argv`: the command line, printed back as the
  command that resumes an interrupted population (and recorded in its checkpoints);
  `commands`: each member's single run (population_points.single_run_commands), named when
  its checkpoint is a single run's. ValueError on bad input, before compiling.
  """
  with preemption.StopSignals() as signals:
    return _run(list(configs), list(workdirs), signals, argv, commands)


def _run(configs, workdirs, signals: preemption.StopSignals, argv, commands) -> list[dict]:
  wall_start = time.time()
  population_points.check_members(configs, workdirs)
  ruled = sorted({stop_rule.path_of(c.train) for c in configs} - {""})
  if ruled:  # one program steps every member: a rule would have to stop members one by one
    raise ValueError(
      f"train.stop_when={ruled[0]!r}: a population does not apply a stop rule; train its "
      "points as single runs (python -m experiments.train, or scripts/sweep.py without --vmap)"
    )
  if jax.process_count() > 1:
    raise ValueError(f"a population trains in one process ({jax.process_count()} here)")
  setup_lib.keep_freed_host_memory()
  devices = jax.devices()[:1]
  run_setup = setup_lib.build(configs[0], devices)  # everything validated before anything compiles
  for c in configs[1:]:
    setup_lib.validate(c)  # its own opt.lr
  t, vocab = configs[0].train, run_setup.mcfg.vocab_size
  corpus = sources.load_corpus(configs[0].data, vocab, t.seq_len)
  baselines, info = outcome.no_context_losses(corpus, t, vocab), shard_lib.device_info(devices)
  shared = Shared(run_setup, corpus, baselines, info, wall_start)
  resume = shlex.join(["python", "-m", "experiments.train_population", *argv]) if argv else None
  with contextlib.ExitStack() as resources:  # every member closed on every exit path
    members = []
    for slot, (c, w) in enumerate(zip(configs, workdirs, strict=True)):
      writer = population_points.written_by(len(configs), slot, resume)
      single = commands[slot] if commands else _single_run_hint(w)
      members.append(_open(shared, c, w, resources, writer, single))
    live = [m for m in members if m.summary is None]
    for m in live:
      population_trainer.write_member_config(m, shared)
    faults = io_faults.IOFaults()
    if live:
      _train(shared, members, signals, faults)
    for m in live:  # an I/O fault: every member not ended yet ends failed
      if m.summary is None:
        _fail(shared, m, faults, members)
  if resume and any(m.summary["status"] == status.INTERRUPTED for m in members):
    print(f"resume: {resume}", flush=True)
  return [m.summary for m in members]


def _single_run_hint(workdir: str) -> str:
  """The single run of a member whose point is not known (run() called without commands)."""
  return f"python -m experiments.train --config=<its config> <its overrides> --workdir={workdir}"


def _open(
  shared: Shared, config: ConfigDict, workdir: str, resources, writer: dict, single: str
) -> Member:
  """A member in its locked workdir (held in `resources`) with its checkpointer (recording
  `writer` in each checkpoint) and batches, restored from its newest checkpoint (state None:
  a fresh start); `summary` set when its run is already completed. Another experiment in the
  workdir or its checkpoint, or a checkpoint written by another program, is refused
  (ValueError in one line) before anything is written."""
  read_only = ""
  try:  # a read-only or unmakeable folder: bad input in one line (exit 2), as a single run
    workdir_lib.make_writable(workdir)
    # One run per workdir, as loop.py holds it: a second would rewrite this one's files.
    resources.enter_context(workdir_lib.hold(workdir))
  except workdir_lib.NotWritable:  # unless it holds this run completed: nothing to write
    if run_files.completed_run(config, workdir) is None:
      raise
    read_only = ", read only"
  out = Prefixed(f"[{os.path.basename(os.path.normpath(workdir))}] ", sys.stdout)
  config_dict = config.to_dict()
  config_dict["data_fingerprint"] = shared.corpus.split.get("manifest", {}).get("fingerprint")
  m = Member(config, workdir, config_dict, out)
  done = run_files.completed_run(config, workdir)
  if done is not None:  # a rerun of a finished run: nothing to train, nothing to rewrite
    m.summary = done
    if not read_only:  # but a lost config.json (as the single run)
      with contextlib.redirect_stdout(out):
        run_files.rebuild_lost_config(workdir, config, shared.run_setup.mcfg, shared.corpus, done)
    m.print(
      f"already completed at step {done['steps']}: nothing to do (held in its slot{read_only})",
      end_line.end_message(done, workdir, None),
    )
    return m
  with contextlib.redirect_stdout(out):
    m.checkpointer = ckpt_lib.Checkpointer(
      os.path.join(workdir, record_files.CHECKPOINTS),
      keep=config.train.keep_checkpoints,
      written_by=writer,
    )
  resources.callback(m.close)
  m.batches = setup_lib.Batches(shared.corpus, config, shared.run_setup.batch_sharding)
  checkpointer = m.checkpointer
  with contextlib.redirect_stdout(out):
    restored = checkpointer.restore_latest(
      shared.run_setup.abstract, config_dict, shared.corpus.fingerprint
    )
  if restored is None:
    if epath.Path(workdir, record_files.METRICS).exists():
      m.print(f"no checkpoint in {checkpointer.directory}: starting from step 0")
    return m
  m.state, meta, m.start = restored
  wrote = meta.get(ckpt_lib.WRITTEN_BY)
  refusal = population_points.writer_refusal(
    wrote, writer["members"], writer["slot"], workdir, m.start, single
  )
  if refusal:
    raise ValueError(refusal)
  m.resumed, m.interval = resume_policy.resumed_run(meta, workdir, m.start)
  m.print(f"resuming from step {m.start} ({checkpointer.directory})")
  with contextlib.redirect_stdout(out):
    loop.note_extension(m.resumed, meta, config.train.steps, m.start)
  if wrote is None:
    m.print(
      f"note: the checkpoint of step {m.start} does not record the program that wrote it: "
      "continued here, its losses equal to a run never interrupted only if this same "
      "population wrote it"
    )
  return m


def _fault_owner(faults: io_faults.IOFaults, m: Member, members: Sequence[Member]):
  """(name, workdir) of the member whose file the fault names, when it is not `m`: one
  program stops every member, and each member's line names its own folder otherwise."""
  path = faults.path()
  if path is None or fs.is_remote(path):
    return None
  for other in members:
    root = os.path.abspath(other.workdir)
    if os.path.commonpath([root, os.path.abspath(path)]) == root:
      return None if other is m else (os.path.basename(os.path.normpath(other.workdir)), root)
  return None


def _fail(shared: Shared, m: Member, faults: io_faults.IOFaults, members: Sequence[Member]) -> None:
  """Ends member m after the program's I/O fault, as loop.py ends a failed run: files closed,
  metrics.jsonl cut back to its newest checkpoint, one line, summary.json if it can be
  written."""
  faults.close(m.close)
  reached = m.reached if m.log is not None else m.start
  m.summary = (
    population_trainer.member_summary(shared, m, status.FAILED, reached)
    if m.log is not None
    else None
  )
  if m.summary is None:  # it never started: what its checkpoint holds
    m.summary = {"status": status.FAILED, "steps": m.start, **m.resumed, "provenance": m.provenance}
  with contextlib.redirect_stdout(m.out):
    owner = _fault_owner(faults, m, members)
    io_faults.cut_back_to_checkpoint(m.summary, m.checkpointer, faults, m.workdir, True, owner)
  m.summary["outcome"] = classify(m.summary, vocab_size=shared.run_setup.mcfg.vocab_size)
  try:
    cli.write_json(os.path.join(m.workdir, record_files.SUMMARY), m.summary)
  except OSError as e:
    m.print(f"error: {io_errors.describe_io_error(e, m.workdir, 'writing summary.json')}")


def _slot_states(run_setup: setup_lib.RunSetup, members: Sequence[Member]):
  """The program's stacked state, one slot per member: its restored state, else its fresh
  one (one vmapped init of every slot, as the program never interrupted starts: member i
  exactly as its single run's); a completed member's slot holds its fresh state, frozen."""
  c = members[0].config
  init = jax.jit(lambda s: population.init_states(run_setup.model_def, c.opt, c.train.steps, s))
  states = init(jnp.asarray([m.config.seed for m in members], jnp.int32))
  if all(m.state is None for m in members):
    return states
  slots = [
    population.member(states, i) if m.state is None else m.state for i, m in enumerate(members)
  ]
  for m in members:
    m.state = None  # the stacked copy is the only one kept
  return population.stack(slots)


def population_step(run_setup: setup_lib.RunSetup, config: ConfigDict):
  """jit of (lrs, states, member batches, active) -> (states, metrics): states donated;
  member i's batch is a pair of [B, T] arrays, stacked inside the program; a member whose
  `active` entry is False keeps its state (None: every member trains)."""
  md, steps, per_layer = run_setup.model_def, config.train.steps, bool(config.diag.per_layer)

  def step(lrs, states, member_batches, active=None):
    batch = tuple(jnp.stack(xs) for xs in zip(*member_batches, strict=True))
    return population.train_steps(
      md,
      config.opt,
      steps,
      lrs,
      states,
      batch,
      active=active,
      per_layer=per_layer,
      z_loss_weight=config.train.get("z_loss", 0.0),
    )

  return jax.jit(step, donate_argnums=1)


def _train(shared: Shared, members: Sequence[Member], signals, faults: io_faults.IOFaults) -> None:
  """Trains every member to be trained as one program of one slot per member, from the
  lowest step of one of them, to their ends; an I/O fault is kept in `faults` (the members it
  stopped are left to _fail)."""
  run_setup = shared.run_setup
  live = [m for m in members if m.summary is None]
  config, start = live[0].config, min(m.start for m in live)
  device = jax.devices()[0]
  states = jax.device_put(_slot_states(run_setup, members), device)
  lrs = jax.device_put(jnp.asarray([m.config.opt.lr for m in members], jnp.float32), device)
  member_batches = (run_setup.abstract_batch,) * len(members)
  active = jax.device_put(np.ones(len(members), np.bool_), device)
  compile_start = time.time()
  step_fn = population_step(run_setup, config).lower(lrs, states, member_batches, active)
  step_fn = step_fn.compile()
  compile_seconds = time.time() - compile_start
  eval_fn = jax.jit(functools.partial(population.eval_steps, run_setup.model_def))
  eval_fn = eval_fn.lower(states, run_setup.abstract_batch).compile()
  configs = [m.config for m in members]
  print(banner.population_banner(shared, configs, start, compile_seconds), flush=True)
  depth_images, profile_every = depth_profile.drawing(
    config.diag.get("depth_images", "eval"), config.train.eval_every
  )
  for m in live:
    if m.start > start:
      m.print(f"held in its slot until the population reaches step {m.start}")
    m.compile_seconds, m.population_size = compile_seconds, len(members)
    schedule = make_schedule(m.config.opt, m.config.train.steps)  # its own peak lr
    with faults.caught():
      m.writer = MetricWriter(
        m.workdir,
        truncate_after=m.start,
        profile_every=profile_every,  # diag.depth_images: at each evaluation, the end, never
        depth_images=depth_images,
        no_context_loss=shared.baselines[EVAL_SET_BASELINE],  # the periodic eval set's plateau
        eval_tokens=eval_budget.eval_tokens(config.train),
      )
    if faults.error is not None:
      return
    m.log = run_log.RunLog(
      m.config, schedule, m.writer, m.resumed, m.interval, m.checkpointer.save_seconds
    )
    # Wall and compile time of every segment: the checkpoint's plus this program's.
    m.log.wall_start, m.log.compile_seconds = shared.wall_start, compile_seconds
  trainer = population_trainer.PopulationTrainer(shared, members, step_fn, eval_fn, lrs, signals)
  with faults.caught():
    trainer.train(states, start)
