"""Orbax's error output tamed (resnorm_jax/train/orbax_quiet.py): its error records and
asyncio's held, then dropped once the run has said the fault or printed one line each; the
unraisable errors of its closed coroutines held likewise; an error cut to one line."""

import logging
import sys

from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import orbax_quiet


def _orbax_record(level=logging.ERROR, exc_info=None, path="/x/orbax/checkpoint/future.py"):
  return logging.LogRecord("absl", level, path, 1, "save failed:\nsecond line", (), exc_info)


def test_orbax_error_records_are_held_then_dropped_once_the_run_has_said_it(capsys):
  """A full disk printed orbax's error records and one asyncio traceback per array (36
  `Event loop is closed` tracebacks): the run's own line says the fault."""
  held = orbax_quiet._NoTracebacks()
  assert not held.filter(_orbax_record())  # held, not printed
  held.reported()  # the run said it (SaveFailed, a damaged checkpoint's line)
  held.release()
  assert capsys.readouterr().out == ""
  assert not held.filter(_orbax_record())
  held.release()  # a checkpointer closed without a fault of its own: one line each
  assert capsys.readouterr().out == "orbax: save failed: second line\n"
  info = _orbax_record(logging.INFO)
  assert held.filter(info)  # not an error: printed as before
  # An asyncio record of a future whose exception was raised in orbax's code.
  code = compile("raise ValueError('RESOURCE_EXHAUSTED')", "/x/orbax/serialization.py", "exec")
  try:
    exec(code)
  except ValueError:
    exc_info = sys.exc_info()
  asyncio_record = _orbax_record(exc_info=exc_info, path="/usr/lib/asyncio/base_events.py")
  assert not held.filter(asyncio_record)
  other = _orbax_record(path="/usr/lib/asyncio/base_events.py")  # not orbax's: printed
  assert held.filter(other)
  # A write future's exception set by TensorStore, with no Python traceback: held when it
  # names orbax's checkpoint files (the full-disk run printed one at random before).
  error = ValueError('RESOURCE_EXHAUSTED: Error writing "/r/ckpt/8.orbax-checkpoint-tmp/x"')
  never = logging.LogRecord(
    "asyncio", logging.ERROR, "/usr/lib/asyncio/base_events.py", 1,
    "Future exception was never retrieved", (), (ValueError, error, None),
  )  # fmt: skip
  assert not held.filter(never)
  elsewhere = ValueError("RESOURCE_EXHAUSTED: Error writing /data/tokens/x")
  assert held.filter(logging.LogRecord(
    "asyncio", logging.ERROR, "/usr/lib/asyncio/base_events.py", 1,
    "Future exception was never retrieved", (), (ValueError, elsewhere, None),
  ))  # fmt: skip


def test_event_loop_is_closed_is_dropped_and_other_unraisable_errors_are_not():
  seen = []
  hook = orbax_quiet._unraisable(seen.append)

  class Unraisable:
    def __init__(self, e):
      self.exc_value = e

  hook(Unraisable(RuntimeError("Event loop is closed")))
  assert seen == []
  other = Unraisable(RuntimeError("something else"))
  hook(other)
  assert seen == [other]


def test_an_orbax_coroutine_s_unraisable_error_is_held_as_one_line():
  """A damaged checkpoint's array reads, closed unfinished and collected later, raise from
  orbax's coroutine with a TensorStore spec of a hundred lines: held as one line, printed at
  the checkpointer's close unless the run has said the fault; a coroutine of other code is
  passed on."""
  seen = []
  hook = orbax_quiet._unraisable(seen.append)
  error = "'reading array index. See full TensorStore details: {'"
  source = f"async def _read():\n  raise Exception({error})\n"

  def coroutine(filename):
    scope = {}
    exec(compile(source, filename, "exec"), scope)
    return scope["_read"]()

  class Unraisable:
    def __init__(self, obj):
      self.object = obj
      try:
        obj.send(None)
      except Exception as e:  # noqa: BLE001  the coroutine's own error, as orbax's is
        self.exc_value = e

  held = orbax_quiet._ORBAX_ERRORS
  before = len(held.held)
  ours = Unraisable(coroutine("/venv/site-packages/orbax/checkpoint/serialization.py"))
  hook(ours)
  assert seen == [] and len(held.held) == before + 1
  assert held.held[-1].getMessage() == "Exception: reading array index."
  held.held.pop()
  theirs = Unraisable(coroutine("/venv/site-packages/mylib/io.py"))
  hook(theirs)
  assert seen == [theirs] and len(held.held) == before


def test_one_line_cuts_tensorstores_spec_and_keeps_its_reason():
  cause = ValueError("OUT_OF_RANGE: Requested byte range [0, 3690) is not valid for value")
  try:
    try:
      raise cause
    except ValueError as c:
      raise Exception(
        "Encountered error while reading array index. See full TensorStore details: "
        "<bound method spec of TensorStore({\n  'context': {\n ... 70 lines"
      ) from c
  except Exception as e:  # noqa: BLE001
    line = ckpt_lib.one_line(e)
  assert line == (
    "Exception: Encountered error while reading array index. (OUT_OF_RANGE: Requested byte "
    "range [0, 3690) is not valid for value)"
  )
