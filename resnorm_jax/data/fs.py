"""Local paths and URLs (gs://...) through one layer, etils.epath: everything a run writes and
reads itself (metrics.jsonl, TensorBoard events, config.json, summary.json, a prepared data
folder), so a gs:// workdir or data folder needs no mount and never becomes a local `gs:/...`.

An object store replaces an object whole and has no append: a file that grows as the run goes
(metrics.jsonl, TensorBoard's event files) is written in a local staging folder and uploaded
whole by `Staging.sync` (at intervals, before each checkpoint, at the end), as TensorFlow's own
GCS file does. A local workdir is written in place (a local file appends).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from typing import Any

from etils import epath

# never through a symbolic link: declared on the ground floor, files/ (config/cli.py uses it)
from resnorm_jax.files.nofollow import (
  open_nofollow,
  refuse_symlink,
)

COPY_CHUNK = 1 << 24  # bytes per read when copying between filesystems


def read_json(path: str | os.PathLike) -> Any:
  """The content of a JSON file (local or gs://), or None when it is missing or unreadable."""
  try:
    return json.loads(epath.Path(path).read_text())
  except (OSError, ValueError):
    return None


def is_remote(path: str | os.PathLike) -> bool:
  """A URL (gs://bucket/..., s3://...) rather than a local path."""
  return "://" in os.fspath(path)


# The fsspec protocol epath asks for, per URL scheme, and the package that serves it.
_FILESYSTEMS = {"gs": ("gcs", "gcsfs"), "s3": ("s3", "s3fs"), "az": ("az", "adlfs")}


def missing_filesystem(path: str | os.PathLike) -> str | None:
  """The package a URL's filesystem needs when it cannot be loaded (`gcsfs` for gs://...),
  else None: epath reaches such a path through fsspec (TensorFlow's gfile where TensorFlow is
  installed), which would fail only at the first write, in a long traceback."""
  import importlib.util

  scheme = os.fspath(path).split("://")[0] if is_remote(path) else ""
  if scheme not in _FILESYSTEMS or importlib.util.find_spec("tensorflow") is not None:
    return None
  protocol, package = _FILESYSTEMS[scheme]
  try:  # fsspec comes with the filesystem's package (gcsfs: requirements-tpu.txt)
    import fsspec

    fsspec.get_filesystem_class(protocol)
  except ImportError:
    return package
  return None


def unique_suffix() -> str:
  """`<host>.<pid>`: temporary names that two hosts writing one shared folder never share."""
  return f"{socket.gethostname()}.{os.getpid()}"


def replace_text(path: str, text: str) -> None:
  """Replaces a file's text so a reader never sees half of it; a local file keeps its mode."""
  dest = epath.Path(path)
  if is_remote(path):
    dest.write_text(text)  # an object is replaced whole: readers see the old or the new
    return
  refuse_symlink(dest)
  tmp = dest.with_name(f".{dest.name}.{unique_suffix()}.tmp")
  with open_nofollow(tmp) as f:
    f.write(text)
  if dest.exists():
    shutil.copymode(dest, tmp)  # a temporary file is 0600 or the umask's; keep the original's
  tmp.replace(dest)


def copy_file(src: str, dest: str) -> None:
  """Copies one file between any two filesystems, streamed."""
  with epath.Path(src).open("rb") as f, epath.Path(dest).open("wb") as g:
    shutil.copyfileobj(f, g, COPY_CHUNK)


class Staging:
  """A local folder mirrored into `dest` (a URL): `sync()` uploads each file changed since the
  last sync, whole; `close()` syncs and removes the local folder. Files already in `dest` are
  left alone (another segment's event files); `pull(name)` brings one down to append to."""

  def __init__(self, dest: str):
    self.dest = epath.Path(dest)
    self.local = tempfile.mkdtemp(prefix="resnorm_staging_")
    self._sent: dict[str, tuple[int, int]] = {}
    self._made = False

  def pull(self, name: str) -> bool:
    """Copies dest/name into the staging folder if it exists; returns whether it did."""
    src = self.dest / name
    if not src.exists():
      return False
    copy_file(os.fspath(src), os.path.join(self.local, name))
    self._sent[name] = self._stamp(name)  # already there: nothing to upload yet
    return True

  def _stamp(self, name: str) -> tuple[int, int]:
    st = os.stat(os.path.join(self.local, name))
    return st.st_size, st.st_mtime_ns

  def sync(self) -> None:
    """Uploads every file that changed since the last sync."""
    if not self._made:
      self.dest.mkdir(parents=True, exist_ok=True)
      self._made = True
    for name in sorted(os.listdir(self.local)):
      stamp = self._stamp(name)
      if self._sent.get(name) != stamp:
        copy_file(os.path.join(self.local, name), os.fspath(self.dest / name))
        self._sent[name] = stamp

  def close(self) -> None:
    """Syncs, then removes the staging folder (also when the upload fails)."""
    try:
      self.sync()
    finally:
      shutil.rmtree(self.local, ignore_errors=True)
