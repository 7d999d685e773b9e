"""The population's loop: PopulationTrainer drives the program's compiled step as
train/trainer.py's Trainer drives a run's (train, evaluate, log, checkpoint, stop on a signal)
over the members of population/run.py, each writing its own run folder; `member_summary` and
`write_member_config` are each member's summary.json and config.json, by the single run's
code (run_files.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

import jax
import numpy as np

from resnorm_jax.runs import end_line, record_files
from resnorm_jax.runs import status as run_status
from resnorm_jax.train import eval_budget, io_errors, resume_policy, run_files
from resnorm_jax.train.population import program as population
from resnorm_jax.train.population.member import Member, Shared


@jax.jit
def _take(tree, i):
  """Member i's slice of a population pytree, i traced: one compile for every member."""
  return population.member(tree, i)


class PopulationTrainer:
  """Drives the program's compiled step as the single run's Trainer drives a run's: train,
  evaluate, log, checkpoint, stop on a signal; member i is slot i of the stacked state. A
  member takes part from its start step on (before it, its slot is held); a completed one
  never."""

  def __init__(self, shared: Shared, members: Sequence[Member], step_fn, eval_fn, lrs, signals):
    self.shared, self.members = shared, list(members)
    self.live = [m for m in members if m.summary is None]
    self.config = self.live[0].config
    self.step_fn, self.eval_fn, self.lrs, self.signals = step_fn, eval_fn, lrs, signals
    self.active, self.mask = None, None  # the members that train, and their mask on device
    t = self.config.train
    self.n_final_eval = eval_budget.final_eval_batches(t)
    self.held_out = self.live[0].batches  # the held-out batches do not depend on the seed
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
    """Every training member's batch of `step`, its single run's; a held slot gets another
    member's (what it computes is dropped)."""
    own = {m: m.batches.train(step) for m in self.members if m in self.active}
    # No member trains (the others ended, the next one held): every slot's result is dropped.
    filler = next(iter(own.values()), None) or self.live[0].batches.train(step)
    return tuple(own.get(m, filler) for m in self.members)

  def set_active(self, step: int, start: int) -> None:
    """The members that train step `step` + 1: live, their start reached. One that joins
    after the program's `start` starts its throughput clock now (its wait is not training)."""
    active = [m for m in self.live if m.start <= step]
    if active == self.active:
      return
    for m in active:
      if m.start == step > start:
        m.log.t_last = time.time()
    self.active = active
    mask = np.asarray([m in active for m in self.members], np.bool_)
    self.mask = jax.device_put(mask, jax.devices()[0])

  def evaluate(self, state, n_batches: int) -> np.ndarray:
    """Each member's mean held-out loss on the first n_batches batches: [M]."""
    with self.paused():
      while len(self.eval_batches) < n_batches:
        self.eval_batches.append(self.held_out.held_out(len(self.eval_batches)))
      # One batch in flight at a time, as the single run's Trainer evaluates.
      losses = np.stack(
        [jax.device_get(self.eval_fn(state, b)) for b in self.eval_batches[:n_batches]]
      )
    # Each member's mean over its own column, in the single run's order of summation.
    return [float(np.mean(np.ascontiguousarray(losses[:, i]))) for i in range(losses.shape[1])]

  def evaluate_at(self, state, n: int) -> None:
    """The single run's Trainer.evaluate_at for every member that trained step n."""
    t = self.config.train
    losses = self.evaluate(state, t.eval_batches)
    for i, m in self._trained_slots(n):
      m.log.record_eval(n, losses[i], t.eval_batches)
    if n == t.steps and self.n_final_eval > t.eval_batches:
      losses = self.evaluate(state, self.n_final_eval)
      for i, m in self._trained_slots(n):
        m.log.record_eval(n, losses[i], self.n_final_eval, final=True)

  def _trained_slots(self, n: int) -> list[tuple[int, Member]]:
    """(slot, member) of the live members that trained step n (their start before n)."""
    return [(i, m) for i, m in enumerate(self.members) if m in self.live and m.start < n]

  def record(self, state, n: int, metrics) -> None:
    """Reads step n's metrics (one transfer) into the log of each member that trained it; a
    member whose loss went non-finite ends diverged."""
    host = jax.device_get(metrics)
    for i, m in self._trained_slots(n):
      with self.paused(skip=m), contextlib.redirect_stdout(m.out):
        ok = m.log.record_step(n, {k: v[i] for k, v in host.items()})
      if not ok:
        self.end(m, state, run_status.DIVERGED)

  def save(self, state, n: int) -> None:
    """Saves the slice of each live member at step n or past it: its step already logged (a
    held member's is saved where it stands, already on disk); not training time."""
    with self.paused():
      for i, m in enumerate(self.members):
        if m not in self.live or m.start > n:
          continue
        results = {**m.log.results(), **m.log.totals()}
        meta = resume_policy.run_meta(
          m.config_dict, m.log.interval_losses, results, self.shared.corpus.fingerprint
        )
        m.checkpointer.save(_take(state, i), meta, force=True)

  def train(self, state, start: int):
    """The single run's Trainer.train for the population: members end completed, interrupted
    (saved) or, each at its own step, diverged (its last finite checkpoint kept)."""
    t = self.config.train
    status, stop, pending = run_status.COMPLETED, t.steps, None
    if self.signals.should_stop(start):  # signalled during setup or compilation
      status, stop = run_status.INTERRUPTED, start
    for m in self.live:
      m.reached = m.start
    for step in range(start, stop):
      self.set_active(step, start)
      state, metrics = self.step_fn(self.lrs, state, self.batch(step), self.mask)
      n = step + 1
      for m in self.active:
        m.reached = n  # the last step dispatched: where an I/O fault stops it
      for m in self.live:
        m.checkpointer.check()  # a save that ended in an error stops the program here
      if pending is not None:
        self.record(state, *pending)
      if not self.live:
        return state
      pending = (n, metrics)
      if n % t.eval_every == 0 or n == t.steps:
        self.evaluate_at(state, n)
      if self.signals.should_stop(n):
        status, stop = run_status.INTERRUPTED, n
        break
      if n % t.checkpoint_every == 0 and n < t.steps:
        # Step n logged before it is saved, as the single run's Trainer does: a diverged step
        # never is.
        self.record(state, *pending)
        pending = None
        self.save(state, n)
    if pending is not None:
      self.record(state, *pending)
    self.save(state, stop)
    for m in list(self.live):
      self.end(m, state, status)
    return state

  def end(self, m: Member, state, status: str) -> None:
    """Ends member m at its state's step: files closed, summary.json and hparams written;
    from now on its slot is held."""
    i = self.members.index(m)
    final_step = int(jax.device_get(state.step[i]))
    self.live.remove(m)
    self.active = None  # rebuilt before the next step, without m
    m.close()  # metrics flushed and saves finished: summary.json last
    m.summary = member_summary(self.shared, m, status, final_step)
    try:
      run_files.write_summary(m.workdir, m.config, m.summary)
    except OSError as e:  # its own line; the program stops, each other member says why
      unwritten = io_errors.describe_io_error(e, m.workdir, f"writing {record_files.SUMMARY}")
      m.print(
        f"error: {unwritten}; the run ended {status} at step {final_step} without it: free "
        "space, then the same command writes it (from the newest checkpoint)"
      )
      raise
    m.print(end_line.end_message(m.summary, m.workdir, None))


def write_member_config(m: Member, shared: Shared) -> None:
  """The member's config.json, as loop.py writes it; a resumed member says if the code
  changed since its run started."""
  corpus, mcfg = shared.corpus, shared.run_setup.mcfg
  resolved = run_files.resolved_config(m.config, mcfg, corpus.split, corpus.fingerprint)
  m.provenance = resolved["provenance"]
  with contextlib.redirect_stdout(m.out):
    run_files.write_config(m.workdir, resolved, m.start, warn_lost_rows=False)


def member_summary(shared: Shared, m: Member, status: str, final_step: int) -> dict:
  """A member's summary.json: loop.py's fields, plus the size of its population."""
  summary = run_files.summary(
    status,
    final_step,
    m.log,
    m.config,
    baselines=shared.baselines,
    data_split=shared.corpus.split,
    devices=shared.devices,
    provenance=m.provenance,
    population_size=m.population_size,
  )
  run_files.add_outcome(summary, m.workdir, shared.run_setup.mcfg.vocab_size)
  return summary
