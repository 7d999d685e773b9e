"""One step of the results build, run with a record of the files it read and wrote.

python -m resnorm_jax.analysis.traced_step TRACE.json scripts/<step>.py [FLAGS...]

runs the script as `python scripts/<step>.py FLAGS...` would (as __main__, its folder first on
sys.path) under an audit hook (PEP 578) that notes every file opened for reading or writing
and every rename's target (a symlink-safe writer writes a temporary file and renames it), and
writes TRACE.json: {"read": [...], "written": [...]}, paths relative to the working directory,
those outside it left out. The build (results_build.py) reads the traces to record what each
derived table was built from (docs/provenance.csv). No JAX here.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def is_write(mode: object, flags: object) -> bool:
  """Whether an `open` audit event's (mode, flags) open the file for writing."""
  if isinstance(mode, str):
    return any(c in mode for c in "wax+")
  return isinstance(flags, int) and bool(flags & WRITE_FLAGS)


class Trace:
  """The files a process opens, split into read and written, relative to `root`."""

  def __init__(self, root: str):
    self.root = os.path.realpath(root)
    self.read: set[str] = set()
    self.written: set[str] = set()

  def _rel(self, path: object) -> str | None:
    if isinstance(path, bytes):
      path = os.fsdecode(path)
    if not isinstance(path, str):
      return None  # a file descriptor
    full = os.path.realpath(path)
    return os.path.relpath(full, self.root) if full.startswith(self.root + os.sep) else None

  def __call__(self, event: str, args: tuple) -> None:
    if event == "open":
      rel = self._rel(args[0])
      if rel is not None:
        (self.written if is_write(args[1], args[2]) else self.read).add(rel)
    elif event == "os.rename":
      rel = self._rel(args[1])
      if rel is not None:
        self.written.add(rel)

  def as_dict(self) -> dict[str, list[str]]:
    # an open that failed (a path tried, not there) is noted too: only files there at the end
    there = lambda ps: {p for p in ps if os.path.isfile(os.path.join(self.root, p))}  # noqa: E731
    written = there(self.written)
    return {"read": sorted(there(self.read) - written), "written": sorted(written)}


def main(argv: list[str]) -> None:
  if len(argv) < 3:
    sys.exit("usage: python -m resnorm_jax.analysis.traced_step TRACE.json SCRIPT [FLAGS...]")
  trace_path, script = argv[1], argv[2]
  trace = Trace(os.getcwd())
  sys.argv = argv[2:]
  sys.path[0] = os.path.dirname(os.path.abspath(script))
  sys.addaudithook(trace)
  try:
    runpy.run_path(script, run_name="__main__")
  finally:
    with open(trace_path, "w") as f:  # outside the repository: not a traced write
      json.dump(trace.as_dict(), f)


if __name__ == "__main__":
  main(sys.argv)
