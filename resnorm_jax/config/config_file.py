"""A config file (configs/<name>.py[:ARG]) read as config_flags reads it: run, its
get_config() called, its result checked and locked; a file that fails says so in one line
naming the file, the line and the error (a config file is Python, run when it is read)."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from ml_collections import ConfigDict


def load_config_file(spec: str) -> ConfigDict:
  """A locked config from FILE[:ARG], as config_flags loads it; ValueError on failure."""
  path, _, arg = spec.partition(":")
  if not os.path.isfile(path):
    raise ValueError(f"config file {path!r} not found")
  module_spec = importlib.util.spec_from_file_location(f"_config_{len(sys.modules)}", path)
  module = importlib.util.module_from_spec(module_spec)
  try:
    module_spec.loader.exec_module(module)
  except Exception as e:  # noqa: BLE001 - a config file is Python: whatever it raises
    raise ValueError(config_file_error(spec, e)) from None
  get_config = getattr(module, "get_config", None)
  if get_config is None:
    raise ValueError(f"--config={spec}: config file {path!r} defines no get_config()")
  try:
    config = get_config(arg) if arg else get_config()
  except Exception as e:  # noqa: BLE001 - its own ValueError (a JSONDecodeError) included
    raise ValueError(config_file_error(spec, e)) from None
  check_config_type(spec, config)
  config.lock()
  return config


def config_file_error(spec: str, e: BaseException) -> str:
  """One line for a config file that failed to run (a config file is Python, run when it is
  read): `--config=SPEC: config file 'F' failed at line N: SyntaxError: ...`."""
  path = spec.partition(":")[0]
  line = getattr(e, "lineno", None) if isinstance(e, SyntaxError) else None
  if (
    isinstance(e, SyntaxError)
    and e.filename
    and os.path.abspath(e.filename) != os.path.abspath(path)
  ):
    path = e.filename  # a file the config imports
  tb = e.__traceback__
  while tb is not None and line is None:  # the innermost frame in the config file
    frames = []
    while tb is not None:
      frames.append(tb)
      tb = tb.tb_next
    for frame in reversed(frames):
      if os.path.abspath(frame.tb_frame.f_code.co_filename) == os.path.abspath(path):
        line = frame.tb_lineno
        break
  if isinstance(e, AttributeError) and "get_config" in str(e) and line is None:
    return f"--config={spec}: config file {path!r} defines no get_config()"
  at = f" at line {line}" if line else ""
  detail = e.msg if isinstance(e, SyntaxError) else str(e)
  detail = " ".join(str(detail).split())  # one line
  return f"--config={spec}: config file {path!r} failed{at}: {type(e).__name__}: {detail}"


def _from_config_file(e: BaseException, spec: str) -> bool:
  """Whether `e` came from running the config file `spec` names (not from a --config.KEY
  override, whose KeyError / AttributeError / TypeError / ValueError say so themselves)."""
  if isinstance(e, SyntaxError) or not isinstance(e, (KeyError, AttributeError, TypeError)):
    return not isinstance(e, ValueError) or _frame_in(e, spec)
  return _frame_in(e, spec) or "get_config" in str(e)


def _frame_in(e: BaseException, spec: str) -> bool:
  path = os.path.abspath(spec.partition(":")[0])
  tb = e.__traceback__
  while tb is not None:
    if os.path.abspath(tb.tb_frame.f_code.co_filename) == path:
      return True
    tb = tb.tb_next
  return False


def check_config_type(spec: str, config: Any) -> None:
  """ValueError unless get_config() gave a ConfigDict (a plain dict has no locked keys, no
  overrides, no attribute access: it failed deep in the run with an AttributeError)."""
  if not isinstance(config, ConfigDict):
    raise ValueError(
      f"--config={spec}: get_config() returned a {type(config).__name__}, not an "
      "ml_collections.ConfigDict (wrap it: ConfigDict(d), or start from configs/base.py)"
    )
