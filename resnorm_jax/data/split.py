"""A corpus's held-out split: `data.split` (tail | hash) checked, the files `data.path` and
`data.val_path` name (a held-out file never trained on), the tail of the tokens held out, and
the record of how it was split that config.json and summary.json keep. The hash split's
pieces are heldout.py; text_source.py applies it to text.
"""

import glob
import os
from typing import Any

import numpy as np

from resnorm_jax.data.token_files import DataError

# data.split, without data.val_path: tail (the last val_fraction; every committed run) | hash
# (text: pieces of each file held out by a hash of their bytes)
SPLITS = ("tail", "hash")


def split_choice(data_cfg: Any, val_path: str) -> str:
  """data.split, checked: `hash` needs documents and no data.val_path."""
  how = getattr(data_cfg, "split", "tail")
  if how not in SPLITS:
    raise DataError(f"data.split={how!r} is not one of {', '.join(SPLITS)}")
  if how == "hash" and val_path:
    raise DataError(
      f"data.split='hash' and data.val_path={val_path!r} both choose the held-out text: give one"
    )
  return how


def split_info(method: str, train: np.ndarray, val: np.ndarray, **files: int) -> dict:
  """How a corpus was split, as config.json and summary.json record it."""
  return {"method": method, "train_tokens": len(train), "val_tokens": len(val), **files}


def train_and_val_paths(path: str, val_path: str) -> tuple[list[str], list[str], int]:
  """(train files, held-out files, files left out of train because val_path matched them).

  A file matched by `data.val_path` is never trained on, even when the `data.path` glob
  matches it too (`corpus/*.txt` with `corpus/val.txt`): an eval on trained-on text would
  be optimistic with no sign of it.
  """
  paths = expand(path, "data.path")
  if not val_path:
    return paths, [], 0
  val_paths = expand(val_path, "data.val_path")
  held = {os.path.realpath(p) for p in val_paths}
  train_paths = [p for p in paths if os.path.realpath(p) not in held]
  if not train_paths:
    raise DataError(
      f"data.path={path!r} matches only files that data.val_path={val_path!r} holds out: "
      "nothing is left to train on"
    )
  return train_paths, val_paths, len(paths) - len(train_paths)


def held_out(tokens, read_val, paths, val_paths, excluded, val_fraction, unit):
  """(train, val, description of the held-out part, split record): the files of
  `data.val_path` when given (read by `read_val`), else the tail of `tokens`."""
  if val_paths:
    train, val = tokens, read_val()
    held = f"val: {len(val_paths)} {unit}, {excluded} of them excluded from train"
    split = split_info(
      "val_path",
      train,
      val,
      train_files=len(paths),
      val_files=len(val_paths),
      excluded_from_train=excluded,
    )
  else:
    train, val = _split_tail(tokens, val_fraction)
    held = f"last {val_fraction:g} held out"
    split = split_info("tail", train, val, train_files=len(paths), val_fraction=val_fraction)
  return train, val, held, split


def expand(pattern: str, key: str) -> list[str]:
  """Sorted files matching a path or glob; DataError when nothing matches."""
  if not pattern:
    raise DataError(f"{key} is empty: expected a file path or glob")
  if os.path.isdir(os.path.expanduser(pattern)):
    raise DataError(
      f"{key}={pattern!r} is a folder: give a file or a glob of files "
      f"({os.path.join(pattern, '*.txt')!r})"
    )
  paths = sorted(
    p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p)
  )
  if not paths:
    raise DataError(f"{key}={pattern!r} matches no file")
  return paths


def _split_tail(tokens: np.ndarray, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
  """The last `val_fraction` of the tokens are held out."""
  n_val = int(round(len(tokens) * val_fraction))
  return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]
