"""Orbax's error logging tamed: a background save or restore that fails logs hundreds of lines
of tracebacks (TensorStore's longer still) and asyncio one per write future; the run says its
fault in one line of its own (checkpoint.SaveFailed, a damaged checkpoint's line). Here the
records are held and dropped once the run has reported the fault, or printed one line each
at the checkpointer's close; an error is cut to one line (`one_line`)."""

from __future__ import annotations

import logging
import os
import sys


def _from_orbax(record: logging.LogRecord) -> bool:
  """Whether a log record is orbax's, or an asyncio record of an exception raised in orbax
  (a background save's write futures, gathered and never retrieved once the save failed):
  its traceback runs through orbax's code, or, where TensorStore set the exception on the
  future with no Python traceback, the exception names orbax's checkpoint files (an
  `.orbax-checkpoint-tmp` folder)."""
  if "orbax" in record.pathname:
    return True
  exc = record.exc_info[1] if record.exc_info else None
  if record.name == "asyncio" and exc is not None and "orbax-checkpoint" in str(exc):
    return True
  return _through_orbax(record.exc_info[2] if record.exc_info else None)


def _orbax_file(filename: str) -> bool:
  """Whether a source file is orbax's package (a folder named orbax on its path)."""
  return "/orbax/" in filename.replace(os.sep, "/")


def _through_orbax(tb) -> bool:
  """Whether a traceback runs through orbax's code."""
  while tb is not None:
    if _orbax_file(tb.tb_frame.f_code.co_filename):
      return True
    tb = tb.tb_next
  return False


class _NoTracebacks(logging.Filter):
  """Orbax logs every failure of a background save or restore with its traceback (hundreds
  of lines per fault, TensorStore's longer still), and asyncio each of the save's write
  futures whose error nobody retrieved (one per array, with a traceback); the run reports
  the fault in one line of its own (SaveFailed, a damaged checkpoint's line). So orbax's
  error records are held, not printed: dropped once the checkpointer has reported its fault
  (`reported`), else printed at its close, one line each without a traceback (`release`)."""

  def __init__(self):
    super().__init__()
    self.held: list[logging.LogRecord] = []

  def filter(self, record: logging.LogRecord) -> bool:
    if not _from_orbax(record):
      return True
    if record.levelno >= logging.ERROR:
      self.held.append(record)
      return False
    if record.exc_info:
      record.exc_info, record.exc_text = None, None
    return True

  def reported(self) -> None:
    self.held.clear()

  def release(self) -> None:
    held, self.held = self.held, []
    for record in held:
      print(f"orbax: {' '.join(record.getMessage().split())}", flush=True)


_ORBAX_ERRORS = _NoTracebacks()


def _orbax_code(unraisable) -> bool:
  """Whether an unraisable error is orbax's: raised in a coroutine of orbax's (a restore's
  array reads, closed unfinished when the restore of a damaged checkpoint failed and
  collected later), or its traceback runs through orbax's code."""
  code = getattr(getattr(unraisable, "object", None), "cr_code", None)
  if code is not None and _orbax_file(code.co_filename):
    return True
  return _through_orbax(getattr(unraisable.exc_value, "__traceback__", None))


def _unraisable(hook):
  """sys.unraisablehook that drops the `Event loop is closed` errors of a failed save's write
  futures completing after orbax closed their event loop (one traceback per array on a full
  disk) and holds orbax's own unraisable errors as one line each, like its log records (a
  damaged checkpoint's array reads, whose TensorStore spec runs to a hundred lines, printed
  whenever the garbage collector closes them); any other unraisable error goes to `hook`."""

  def quiet(unraisable):
    e = unraisable.exc_value
    if isinstance(e, RuntimeError) and str(e) == "Event loop is closed":
      return
    if e is not None and _orbax_code(unraisable):
      _ORBAX_ERRORS.held.append(
        logging.LogRecord("orbax", logging.ERROR, "orbax", 0, one_line(e), (), None)
      )
      return
    hook(unraisable)

  quiet.resnorm_quiet = True
  return quiet


def one_line(e: BaseException, limit: int = 300) -> str:
  """`Type: the first line of its message` (TensorStore's errors carry a JSON spec of dozens
  of lines), at most `limit` characters."""
  text = str(e).strip().splitlines()[0] if str(e).strip() else ""
  text = text.split(" See full TensorStore details")[0]  # then the whole spec, as a repr
  cause = e.__cause__ or e.__context__
  if cause is not None and str(cause).strip():  # TensorStore's reason (DATA_LOSS: ...)
    text = f"{text} ({str(cause).strip().splitlines()[0]})"
  text = text if len(text) <= limit else text[: limit - 3] + "..."
  return f"{type(e).__name__}: {text}"


def quiet_orbax_errors() -> _NoTracebacks:
  """Holds orbax's error records and tracebacks (see _NoTracebacks); returns the holder, for
  a reader of checkpoints other than Checkpointer (experiments.sample) to call `reported()`
  once it has said a fault in its own line, or `release()`."""
  _quiet_orbax_tracebacks()
  return _ORBAX_ERRORS


def _quiet_orbax_tracebacks() -> None:
  for name in ("absl", "asyncio"):
    logger = logging.getLogger(name)
    if _ORBAX_ERRORS not in logger.filters:
      logger.addFilter(_ORBAX_ERRORS)
  if not getattr(sys.unraisablehook, "resnorm_quiet", False):
    sys.unraisablehook = _unraisable(sys.unraisablehook)
