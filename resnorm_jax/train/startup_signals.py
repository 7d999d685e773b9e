"""A SIGINT/SIGTERM before the run's own handlers exist (while the entry point imports JAX).

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread is; during
the imports that is a traceback, or, when it lands in a callback (JAX's garbage-collection
hook), an "Exception ignored" line after which the run goes on as if nothing was asked. Held
from the first line of an entry point, these handlers only record the signal: the entry point
then stops in one line before anything is written (exit status 130), and a signal that comes
after that check is taken over by the run's StopSignals (train/preemption.py), which stops at
the first step it can save. No JAX here.
"""

from __future__ import annotations

import signal
import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT: stopped before anything was written
SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received: list[int] = []


def _record(signum, frame):
  _received.append(signum)
  for sig in SIGNALS:  # a second signal: the OS default (exit now)
    signal.signal(sig, signal.SIG_DFL)


def hold() -> None:
  """Records the first SIGINT/SIGTERM from now on instead of raising (main thread only)."""
  for sig in SIGNALS:
    try:
      signal.signal(sig, _record)
    except ValueError:  # not the main thread: nothing to hold
      return


def received() -> int | None:
  """The signal recorded since `hold`, None if none."""
  return _received[0] if _received else None


def stop_if_received(what: str = "the run") -> None:
  """Exits in one line (status 130) when a signal came before `what` started."""
  signum = received()
  if signum is not None:
    print(f"signal {signum} before {what} started: stopped, nothing written", file=sys.stderr)
    sys.exit(EXIT_INTERRUPTED)
