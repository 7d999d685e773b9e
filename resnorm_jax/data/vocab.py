"""model.vocab_size from the data: 0 means "from the data" (256 for bytes, a prepared
folder's tokenizer padded to a multiple of 128); an explicit size smaller than the
tokenizer's is refused.
"""

import os
from typing import Any

from resnorm_jax.data import token_files as shards_lib
from resnorm_jax.data.sources import (
  BYTE_VOCAB,
  SOURCES,
  check_source_and_path,
  require_tokens_path,
)
from resnorm_jax.data.token_files import DataError
from resnorm_jax.data.tokens_source import prepared_folder


def manifest_vocab_size(data_cfg: Any) -> tuple[int, dict] | None:
  """(vocabulary size, tokenizer record) of data.path's manifest, if it has one."""
  if data_cfg.source != "tokens" or not data_cfg.path:
    return None
  _, manifest = prepared_folder(os.path.expanduser(data_cfg.path))
  if manifest is None:
    return None
  return int(manifest["tokenizer"]["vocab_size"]), manifest["tokenizer"]


def resolve_vocab_size(data_cfg: Any, vocab_size: int) -> int:
  """model.vocab_size for this data: 0 means "from the data".

  0: 256 for the byte-level sources; for a prepared token folder, its tokenizer's size
  padded up to a multiple of 128 (GPT-2's 50257 -> 50304, as nanoGPT pads). An explicit
  size smaller than the tokenizer's is refused (ids past it would index nothing).
  """
  if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 0:
    raise DataError(f"model.vocab_size={vocab_size!r} must be a positive integer, or 0")
  if data_cfg.source in SOURCES:
    check_source_and_path(data_cfg)
  found = manifest_vocab_size(data_cfg)
  if vocab_size == 0:
    require_tokens_path(data_cfg)
    if data_cfg.source in ("stdlib", "text"):
      return BYTE_VOCAB
    if found is None:
      raise DataError(
        f"model.vocab_size=0 takes the vocabulary from the manifest.json of a folder made by "
        f"experiments.prepare_data; data.path={data_cfg.path!r} has none: set model.vocab_size"
      )
    return shards_lib.padded_vocab(found[0])
  if found is not None and vocab_size < found[0]:
    raise DataError(
      f"model.vocab_size={vocab_size} is smaller than the tokenizer of data.path="
      f"{data_cfg.path!r} ({found[1]['name']}: {found[0]} ids); model.vocab_size=0 takes "
      f"{shards_lib.padded_vocab(found[0])} (padded to a multiple of {shards_lib.VOCAB_MULTIPLE})"
    )
  return vocab_size
