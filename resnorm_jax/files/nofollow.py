"""Files written never through a symbolic link (O_NOFOLLOW, lstat): a link where a run writes
would overwrite the file it points to, anywhere. On the ground floor, below config (config/cli.py
writes JSON with it); resnorm_jax/data/fs.py re-exports it. No JAX here.
"""

from __future__ import annotations

import errno
import os


def is_remote(path: str) -> bool:
  """A URL (gs://bucket/..., s3://...) rather than a local path."""
  return "://" in path


class SymlinkRefused(ValueError):
  """A file a run writes is a symbolic link: never followed (writing through it would
  overwrite the file it points to, anywhere); refused like bad input (exit status 2)."""


def refuse_symlink(path: str | os.PathLike) -> None:
  """SymlinkRefused when the local `path` is a symbolic link (lstat: the link itself, not
  its target); nothing when it is missing, a file, or a URL."""
  path = os.fspath(path)
  if is_remote(path):
    return
  try:
    is_link = os.path.islink(path)
    target = os.readlink(path) if is_link else ""
  except OSError:
    return
  if is_link:
    raise SymlinkRefused(
      f"{path} is a symbolic link (to {target!r}): a run never writes through one (the file "
      "it points to would be overwritten); remove the link (its target is left as it is) "
      "and run the same command again"
    )


def open_nofollow(path: str | os.PathLike, mode: str = "w", **kwargs):
  """open(path, mode, **kwargs) for writing ('w', 'a', 'wb', 'ab', 'r+b'; kwargs: newline=,
  encoding=), never through a symbolic link: O_NOFOLLOW, so a link made at `path` is refused
  (SymlinkRefused), not followed; a new file is made 0644 less the umask, as open() makes it."""
  path = os.fspath(path)
  refuse_symlink(path)
  flags = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}
  flags["r+"] = os.O_RDWR
  base = mode.replace("b", "")
  try:
    fd = os.open(path, flags[base] | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666)
  except OSError as e:
    if e.errno == errno.ELOOP:  # a link made since the check
      refuse_symlink(path)
    raise
  return os.fdopen(fd, mode, **kwargs)
