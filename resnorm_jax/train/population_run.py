"""A sweep as one program: runs whose configs differ only in opt.lr and seed, trained by one
vmapped step on one device (population.py), each member writing the run folder its single run
(loop.py) would write.

A member is an ordinary run: config.json, metrics.jsonl and TensorBoard through its own
MetricWriter, its own RunLog (the lr of its own schedule), checkpoints of its slice of the
state in the single-run format (a single run of its config resumes them, and a population
resumes a single run's), summary.json with loop.py's fields, and TensorBoard hparams. It
trains on the batches its single run draws (run_setup.Batches of its own seed); the held-out
batches do not depend on the seed and are shared. One run_setup.build, one corpus, one compiled
step per sub-population. As loop.py does, each member's workdir is locked for the program's
life, and a workdir holding another experiment is refused before anything is written.

An I/O fault (a full disk, a failed checkpoint save) ends every live member of the program
"failed" as loop.py ends a run: one line each naming the file and the free space, its
metrics.jsonl cut back to its newest checkpoint, its summary.json when the disk allows, exit
status 1 (experiments/train_population.py); the same command resumes.

A member whose loss or gradient goes non-finite ends "diverged" at that step: its summary is
written, its last finite checkpoint kept and its files closed; train_step keeps its state
frozen and the others go on. A SIGINT/SIGTERM saves every live member at the current step and
ends them "interrupted". The same call resumes: each member from its newest checkpoint, members
at different steps as separate sub-populations (by start step, lowest first), completed
members skipped.

Output: a line per sub-population, then each member's lines as its single run prints them
(step lines, divergence, end message), prefixed with its folder name: `[name] step ...`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.config.same_experiment import VMAPPED_KEYS
from resnorm_jax.data import corpora, sources
from resnorm_jax.data.fs import read_json
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import (
  escape,
  io_errors,
  io_faults,
  loop,
  optim,
  outcome,
  population,
  preemption,
  provenance,
  resume_policy,
  run_log,
)
from resnorm_jax.train import hparams as hparams_lib
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train import sharding as shard_lib
from resnorm_jax.train import workdir as workdir_lib
from resnorm_jax.train.outcome import EVAL_SET_BASELINE, classify
from resnorm_jax.train.writers import MetricWriter

POINT_KEYS = frozenset({"config", "overrides", "workdir"})
_ABSENT = "<absent>"


def differing_keys(configs: Sequence[ConfigDict]) -> list[str]:
  """Dotted config keys (`name` included) whose values differ between `configs`, apart from
  the vmapped ones (VMAPPED_KEYS)."""
  flats = [resume_policy.flat_config(c.to_dict()) for c in configs]
  keys = set().union(*flats) - set(VMAPPED_KEYS)
  return sorted(
    k for k in keys if any(f.get(k, _ABSENT) != flats[0].get(k, _ABSENT) for f in flats[1:])
  )


def check_members(configs: Sequence[ConfigDict], workdirs: Sequence[str]) -> None:
  """ValueError unless there is one distinct workdir per config and the configs differ only
  in VMAPPED_KEYS (naming the keys that differ)."""
  if not configs or len(configs) != len(workdirs):
    raise ValueError(f"{len(configs)} configs and {len(workdirs)} workdirs: need one per member")
  folders = [ckpt_lib.absolute(w) for w in workdirs]
  repeated = sorted({w for w in folders if folders.count(w) > 1})
  if repeated:
    raise ValueError(f"members share a workdir: {', '.join(repeated)}")
  for config, workdir in zip(configs, workdirs, strict=True):
    try:
      loop.check_seed(config)
    except ValueError as e:
      raise ValueError(f"member {workdir}: {e}") from None
  keys = differing_keys(configs)
  if keys:
    raise ValueError(
      f"population members may differ only in {', '.join(VMAPPED_KEYS)}; these keys differ: "
      + ", ".join(keys)
    )


def member_config(spec: str, overrides: dict[str, Any]) -> ConfigDict:
  """The locked config of FILE[:ARG] with `overrides` ({dotted key: value}); ValueError."""
  config = cli.load_config_file(spec)
  cli.refuse_moved_keys(overrides, where="overrides")
  for key, value in overrides.items():  # one at a time: the error names its key
    try:
      config.update_from_flattened_dict({key: value})
    except (KeyError, AttributeError, TypeError) as e:
      msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
      raise ValueError(f"{spec}: override {key}={value!r}: {msg}") from None
  return config


def load_points(path: str) -> tuple[list[ConfigDict], list[str]]:
  """(configs, workdirs) of a points file: a JSON list of {config, overrides, workdir}."""
  try:
    with open(path) as f:
      points = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"--points={path}: {e}") from None
  if not isinstance(points, list) or not points:
    raise ValueError(f"--points={path}: expected a non-empty JSON list of points")
  configs, workdirs = [], []
  for i, p in enumerate(points):
    if not isinstance(p, dict) or not {"config", "workdir"} <= set(p) or set(p) - POINT_KEYS:
      raise ValueError(
        f"--points={path}[{i}] = {p!r}: expected {{'config', 'workdir', 'overrides'}} "
        "('overrides' optional)"
      )
    overrides = p.get("overrides", {})
    if not isinstance(overrides, dict):
      raise ValueError(f"--points={path}[{i}]: 'overrides' must be a dict")
    configs.append(member_config(p["config"], overrides))
    workdirs.append(str(p["workdir"]))
  return configs, workdirs


class _Prefixed(io.TextIOBase):
  """A text stream writing each line to `out` behind a prefix: a member's lines in the
  population's output, told apart by its folder name."""

  def __init__(self, prefix: str, out: TextIO):
    self.prefix, self.out, self._line_start = prefix, out, True

  def write(self, s: str) -> int:
    for piece in s.splitlines(keepends=True):
      if self._line_start:
        self.out.write(self.prefix)
      self.out.write(piece)
      self._line_start = piece.endswith("\n")
    return len(s)

  def flush(self) -> None:
    self.out.flush()


@dataclasses.dataclass(frozen=True)
class Shared:
  """What every member has in common: the run setup, corpus, baselines, devices."""

  run_setup: setup_lib.RunSetup
  corpus: corpora.Corpus
  baselines: dict[str, float]
  devices: dict
  wall_start: float


@dataclasses.dataclass(eq=False)
class Member:
  """One member's run: its config and folder, and what it writes there."""

  config: ConfigDict
  workdir: str
  config_dict: dict  # frozen into each checkpoint's meta
  out: TextIO  # where its lines go
  checkpointer: ckpt_lib.Checkpointer | None = None  # None: completed before, not reopened
  batches: setup_lib.Batches | None = None
  state: Any = None  # its restored or fresh TrainState, until its sub-population starts
  start: int = 0
  resumed: dict = dataclasses.field(default_factory=dict)
  interval: list = dataclasses.field(default_factory=list)
  writer: MetricWriter | None = None
  log: run_log.RunLog | None = None
  compile_seconds: float = 0.0
  population_size: int = 1
  provenance: dict | None = None  # what its config.json records
  summary: dict | None = None  # set when it ends (or found completed)
  reached: int = 0  # the last step dispatched
  closed: bool = False

  @property
  def name(self) -> str:
    return os.path.basename(os.path.normpath(self.workdir))

  def print(self, *lines: str) -> None:
    with contextlib.redirect_stdout(self.out):
      print(*lines, sep="\n", flush=True)

  def close(self) -> None:
    """Closes its writer and checkpointer (waiting for a save in flight); idempotent."""
    if self.closed:
      return
    self.closed = True
    try:
      if self.writer is not None:
        self.writer.close()
    finally:  # a full disk failing the writer's close still closes the checkpointer
      if self.checkpointer is not None:
        self.checkpointer.close()


def run(
  configs: Sequence[ConfigDict], workdirs: Sequence[str], *, argv: Sequence[str] | None = None
) -> list[dict]:
  """Trains `configs` (differing only in opt.lr and seed) as one program, member i in
  `workdirs[i]`; returns their summaries. `argv`: the command line, printed back as the
  command that resumes an interrupted population. ValueError on bad input, before compiling.
  """
  with preemption.StopSignals() as signals:
    return _run(list(configs), list(workdirs), signals, argv)


def _run(configs, workdirs, signals: preemption.StopSignals, argv) -> list[dict]:
  wall_start = time.time()
  check_members(configs, workdirs)
  if jax.process_count() > 1:
    raise ValueError(f"a population trains in one process ({jax.process_count()} here)")
  setup_lib.keep_freed_host_memory()
  devices = jax.devices()[:1]
  run_setup = setup_lib.build(configs[0], devices)  # everything validated before anything compiles
  for c in configs[1:]:
    setup_lib.validate(c)  # its own opt.lr
  t, vocab = configs[0].train, run_setup.mcfg.vocab_size
  corpus = sources.load_corpus(configs[0].data, vocab, t.seq_len)
  shared = Shared(
    run_setup,
    corpus,
    outcome.no_context_losses(corpus, t, vocab),
    shard_lib.device_info(devices),
    wall_start,
  )
  with contextlib.ExitStack() as resources:  # every member closed on every exit path
    members = [_open(shared, c, w, resources) for c, w in zip(configs, workdirs, strict=True)]
    live = [m for m in members if m.summary is None]
    for m in live:
      _write_config(m, shared)
    _init_fresh(run_setup, [m for m in live if m.state is None])
    faults = io_faults.IOFaults()
    for start in sorted({m.start for m in live}):
      group = [m for m in live if m.start == start]
      if faults.error is None:
        _train_group(shared, group, signals, faults)
      for m in group:  # an I/O fault: every member not ended yet ends failed
        if m.summary is None:
          _fail(shared, m, faults)
  if argv and any(m.summary["status"] == "interrupted" for m in members):
    print(f"resume: {_resume_command(argv)}", flush=True)
  return [m.summary for m in members]


def _resume_command(argv: Sequence[str]) -> str:
  import shlex

  return shlex.join(["python", "-m", "experiments.train_population", *argv])


def _open(shared: Shared, config: ConfigDict, workdir: str, resources) -> Member:
  """A member in its locked workdir (held in `resources`) with its checkpointer and batches,
  restored from its newest checkpoint (state None: a fresh start); `summary` set when its
  run is already completed. Another experiment in the workdir or its checkpoint is refused
  (ValueError naming the keys) before anything is written."""
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  # One run per workdir, as loop.py holds it: a second would rewrite this one's files.
  resources.enter_context(workdir_lib.hold(workdir))
  out = _Prefixed(f"[{os.path.basename(os.path.normpath(workdir))}] ", sys.stdout)
  config_dict = config.to_dict()
  config_dict["data_fingerprint"] = shared.corpus.split.get("manifest", {}).get("fingerprint")
  m = Member(config, workdir, config_dict, out)
  done = loop.completed_run(config, workdir)
  if done is not None:  # a rerun of a finished run: nothing to train, nothing to rewrite
    m.summary = done
    m.print(
      f"already completed at step {done['steps']}: nothing to do",
      run_log.end_message(done, workdir, None),
    )
    return m
  with contextlib.redirect_stdout(out):
    m.checkpointer = ckpt_lib.Checkpointer(
      os.path.join(workdir, "ckpt"), keep=config.train.keep_checkpoints
    )
  resources.callback(m.close)
  m.batches = setup_lib.Batches(shared.corpus, config, shared.run_setup.batch_sharding)
  checkpointer = m.checkpointer
  with contextlib.redirect_stdout(out):
    restored = checkpointer.restore_latest(
      shared.run_setup.abstract, config_dict, shared.corpus.fingerprint
    )
  if restored is None:
    if epath.Path(workdir, "metrics.jsonl").exists():
      m.print(f"no checkpoint in {checkpointer.directory}: starting from step 0")
    return m
  m.state, meta, m.start = restored
  m.resumed, m.interval = resume_policy.resumed_run(meta)
  m.print(f"resuming from step {m.start} ({checkpointer.directory})")
  return m


def _fail(shared: Shared, m: Member, faults: io_faults.IOFaults) -> None:
  """Ends member m after the program's I/O fault, as loop.py ends a failed run: files closed,
  metrics.jsonl cut back to its newest checkpoint, one line, summary.json if it can be
  written."""
  faults.close(m.close)
  reached = m.reached if m.log is not None else m.start
  m.summary = _summary(shared, m, "failed", reached) if m.log is not None else None
  if m.summary is None:  # it never started: what its checkpoint holds
    m.summary = {"status": "failed", "steps": m.start, **m.resumed, "provenance": m.provenance}
  with contextlib.redirect_stdout(m.out):
    io_faults.cut_back_to_checkpoint(m.summary, m.checkpointer, faults, m.workdir, True)
  m.summary["outcome"] = classify(m.summary)
  try:
    cli.write_json(os.path.join(m.workdir, "summary.json"), m.summary)
  except OSError as e:
    m.print(f"error: {io_errors.describe_io_error(e, m.workdir, 'writing summary.json')}")


def _write_config(m: Member, shared: Shared) -> None:
  """The member's config.json, as loop.py writes it; a resumed member says if the code
  changed since its run started."""
  path = os.path.join(m.workdir, "config.json")
  corpus = shared.corpus
  resolved = loop.resolved_config(m.config, shared.run_setup.mcfg, corpus.split, corpus.fingerprint)
  m.provenance = resolved["provenance"]
  if m.start > 0:
    recorded = read_json(path)
    recorded = recorded.get("provenance") if isinstance(recorded, dict) else None
    note = provenance.code_changed(recorded, m.provenance)
    if note:
      m.print(note)
  try:
    cli.write_json(path, resolved)
  except OSError as e:  # nothing trained yet: one line, exit status 1
    raise io_faults.RunFailed(
      io_errors.describe_io_error(e, m.workdir, "writing config.json")
    ) from e


def _init_fresh(run_setup: setup_lib.RunSetup, members: Sequence[Member]) -> None:
  """Fresh states of `members`: one vmapped init, member i exactly as its single run's."""
  if not members:
    return
  c = members[0].config
  init = jax.jit(lambda s: population.init_states(run_setup.model_def, c.opt, c.train.steps, s))
  states = init(jnp.asarray([m.config.seed for m in members], jnp.int32))
  for i, m in enumerate(members):
    m.state = population.member(states, i)


def _population_step(run_setup: setup_lib.RunSetup, config: ConfigDict):
  """jit of (lrs, states, member batches) -> (states, metrics): states donated; member i's
  batch is a pair of [B, T] arrays, stacked inside the program."""
  md, steps, per_layer = run_setup.model_def, config.train.steps, bool(config.diag.per_layer)

  def step(lrs, states, member_batches):
    batch = tuple(jnp.stack(xs) for xs in zip(*member_batches, strict=True))
    return population.train_steps(
      md,
      config.opt,
      steps,
      lrs,
      states,
      batch,
      per_layer=per_layer,
      z_loss_weight=config.train.get("z_loss", 0.0),
    )

  return jax.jit(step, donate_argnums=1)


@jax.jit
def _take(tree, i):
  """Member i's slice of a population pytree, i traced: one compile for every member."""
  return population.member(tree, i)


def _train_group(
  shared: Shared, group: Sequence[Member], signals, faults: io_faults.IOFaults
) -> None:
  """Trains the members that start at the same step as one population, to their ends; an
  I/O fault is kept in `faults` (the members it stopped are left to _fail)."""
  run_setup, config = shared.run_setup, group[0].config
  device = jax.devices()[0]
  states = jax.device_put(population.stack([m.state for m in group]), device)
  for m in group:
    m.state = None  # the stacked copy is the only one kept
  lrs = jax.device_put(jnp.asarray([m.config.opt.lr for m in group], jnp.float32), device)
  member_batches = (run_setup.abstract_batch,) * len(group)
  compile_start = time.time()
  step_fn = _population_step(run_setup, config).lower(lrs, states, member_batches).compile()
  compile_seconds = time.time() - compile_start
  eval_fn = jax.jit(functools.partial(population.eval_steps, run_setup.model_def))
  eval_fn = eval_fn.lower(states, run_setup.abstract_batch).compile()
  print(_banner(shared, group, compile_seconds), flush=True)
  for m in group:
    m.compile_seconds, m.population_size = compile_seconds, len(group)
    schedule = optim.make_schedule(m.config.opt, m.config.train.steps)  # its own peak lr
    with faults.caught():
      m.writer = MetricWriter(
        m.workdir,
        truncate_after=m.start,
        profile_every=config.train.eval_every,  # depth images redrawn at each evaluation
        no_context_loss=shared.baselines[EVAL_SET_BASELINE],  # the periodic eval set's plateau
        eval_tokens=loop.eval_tokens(config.train),
      )
    if faults.error is not None:
      return
    m.log = run_log.RunLog(m.config, schedule, m.writer, m.resumed, m.interval)
    # Wall and compile time of every segment: the checkpoint's plus this program's.
    m.log.wall_start, m.log.compile_seconds = shared.wall_start, compile_seconds
  trainer = PopulationTrainer(shared, group, step_fn, eval_fn, lrs, signals)
  with faults.caught():
    trainer.train(states, group[0].start)


def _banner(shared: Shared, group: Sequence[Member], compile_seconds: float) -> str:
  mcfg, config = shared.run_setup.mcfg, group[0].config
  lrs = ", ".join(f"{m.config.opt.lr:g}" for m in group)
  seeds = ", ".join(str(m.config.seed) for m in group)
  return (
    f"{config.name}: population of {len(group)} from step {group[0].start} (lr {lrs}; seed "
    f"{seeds}); {mcfg.num_layers} layers, norm={mcfg.norm} position={mcfg.norm_position} "
    f"residual={mcfg.residual}; {shared.run_setup.num_params:,} params each; on "
    f"{shard_lib.describe_devices(shared.devices)}; compiled in {compile_seconds:.1f}s; "
    f"{shared.corpus.description}"
  )


class PopulationTrainer:
  """Drives one sub-population's compiled step as loop.Trainer drives a run's: train,
  evaluate, log, checkpoint, stop on a signal; member i is slot i of the stacked state."""

  def __init__(self, shared: Shared, members: Sequence[Member], step_fn, eval_fn, lrs, signals):
    self.shared, self.members, self.live = shared, list(members), list(members)
    self.config = members[0].config
    self.step_fn, self.eval_fn, self.lrs, self.signals = step_fn, eval_fn, lrs, signals
    t = self.config.train
    self.n_final_eval = loop.final_eval_batches(t)
    self.held_out = members[0].batches  # the held-out batches do not depend on the seed
    self.eval_batches = [self.held_out.held_out(i) for i in range(t.eval_batches)]

  @contextlib.contextmanager
  def paused(self, skip: Member | None = None):
    """Time spent inside is not training time for the live members (but `skip`)."""
    with contextlib.ExitStack() as stack:
      for m in self.live:
        if m is not skip:
          stack.enter_context(m.log.paused())
      yield

  def batch(self, step: int):
    """Every member's training batch of `step`, its single run's."""
    return tuple(m.batches.train(step) for m in self.members)

  def evaluate(self, state, n_batches: int) -> np.ndarray:
    """Each member's mean held-out loss on the first n_batches batches: [M]."""
    with self.paused():
      while len(self.eval_batches) < n_batches:
        self.eval_batches.append(self.held_out.held_out(len(self.eval_batches)))
      # One batch in flight at a time, as loop.Trainer evaluates.
      losses = np.stack(
        [jax.device_get(self.eval_fn(state, b)) for b in self.eval_batches[:n_batches]]
      )
    # Each member's mean over its own column, in the single run's order of summation.
    return [float(np.mean(np.ascontiguousarray(losses[:, i]))) for i in range(losses.shape[1])]

  def evaluate_at(self, state, n: int) -> None:
    """loop.Trainer.evaluate_at for every live member."""
    t = self.config.train
    losses = self.evaluate(state, t.eval_batches)
    for i, m in self._live_slots():
      m.log.record_eval(n, losses[i], t.eval_batches)
    if n == t.steps and self.n_final_eval > t.eval_batches:
      losses = self.evaluate(state, self.n_final_eval)
      for i, m in self._live_slots():
        m.log.record_eval(n, losses[i], self.n_final_eval, final=True)

  def _live_slots(self) -> list[tuple[int, Member]]:
    return [(i, m) for i, m in enumerate(self.members) if m in self.live]

  def record(self, state, n: int, metrics) -> None:
    """Reads step n's metrics (one transfer) into each live member's log; a member whose
    loss went non-finite ends diverged."""
    host = jax.device_get(metrics)
    for i, m in self._live_slots():
      with self.paused(skip=m), contextlib.redirect_stdout(m.out):
        ok = m.log.record_step(n, {k: v[i] for k, v in host.items()})
      if not ok:
        self.end(m, state, "diverged")

  def save(self, state) -> None:
    """Saves each live member's slice (its step already logged); not training time."""
    with self.paused():
      for i, m in self._live_slots():
        results = {**m.log.results(), **m.log.totals()}
        meta = resume_policy.run_meta(
          m.config_dict, m.log.interval_losses, results, self.shared.corpus.fingerprint
        )
        m.checkpointer.save(_take(state, i), meta, force=True)

  def train(self, state, start: int):
    """loop.Trainer.train for the population: members end completed, interrupted (saved)
    or, each at its own step, diverged (its last finite checkpoint kept)."""
    t = self.config.train
    status, stop, pending = "completed", t.steps, None
    if self.signals.should_stop(start):  # signalled during setup or compilation
      status, stop = "interrupted", start
    for m in self.live:
      m.reached = start
    for step in range(start, stop):
      state, metrics = self.step_fn(self.lrs, state, self.batch(step))
      n = step + 1
      for m in self.live:
        m.reached = n  # the last step dispatched: where an I/O fault stops it
        m.checkpointer.check()  # a save that ended in an error stops the program here
      if pending is not None:
        self.record(state, *pending)
      if not self.live:
        return state
      pending = (n, metrics)
      if n % t.eval_every == 0 or n == t.steps:
        self.evaluate_at(state, n)
      if self.signals.should_stop(n):
        status = "interrupted"
        break
      if n % t.checkpoint_every == 0 and n < t.steps:
        # Step n logged before it is saved, as loop.Trainer does: a diverged step never is.
        self.record(state, *pending)
        pending = None
        self.save(state)
    if pending is not None:
      self.record(state, *pending)
    self.save(state)
    for m in list(self.live):
      self.end(m, state, status)
    return state

  def end(self, m: Member, state, status: str) -> None:
    """Ends member m at its state's step: files closed, summary.json and hparams written."""
    i = self.members.index(m)
    final_step = int(jax.device_get(state.step[i]))
    self.live.remove(m)
    m.close()  # metrics flushed and saves finished: summary.json last
    m.summary = _summary(self.shared, m, status, final_step)
    cli.write_json(os.path.join(m.workdir, "summary.json"), m.summary)
    hparams_lib.write_run(m.workdir, m.config, m.summary)
    m.print(run_log.end_message(m.summary, m.workdir, None))


def _summary(shared: Shared, m: Member, status: str, final_step: int) -> dict:
  """A member's summary.json: loop.py's fields, plus the size of its population."""
  summary = {
    "status": status,
    "steps": final_step,
    **m.log.results(),
    **shared.baselines,
    "data_split": shared.corpus.split,
    "tokens_per_second": m.log.tokens_per_second(),  # its share of the population's
    **m.log.totals(),  # wall and compile seconds of every segment of its run
    "checkpoint_blocking_seconds": sum(m.checkpointer.save_seconds),
    "config_name": m.config.name,
    "devices": shared.devices,
    "provenance": m.provenance,
    "population_size": m.population_size,
  }
  summary["outcome"] = classify(summary)
  metrics_path = os.path.join(m.workdir, "metrics.jsonl")
  vocab = shared.run_setup.mcfg.vocab_size
  summary.update(escape.summary_fields(metrics_path, summary, vocab))
  return summary
