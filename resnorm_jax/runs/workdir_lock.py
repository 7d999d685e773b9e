"""The workdir lock's parts: `fcntl.flock` on <workdir>/.lock, taken without following a
symbolic link, the holder it names (host, pid, start time) and what a second run is told.
workdir.hold holds it for a run's life. No JAX."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from typing import Any

# flock errors meaning the filesystem cannot lock (not that another process holds it).
_NO_LOCKING = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
_UNLOCKABLE = -1


class WorkdirInUse(ValueError):
  """A live run holds the workdir: refused like bad input (exit status 2)."""


def lockable(workdir: str) -> bool:
  """Whether flock can guard `workdir`: a mounted folder, not a URL."""
  return "://" not in workdir


def holder() -> dict[str, Any]:
  """What the lock file says about its holder: this process."""
  started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
  return {"host": socket.gethostname(), "pid": os.getpid(), "started": started}


def describe_holder(text: str) -> str:
  """`pid 123 on host vm, started ...` from a lock file's text (empty: not written yet)."""
  try:
    info = json.loads(text)
    return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
  except (ValueError, TypeError, KeyError):
    return "a process that has not written its name yet"


def _read_text(path: str) -> str:
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
  except OSError:
    return ""
  with open(fd) as f:
    try:
      return f.read()
    except (OSError, ValueError):
      return ""


class SymlinkedLock(ValueError):
  """The lock file is a symbolic link: never followed (writing the holder through it would
  overwrite the file it points to); refused like bad input (exit status 2)."""


def _refuse_symlink(path: str) -> None:
  """SymlinkedLock when `path` is a symbolic link (lstat: the link itself, not its target)."""
  try:
    is_link = stat.S_ISLNK(os.lstat(path).st_mode)
  except FileNotFoundError:
    return
  if is_link:
    raise SymlinkedLock(
      f"{path} is a symbolic link (to {os.readlink(path)!r}), not the run's lock file: it is "
      "never followed; remove the link (its target is left as it is) and run the same "
      "command again"
    )


def _try_lock(path: str) -> int | None:
  """An fd holding the flock on `path` (the file that is at `path` now), None if busy. A
  symbolic link at `path` is refused (SymlinkedLock), never opened: O_NOFOLLOW."""
  while True:
    _refuse_symlink(path)
    try:  # not inherited by child processes; a link made since the check fails with ELOOP
      fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
      if e.errno == errno.ELOOP:
        _refuse_symlink(path)
      raise
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      return None
    except BaseException:
      os.close(fd)
      raise
    try:
      same = os.lstat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if same:
      return fd
    # The holder removed the file between our open and flock: lock the file there now.
    os.close(fd)
