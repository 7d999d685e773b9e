"""An I/O error told in one line: what failed, the OS's reason and the file, and the free space
on the disk (a checkpoint save, config.json, metrics.jsonl, summary.json alike)."""

from __future__ import annotations

import os
import shutil


def os_error(e: BaseException) -> OSError | None:
  """The OSError in an exception's chain (orbax wraps its threads' errors), if any."""
  seen = set()
  while e is not None and id(e) not in seen:
    if isinstance(e, OSError):
      return e
    seen.add(id(e))
    e = e.__cause__ or e.__context__
  return None


def free_space(path: str) -> str:
  """`12.3 MB free of 300.0 MB` on the filesystem of `path` (its nearest existing folder)."""
  if "://" in path:
    return "free space unknown (not a local folder)"
  path = os.path.abspath(path)
  while not os.path.exists(path) and os.path.dirname(path) != path:
    path = os.path.dirname(path)
  try:
    usage = shutil.disk_usage(path)
  except OSError:
    return "free space unknown"
  return f"{usage.free / 1e6:,.1f} MB free of {usage.total / 1e6:,.1f} MB"


def describe_io_error(e: BaseException, directory: str, doing: str) -> str:
  """`<doing> failed: No space left on device (writing FILE); 0.0 MB free of 1.0 MB on DIR`."""
  cause = os_error(e)
  if cause is None:
    reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
  else:
    reason = cause.strerror or str(cause)
    if cause.filename:
      reason += f" (writing {cause.filename})"
  return f"{doing} failed: {reason}; {free_space(directory)} on the disk of {directory}"
