"""`data.source`: which source a config or a data.path names, the checks of source and path,
and `load_corpus`, which loads the corpus of a config and checks it against the model.

Sources: `stdlib` (the running Python's standard-library source, split into train/val by
file; stdlib_source.py), `text` (a UTF-8 file or glob, byte level; text_source.py) and
`tokens` (pre-tokenized shards or a folder made by `experiments.prepare_data`, local or at a
URL; tokens_source.py). How each holds out its val split is split.py.
"""

import glob
import os
from collections.abc import Mapping
from typing import Any

from resnorm_jax.data import fs
from resnorm_jax.data import token_files as shards_lib
from resnorm_jax.data.corpora import Corpus
from resnorm_jax.data.split import split_choice
from resnorm_jax.data.stdlib_source import load_stdlib
from resnorm_jax.data.text_source import load_text
from resnorm_jax.data.token_files import DataError
from resnorm_jax.data.tokens_source import load_tokens, prepared_folder

SOURCES = ("stdlib", "text", "tokens")
BYTE_VOCAB = 256


def load_corpus(data_cfg: Any, vocab_size: int, seq_len: int) -> Corpus:
  """Loads the corpus named by `data_cfg.source` and checks it against vocab and seq_len."""
  source = data_cfg.source
  if source not in SOURCES:
    raise DataError(f"data.source={source!r} is not one of {', '.join(SOURCES)}")
  if source in ("stdlib", "text") and vocab_size < BYTE_VOCAB:
    raise DataError(
      f"model.vocab_size={vocab_size} is too small for the byte-level source {source!r}: "
      f"bytes need {BYTE_VOCAB}"
    )
  if source == "stdlib" and not getattr(data_cfg, "allow_stdlib", True):
    raise DataError(
      "data.source='stdlib' is refused by this config (the paper scale: a 31 MB corpus seen "
      "hundreds of times). Train on real text: python -m experiments.prepare_data, then "
      "RESNORM_DATA=DIR or --config.data.source=tokens --config.data.path=DIR; or pass "
      "--config.data.allow_stdlib=true to train on the stdlib corpus anyway"
    )
  require_tokens_path(data_cfg)
  check_source_and_path(data_cfg)
  val_path = getattr(data_cfg, "val_path", "") or ""
  how = split_choice(data_cfg, val_path)
  val_fraction = float(data_cfg.val_fraction)
  if not val_path and not 0.0 < val_fraction < 1.0:
    raise DataError(
      f"data.val_fraction={val_fraction} must be in (0, 1) when data.val_path is unset"
    )
  if source == "stdlib":
    corpus = load_stdlib(val_fraction)
  elif source == "text":
    corpus = load_text(data_cfg.path, val_path, val_fraction, how)
  else:
    corpus = load_tokens(data_cfg.path, val_path, val_fraction, vocab_size, how)
  for split, tokens in (("train", corpus.train), ("val", corpus.val)):
    if len(tokens) < seq_len + 1:
      raise DataError(
        f"{split} split of {corpus.description} has {len(tokens)} tokens; one sequence of "
        f"train.seq_len={seq_len} needs at least {seq_len + 1}"
      )
  return corpus


def source_for_path(path: str) -> str:
  """The source a data.path names: `tokens` for a folder made by experiments.prepare_data
  (its manifest.json), a folder of .bin shards, .bin files or a URL; `text` for any other
  file or glob. DataError naming the value and the choices when it names nothing."""
  if fs.is_remote(path):
    return "tokens"
  local = os.path.expanduser(path)
  if os.path.isdir(local):
    if os.path.isfile(os.path.join(local, shards_lib.MANIFEST)) or glob.glob(
      os.path.join(local, "*.bin")
    ):
      return "tokens"
    raise DataError(
      f"data.path={path!r} is a folder with neither {shards_lib.MANIFEST} nor .bin shards: "
      f"give a text file or glob ({os.path.join(path, '*.txt')!r}, data.source=text) or a "
      "folder made by experiments.prepare_data (data.source=tokens)"
    )
  files = [p for p in glob.glob(local, recursive=True) if os.path.isfile(p)]
  if not files:
    raise DataError(
      f"data.path={path!r} matches no file or folder"
      + (f" (relative to {os.getcwd()})" if not os.path.isabs(local) else "")
      + ": give a text file or glob (data.source=text) or a folder made by "
      "experiments.prepare_data (data.source=tokens)"
    )
  return "tokens" if all(p.endswith(".bin") for p in files) else "text"


def source_from_path(config: Any, overrides: Mapping[str, Any]) -> str | None:
  """data.path given on the command line without data.source names its own source.

  Sets config.data.source from the path (source_for_path) and, for a prepared folder whose
  vocabulary model.vocab_size was not also given, model.vocab_size=0 (from its manifest):
  training on a folder needs no other override. Returns a one-line note of what was set, or
  None when data.path was not given alone. DataError for a path that names no data.
  """
  if "data.path" not in overrides or "data.source" in overrides or not config.data.path:
    return None
  try:
    source = source_for_path(config.data.path)
  except DataError:
    if config.data.source != "stdlib":  # the config names its source (a :wide folder): its
      return None  # own check names the path and the command that makes it
    raise
  notes = []
  if source != config.data.source:
    notes.append(f"data.source={source}")
  config.data.source = source
  if source == "tokens" and "model.vocab_size" not in overrides and config.model.vocab_size:
    _, manifest = prepared_folder(os.path.expanduser(config.data.path))
    if manifest is not None:
      config.model.vocab_size = 0
      notes.append(f"model.vocab_size=0 (from its manifest: {manifest['tokenizer']['name']})")
  if not notes:
    return None
  return f"data.path={config.data.path}: {', '.join(notes)}"


def check_source_and_path(data_cfg: Any) -> None:
  """Refuses a data.path the source would not read: never a silent fall-back to stdlib."""
  path = data_cfg.path
  if not path:
    return
  if data_cfg.source == "stdlib":
    raise DataError(
      f"data.source='stdlib' reads no file, but data.path={path!r} is set: for that data give "
      f"--config.data.source=text (a text file or glob) or tokens (a folder made by "
      "experiments.prepare_data), or give data.path alone on the command line; for the stdlib "
      "corpus leave data.path empty"
    )
  local = os.path.expanduser(path)
  if data_cfg.source == "text" and os.path.isfile(os.path.join(local, shards_lib.MANIFEST)):
    raise DataError(
      f"data.source='text' and data.path={path!r} is a folder made by "
      "experiments.prepare_data: give data.source=tokens (or data.path alone)"
    )


def require_tokens_path(data_cfg: Any) -> None:
  if data_cfg.source == "tokens" and not data_cfg.path:
    raise DataError(
      "data.source='tokens' and data.path is empty: give a folder made by "
      "experiments.prepare_data (or a glob of .bin shards) with --config.data.path=DIR, or, "
      "for the :paper configs, RESNORM_DATA=DIR"
    )
