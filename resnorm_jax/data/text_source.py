"""`data.source=text`: a UTF-8 file or glob, byte level; held out: the files of
`data.val_path`, the tail, or with `data.split=hash` pieces chosen by a hash of their bytes
(resnorm_jax.data.heldout).
"""

import numpy as np

from resnorm_jax.data import data_fingerprint, heldout
from resnorm_jax.data.corpora import Corpus
from resnorm_jax.data.split import held_out, split_info, train_and_val_paths
from resnorm_jax.data.token_files import DataError


def bytes_array(data: bytes) -> np.ndarray:
  """Read-only uint8 view: cached corpora must not be changed by a caller."""
  return np.frombuffer(data, dtype=np.uint8)


def utf8_text(data: bytes, what: str) -> str:
  """`data` decoded as UTF-8; ValueError naming `what` (a file) when it is not UTF-8 text (a
  binary file, a compiled program): the check of data.source=text and of prepare_data."""
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise DataError(f"{what} is not UTF-8 text: {e}") from None


def _read_text(paths: list[str]) -> np.ndarray:
  """Concatenated bytes of the files; an empty file, or one that is not UTF-8 text, is an
  error."""
  parts = []
  for path in paths:
    with open(path, "rb") as f:
      data = f.read()
    if not data:
      raise DataError(f"text file {path!r} is empty")
    utf8_text(data, f"text file {path!r} (data.source=text)")
    parts.append(data)
  return bytes_array(b"".join(parts))


def load_text(path: str, val_path: str, val_fraction: float, how: str = "tail") -> Corpus:
  """Byte-level text from a file or glob; val from `val_path`, the tail of the bytes or
  (how="hash") the pieces whose hash falls below `val_fraction`."""
  paths, val_paths, excluded = train_and_val_paths(path, val_path)
  if how == "hash":
    train, val, held, split = _hashed_text(paths, val_fraction)
  else:
    tokens = _read_text(paths)
    train, val, held, split = held_out(
      tokens, lambda: _read_text(val_paths), paths, val_paths, excluded, val_fraction, "files"
    )
  description = (
    f"text {path!r} ({len(paths)} files; {held}): "
    f"train {len(train):,} bytes, val {len(val):,} bytes"
  )
  files = data_fingerprint.files_record([*paths, *val_paths])
  return Corpus(train, val, description, split, fingerprint={"files": files})


def _hashed_text(paths: list[str], val_fraction: float):
  """(train, val, description, split record): each file cut into pieces at line ends, each
  piece held out by its hash (resnorm_jax.data.heldout), both splits in file order."""
  files = [_read_text([p]).tobytes() for p in paths]
  limit = heldout.piece_limit(sum(map(len, files)), val_fraction)
  train_pieces, val_pieces = heldout.split(files, val_fraction, limit)
  train, val = bytes_array(b"".join(train_pieces)), bytes_array(b"".join(val_pieces))
  held = f"{len(val_pieces)} of {len(train_pieces) + len(val_pieces)} pieces held out by hash"
  split = split_info(
    "document_hash",
    train,
    val,
    train_files=len(paths),
    val_fraction=val_fraction,
    piece_bytes=limit,
    train_pieces=len(train_pieces),
    val_pieces=len(val_pieces),
  )
  return train, val, held, split
