"""`data.source=stdlib`: the running Python's standard-library `*.py` files as bytes, each
file held out by a hash of its path; loaded once per process (cached).
"""

import os
import sysconfig
import zlib

from resnorm_jax.data import data_fingerprint
from resnorm_jax.data.corpora import Corpus
from resnorm_jax.data.split import split_info
from resnorm_jax.data.text_source import bytes_array
from resnorm_jax.data.token_files import DataError

# Stdlib directories that hold third-party code, not the standard library.
_STDLIB_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
_STDLIB_CACHE: dict[tuple[str, float], "Corpus"] = {}


def stdlib_paths(root: str | None = None) -> list[str]:
  """The `*.py` files of the standard library at `root` (default: the running Python's),
  sorted (none: empty): the files data.source=stdlib reads."""
  root = root or sysconfig.get_paths()["stdlib"]
  paths = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = [d for d in dirnames if d not in _STDLIB_SKIP_DIRS]
    paths.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
  return sorted(paths)


def load_stdlib(val_fraction: float) -> Corpus:
  """Standard-library `*.py` files as bytes, each file to train or val by a hash of its path."""
  root = sysconfig.get_paths()["stdlib"]
  key = (root, val_fraction)
  if key in _STDLIB_CACHE:
    return _STDLIB_CACHE[key]
  files = stdlib_paths(root)
  if not files:
    raise DataError(f"no *.py files found under the standard library at {root!r}")
  train_parts, val_parts = [], []
  threshold = val_fraction * 1000
  for path in files:
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    with open(path, "rb") as f:
      data = f.read()
    # A hash of the path, not of the order: adding a file elsewhere does not move this one.
    (val_parts if zlib.crc32(rel.encode()) % 1000 < threshold else train_parts).append(data)
  train, val = bytes_array(b"".join(train_parts)), bytes_array(b"".join(val_parts))
  description = (
    f"stdlib {root} ({len(files)} files; {len(val_parts)} held out): "
    f"train {len(train):,} bytes, val {len(val):,} bytes"
  )
  split = split_info(
    "by_file_hash", train, val, train_files=len(train_parts), val_files=len(val_parts)
  )
  record = {"name": f"the stdlib corpus of {root}", **data_fingerprint.bytes_record(train, val)}
  corpus = Corpus(train, val, description, split, fingerprint={"corpus": record})
  _STDLIB_CACHE[key] = corpus
  return corpus
