"""Stopping on a signal: one process, or every process of a multi-process run at one step.

One process: the first SIGTERM/SIGINT sets a flag the loop reads after each step; it saves
at that step and ends with status "interrupted". A second signal exits at once.

Several processes (jax.distributed): a signal often reaches one process only (a preempted
host, a Ctrl-C in one terminal). A process that stopped alone would leave the others
waiting in the next collective, so the stop is agreed: jax.distributed.initialize starts
JAX's preemption notifier, which takes SIGTERM over, and
`multihost_utils.reached_preemption_sync_point(step)`, asked after every step, turns True on
every process at the same step once any process got one (the step after the largest one any
process had reached). A SIGINT is passed on to the notifier as a SIGTERM to this process.
Asking is a host-side check, where a blocking all-gather of a flag
(multihost_utils.process_allgather) or an all-reduced flag read a step later would add a
collective to every step (measured in docs/benchmarks.md, "Agreeing on a stop across
processes").

A peer that dies without a word (kill -9, a lost host) makes the next collective fail
(gloo on CPU: connection reset) or never return (NCCL); `exit_on_peer_failure` turns the
first into a one-line message and an immediate exit (no 100 s wait in JAX's shutdown
barrier), and JAX's heartbeat (dist.heartbeat_timeout_seconds) ends the second.

A verdict only process 0 reaches (the stop rule's, the workdir lock's) is followed by every
process through `agreed`, process 0's value broadcast to all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import jax
import numpy as np

from resnorm_jax.train import startup_signals

EXIT_PEER_FAILED = 3  # a step failed in a multi-process run: another process likely died


def _notifier_active() -> bool:
  """True when JAX's preemption notifier owns SIGTERM (jax.distributed is up with it)."""
  from jax._src import distributed

  return (
    distributed.global_state.client is not None
    and distributed.global_state.preemption_sync_manager is not None
  )


class StopSignals:
  """First SIGTERM/SIGINT asks the loop to save and stop; a second one exits at once.

  After the first signal the handlers go back to the OS default action, so the second one
  kills the process even while it is blocked in C++ (a compile, a hung collective), where a
  Python handler would not run until that call returns. Once JAX's preemption notifier owns
  SIGTERM (`after_distributed_init`), SIGTERM is its: a second SIGTERM is absorbed (SIGINT
  or SIGKILL then end the process).
  """

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.received: int | None = None
    self.agreed = False  # the stop is agreed by every process (JAX's preemption sync)
    self._old: dict = {}

  def __enter__(self):
    self.received = startup_signals.received()  # one that came while the program started
    owned = self.SIGNALS if not _notifier_active() else (signal.SIGINT,)
    for sig in owned:
      try:
        self._old[sig] = signal.signal(sig, self._handle)
      except ValueError:  # not the main thread (e.g. a notebook worker): no handlers
        pass
    return self

  def _handle(self, signum, frame):
    self.received = signum
    for sig in self._old:
      signal.signal(sig, signal.SIG_DFL)
    if self.agreed:
      print(f"\nsignal {signum}: passed on to every process (send again to exit now)", flush=True)
      _notify_peers()
    else:
      print(
        f"\nsignal {signum}: saving a checkpoint and stopping (send again to exit now)",
        flush=True,
      )

  def after_distributed_init(self) -> None:
    """Call once jax.distributed is (or is not) up: a multi-process stop is then agreed.

    jax.distributed.initialize started JAX's notifier, which took SIGTERM over at the OS
    level (this Python handler no longer sees it); a signal that came before is passed on.
    """
    if _notifier_active():
      self.agreed = True
      self._old.pop(signal.SIGTERM, None)  # the notifier's now: not restored at exit
      if self.received is not None:  # a signal during start-up: tell every process
        _notify_peers()
    elif jax.process_count() > 1:
      raise ValueError(
        f"{jax.process_count()} processes but JAX's preemption service is off "
        "(jax_enable_preemption_service): a signal would stop one process and hang the rest"
      )

  def should_stop(self, step: int) -> bool:
    """True when the run stops after `step` steps (the same step on every process).

    With several processes: call it after every step, with increasing steps, everywhere.
    """
    if self.agreed:
      from jax.experimental import multihost_utils

      return multihost_utils.reached_preemption_sync_point(step)
    return self.received is not None

  def __exit__(self, *exc):
    for sig, old in self._old.items():
      signal.signal(sig, old)


def agreed(ok: bool) -> bool:
  """Process 0's `ok`, on every process (one process: `ok`): a verdict process 0 reaches
  (the stop rule's, the workdir lock's) that every process then follows."""
  if jax.process_count() == 1:
    return ok
  from jax.experimental import multihost_utils

  return bool(multihost_utils.broadcast_one_to_all(np.int32(ok)))


def _notify_peers() -> None:
  """A SIGTERM to this process: JAX's preemption notifier tells every process."""
  os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def exit_on_peer_failure():
  """In a multi-process run, a failed step (a JAX runtime error) prints one message and
  exits with EXIT_PEER_FAILED at once.

  Usually another process died and the collective lost its peer. Exiting through Python
  would wait in jax.distributed's shutdown barrier for the dead process (100 s, then an
  abort with a C++ stack): the checkpoints already written are what a resume needs.
  """
  try:
    yield
  except jax.errors.JaxRuntimeError as e:
    if jax.process_count() == 1:
      raise
    first = str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__
    print(
      f"error: process {jax.process_index()} of {jax.process_count()}: a step failed: "
      f"{first}\nIn a multi-process run this usually means another process died or was "
      "killed (see its log). Exiting now instead of waiting for it; the checkpoints in the "
      "workdir are intact: run the same command again to resume.",
      file=sys.stderr,
      flush=True,
    )
    sys.stdout.flush()
    os._exit(EXIT_PEER_FAILED)
