"""`data.source=stdlib`: the running Python's standard-library `*.py` files as bytes, each
file held out by a hash of its path; loaded once per process (cached).

The corpus is whatever Python runs the job: Python 3.12's standard library has 1,740 files
and a slightly different unigram entropy from 3.11's 1,790. The description (the run's setup
line) names the Python version, the file count and a fingerprint of the bytes, and
`corpus.warning` is one line when they differ from RESULTS_CORPUS, the corpus every committed
number (README, docs/) was made with.
"""

import hashlib
import os
import platform
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
# The stdlib corpus of the committed results: Python 3.11.7's standard library (31,525,224
# bytes; unigram entropy 3.252 nats). `fingerprint`: corpus_fingerprint of its files.
RESULTS_CORPUS = {"python": "3.11.7", "files": 1790, "fingerprint": "92debcc73de5"}


def corpus_fingerprint(contents: list[bytes]) -> str:
  """12 hex digits of the sha256 of the files' bytes in path order: the same on every machine
  with the same standard library, whatever its folder or data.val_fraction."""
  digest = hashlib.sha256()
  for data in contents:
    digest.update(data)
  return digest.hexdigest()[:12]


def results_warning(python: str, files: int, fingerprint: str) -> str:
  """One line when this corpus is not the committed results' (RESULTS_CORPUS); else ''."""
  want = RESULTS_CORPUS
  if (files, fingerprint) == (want["files"], want["fingerprint"]):
    return ""
  return (
    f"warning: the stdlib corpus is Python {python}'s ({files:,} files, fingerprint "
    f"{fingerprint}), not Python {want['python']}'s ({want['files']:,} files, fingerprint "
    f"{want['fingerprint']}) that the committed results were made with: losses differ"
  )


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
  train_parts, val_parts, contents = [], [], []
  threshold = val_fraction * 1000
  for path in files:
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    with open(path, "rb") as f:
      data = f.read()
    contents.append(data)
    # A hash of the path, not of the order: adding a file elsewhere does not move this one.
    (val_parts if zlib.crc32(rel.encode()) % 1000 < threshold else train_parts).append(data)
  train, val = bytes_array(b"".join(train_parts)), bytes_array(b"".join(val_parts))
  python, fingerprint = platform.python_version(), corpus_fingerprint(contents)
  description = (
    f"stdlib of Python {python}, fingerprint {fingerprint}, at {root} ({len(files)} files; "
    f"{len(val_parts)} held out): train {len(train):,} bytes, val {len(val):,} bytes"
  )
  split = split_info(
    "by_file_hash", train, val, train_files=len(train_parts), val_files=len(val_parts)
  )
  record = {"name": f"the stdlib corpus of {root}", **data_fingerprint.bytes_record(train, val)}
  corpus = Corpus(
    train,
    val,
    description,
    split,
    fingerprint={"corpus": record},
    warning=results_warning(python, len(files), fingerprint),
  )
  _STDLIB_CACHE[key] = corpus
  return corpus
