"""Corpora: the train and held-out token arrays of `data.source`, checked against the model.

Pure NumPy. Sources (`data.source`): `stdlib` (the running Python's standard-library source,
split into train/val by file), `text` (a UTF-8 file or glob, byte level; held out: the tail,
or with `data.split=hash` pieces chosen by a hash of their bytes, resnorm_jax.data.heldout) and
`tokens`
(pre-tokenized shards: nanoGPT raw uint16 `.bin` and llm.c headered shards; a folder made by
`experiments.prepare_data` brings its manifest: splits, vocabulary and token counts, so
nothing is scanned at start). Several shards are read memory-mapped as one view
(shards.ShardedTokens), never copied. A prepared folder at a URL (`data.path=gs://...`) is
copied once into a local cache, $RESNORM_DATA_CACHE (default ~/.cache/resnorm_jax/data),
checked against its manifest. Every source carries a fingerprint of the files it read
(data_fingerprint.py: sizes and sha256s), which a resumed run compares with its checkpoint's.
Batches of them are batches.py; the no-context baseline's statistics unigram.py.
"""

import dataclasses
import glob
import os
import sysconfig
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from etils import epath

from resnorm_jax.data import data_fingerprint, fs, heldout
from resnorm_jax.data import token_files as shards_lib
from resnorm_jax.data.token_files import (  # noqa: F401  (re-exported: the llm.c format's constants)
  LLMC_DTYPES,
  LLMC_HEADER_BYTES,
  LLMC_HEADER_INTS,
  LLMC_MAGIC,
  DataError,
)

SOURCES = ("stdlib", "text", "tokens")
# data.split, without data.val_path: tail (the last val_fraction; every committed run) | hash
# (text: pieces of each file held out by a hash of their bytes)
SPLITS = ("tail", "hash")
BYTE_VOCAB = 256
CACHE_ENV = "RESNORM_DATA_CACHE"  # where a gs:// data folder is copied to
DEFAULT_CACHE = "~/.cache/resnorm_jax/data"
# Stdlib directories that hold third-party code, not the standard library.
_STDLIB_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
_STDLIB_CACHE: dict[tuple[str, float], "Corpus"] = {}


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Train and held-out 1-D token arrays (uint8 bytes or uint16/uint32 token ids).

  `split` says how the held-out part was made (recorded in config.json and summary.json):
  `method` (`by_file_hash`, `tail`, `val_path`), the token counts of both splits, the
  file counts and how many files matched by `data.val_path` were left out of training.
  `fingerprint`: what the data is (data_fingerprint.py), in config.json and checkpoints.
  """

  train: np.ndarray
  val: np.ndarray
  description: str
  split: dict = dataclasses.field(default_factory=dict)
  fingerprint: dict = dataclasses.field(default_factory=dict)


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
  _require_tokens_path(data_cfg)
  _check_source_and_path(data_cfg)
  val_path = getattr(data_cfg, "val_path", "") or ""
  how = _split_choice(data_cfg, val_path)
  val_fraction = float(data_cfg.val_fraction)
  if not val_path and not 0.0 < val_fraction < 1.0:
    raise DataError(
      f"data.val_fraction={val_fraction} must be in (0, 1) when data.val_path is unset"
    )
  if source == "stdlib":
    corpus = _load_stdlib(val_fraction)
  elif source == "text":
    corpus = _load_text(data_cfg.path, val_path, val_fraction, how)
  else:
    corpus = _load_tokens(data_cfg.path, val_path, val_fraction, vocab_size, how)
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
    _, manifest = _prepared_folder(os.path.expanduser(config.data.path))
    if manifest is not None:
      config.model.vocab_size = 0
      notes.append(f"model.vocab_size=0 (from its manifest: {manifest['tokenizer']['name']})")
  if not notes:
    return None
  return f"data.path={config.data.path}: {', '.join(notes)}"


def _check_source_and_path(data_cfg: Any) -> None:
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


def _split_choice(data_cfg: Any, val_path: str) -> str:
  """data.split, checked: `hash` needs documents and no data.val_path."""
  how = getattr(data_cfg, "split", "tail")
  if how not in SPLITS:
    raise DataError(f"data.split={how!r} is not one of {', '.join(SPLITS)}")
  if how == "hash" and val_path:
    raise DataError(
      f"data.split='hash' and data.val_path={val_path!r} both choose the held-out text: give one"
    )
  return how


def _require_tokens_path(data_cfg: Any) -> None:
  if data_cfg.source == "tokens" and not data_cfg.path:
    raise DataError(
      "data.source='tokens' and data.path is empty: give a folder made by "
      "experiments.prepare_data (or a glob of .bin shards) with --config.data.path=DIR, or, "
      "for the :paper configs, RESNORM_DATA=DIR"
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


def _load_stdlib(val_fraction: float) -> Corpus:
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
  train, val = _bytes_array(b"".join(train_parts)), _bytes_array(b"".join(val_parts))
  description = (
    f"stdlib {root} ({len(files)} files; {len(val_parts)} held out): "
    f"train {len(train):,} bytes, val {len(val):,} bytes"
  )
  split = _split_info(
    "by_file_hash", train, val, train_files=len(train_parts), val_files=len(val_parts)
  )
  record = {"name": f"the stdlib corpus of {root}", **data_fingerprint.bytes_record(train, val)}
  corpus = Corpus(train, val, description, split, fingerprint={"corpus": record})
  _STDLIB_CACHE[key] = corpus
  return corpus


def _split_info(method: str, train: np.ndarray, val: np.ndarray, **files: int) -> dict:
  """How a corpus was split, as config.json and summary.json record it."""
  return {"method": method, "train_tokens": len(train), "val_tokens": len(val), **files}


def _train_and_val_paths(path: str, val_path: str) -> tuple[list[str], list[str], int]:
  """(train files, held-out files, files left out of train because val_path matched them).

  A file matched by `data.val_path` is never trained on, even when the `data.path` glob
  matches it too (`corpus/*.txt` with `corpus/val.txt`): an eval on trained-on text would
  be optimistic with no sign of it.
  """
  paths = _expand(path, "data.path")
  if not val_path:
    return paths, [], 0
  val_paths = _expand(val_path, "data.val_path")
  held = {os.path.realpath(p) for p in val_paths}
  train_paths = [p for p in paths if os.path.realpath(p) not in held]
  if not train_paths:
    raise DataError(
      f"data.path={path!r} matches only files that data.val_path={val_path!r} holds out: "
      "nothing is left to train on"
    )
  return train_paths, val_paths, len(paths) - len(train_paths)


def _held_out(tokens, read_val, paths, val_paths, excluded, val_fraction, unit):
  """(train, val, description of the held-out part, split record): the files of
  `data.val_path` when given (read by `read_val`), else the tail of `tokens`."""
  if val_paths:
    train, val = tokens, read_val()
    held = f"val: {len(val_paths)} {unit}, {excluded} of them excluded from train"
    split = _split_info(
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
    split = _split_info("tail", train, val, train_files=len(paths), val_fraction=val_fraction)
  return train, val, held, split


def _bytes_array(data: bytes) -> np.ndarray:
  """Read-only uint8 view: cached corpora must not be changed by a caller."""
  return np.frombuffer(data, dtype=np.uint8)


def _expand(pattern: str, key: str) -> list[str]:
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


def _read_text(paths: list[str]) -> np.ndarray:
  """Concatenated bytes of the files; an empty file is an error."""
  parts = []
  for path in paths:
    with open(path, "rb") as f:
      data = f.read()
    if not data:
      raise DataError(f"text file {path!r} is empty")
    parts.append(data)
  return _bytes_array(b"".join(parts))


def _split_tail(tokens: np.ndarray, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
  """The last `val_fraction` of the tokens are held out."""
  n_val = int(round(len(tokens) * val_fraction))
  return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]


def _load_text(path: str, val_path: str, val_fraction: float, how: str = "tail") -> Corpus:
  """Byte-level text from a file or glob; val from `val_path`, the tail of the bytes or
  (how="hash") the pieces whose hash falls below `val_fraction`."""
  paths, val_paths, excluded = _train_and_val_paths(path, val_path)
  if how == "hash":
    train, val, held, split = _hashed_text(paths, val_fraction)
  else:
    tokens = _read_text(paths)
    train, val, held, split = _held_out(
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
  train, val = _bytes_array(b"".join(train_pieces)), _bytes_array(b"".join(val_pieces))
  held = f"{len(val_pieces)} of {len(train_pieces) + len(val_pieces)} pieces held out by hash"
  split = _split_info(
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


def _read_shard(path: str) -> np.ndarray:
  """Memory-maps one shard: llm.c (detected by its magic number) or nanoGPT raw uint16."""
  return shards_lib.read_shard(path)


def _checked_shard(path: str, vocab_size: int, vouched: dict[str, int]) -> np.ndarray:
  """One shard, memory-mapped. A shard the manifest lists (`vouched`: real path -> tokens)
  must hold as many tokens as it says; every shard's ids are checked against the vocabulary
  (a corrupt shard is bad input, not a divergence)."""
  shard = _read_shard(path)
  expected = vouched.get(os.path.realpath(path))
  if expected is not None and len(shard) != expected:
    raise DataError(f"{path!r} holds {len(shard)} tokens; its manifest says {expected}")
  shards_lib.check_token_ids(shard, vocab_size, path)
  return shard


def _read_shards(
  paths: list[str], vocab_size: int, vouched: dict | None = None, counts=None
) -> np.ndarray | shards_lib.ShardedTokens:
  """Shards checked against the vocabulary: one stays a memmap, several become one view."""
  parts = [_checked_shard(p, vocab_size, vouched or {}) for p in paths]
  if len(parts) == 1 and counts is None:
    return parts[0]
  return shards_lib.ShardedTokens(parts, counts=counts)


def _prepared_folder(path: str) -> tuple[str, dict] | tuple[None, None]:
  """(folder, manifest) when data.path (local or a URL) is a prepared folder or a glob
  inside one."""
  folder = path if epath.Path(path).is_dir() else os.path.dirname(path) or "."
  if glob.has_magic(folder):
    return None, None
  manifest = shards_lib.read_manifest(folder)
  return (folder, manifest) if manifest is not None else (None, None)


def manifest_vocab_size(data_cfg: Any) -> tuple[int, dict] | None:
  """(vocabulary size, tokenizer record) of data.path's manifest, if it has one."""
  if data_cfg.source != "tokens" or not data_cfg.path:
    return None
  _, manifest = _prepared_folder(os.path.expanduser(data_cfg.path))
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
    _check_source_and_path(data_cfg)
  found = manifest_vocab_size(data_cfg)
  if vocab_size == 0:
    _require_tokens_path(data_cfg)
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


def _load_prepared(
  folder: str, manifest: dict, path: str, val_path: str, vocab_size: int, source: str = ""
) -> Corpus:
  """A prepared folder: train = its train split (or the files data.path matches), held out
  = its val split (or data.val_path); never a held-out file in train. `source`: where the
  folder came from when `folder` is its local copy."""
  tok = manifest["tokenizer"]
  if tok["vocab_size"] > vocab_size:
    raise DataError(
      f"model.vocab_size={vocab_size} is smaller than {folder}'s tokenizer ({tok['name']}: "
      f"{tok['vocab_size']} ids)"
    )
  vouched = {
    os.path.realpath(os.path.join(folder, e["file"])): e["tokens"]
    for split in manifest["splits"].values()
    for e in split["shards"]
  }
  full = {s: shards_lib.split_files(folder, manifest, s) for s in ("train", "val")}
  paths = full["train"] if os.path.isdir(path) else _expand(path, "data.path")
  val_paths = _expand(val_path, "data.val_path") if val_path else full["val"]
  held = {os.path.realpath(p) for p in val_paths}
  train_paths = [p for p in paths if os.path.realpath(p) not in held]
  if not train_paths:
    raise DataError(f"data.path={path!r} matches only held-out shards: nothing to train on")
  counts = _manifest_counts(folder, manifest)
  real = lambda ps: [os.path.realpath(p) for p in ps]  # noqa: E731

  def whole(ps: list[str], split: str):  # a whole split's counts apply to it, not a part
    return counts.get(split) if real(ps) == real(full[split]) else None

  ids = tok["vocab_size"]  # an id past the tokenizer's is corrupt, even below the padding
  train = _read_shards(train_paths, ids, vouched, whole(train_paths, "train"))
  val = _read_shards(val_paths, ids, vouched, whole(val_paths, "val"))
  split = _split_info(
    "val_path" if val_path else "manifest",
    train,
    val,
    train_files=len(train_paths),
    val_files=len(val_paths),
    excluded_from_train=len(paths) - len(train_paths),
  )
  split["manifest"] = {
    "folder": source or os.path.abspath(folder),
    "fingerprint": manifest["fingerprint"],
    "tokenizer": tok["name"],
    "tokenizer_vocab_size": tok["vocab_size"],
  }
  description = (
    f"tokens {source or folder} ({tok['name']}, {tok['vocab_size']} ids, fingerprint "
    f"{manifest['fingerprint']}; {len(train_paths)} train shards, {len(val_paths)} held out): "
    f"train {len(train):,} tokens, val {len(val):,} tokens"
  )
  # Sampled: the manifest vouches for each file's full sha256, and a start reads none whole.
  files = data_fingerprint.files_record([*train_paths, *val_paths], root=folder, full_hash_bytes=0)
  fingerprint = {"manifest": manifest["fingerprint"], "files": files}
  return Corpus(train, val, description, split, fingerprint=fingerprint)


def _manifest_counts(folder: str, manifest: dict) -> dict[str, np.ndarray]:
  """Per-split token counts of a prepared folder (what unigram entropies need), if kept."""
  path = os.path.join(folder, shards_lib.COUNTS)
  if not manifest.get("token_counts") or not os.path.isfile(path):
    return {}
  with np.load(path) as f:
    return {k: np.asarray(f[k], dtype=np.int64) for k in f.files}


def _load_tokens(
  path: str, val_path: str, val_fraction: float, vocab_size: int, how: str = "tail"
) -> Corpus:
  """Pre-tokenized shards from a folder or glob; val from `val_path` or the tail of the
  tokens, or a prepared folder's own split (data.split does not apply: the folder's stands)."""
  path = os.path.expanduser(path) if path else path
  if fs.is_remote(path):
    return _load_remote(path, val_path, vocab_size)
  if path:
    if not glob.has_magic(path) and not os.path.exists(path):
      raise DataError(_missing_path(path))
    folder, manifest = _prepared_folder(path)
    if manifest is not None:
      return _load_prepared(folder, manifest, path, val_path, vocab_size)
    if how == "hash":
      raise DataError(
        f"data.split='hash' needs documents: data.path={path!r} holds token shards without "
        "a manifest; prepare the text with experiments.prepare_data (held out by document "
        "hash) or use data.source=text"
      )
    if os.path.isdir(path):
      path = os.path.join(path, "*.bin")
  paths, val_paths, excluded = _train_and_val_paths(path, val_path)
  tokens = _read_shards(paths, vocab_size)
  train, val, held, split = _held_out(
    tokens,
    lambda: _read_shards(val_paths, vocab_size),
    paths,
    val_paths,
    excluded,
    val_fraction,
    "shards",
  )
  description = (
    f"tokens {path!r} ({len(paths)} shards, {tokens.dtype}; {held}): "
    f"train {len(train):,} tokens, val {len(val):,} tokens"
  )
  files = data_fingerprint.files_record([*paths, *val_paths])
  return Corpus(train, val, description, split, fingerprint={"files": files})


def _missing_path(path: str) -> str:
  """What to do about a data.path that does not exist: the command that makes it, for a
  folder of resnorm_jax/data/prepare.py's RECIPES (the :wide scale's)."""
  from resnorm_jax.data import prepare  # only for its RECIPES: no tokenizer library is imported

  where = "" if os.path.isabs(path) else f" (relative to {os.getcwd()})"
  command = prepare.recipe_command(path)
  make = (
    f"make it with: {command}"
    if command
    else "give a folder made by experiments.prepare_data or a glob of .bin shards"
  )
  return f"data.path={path!r} does not exist{where}: {make}"


def _load_remote(url: str, val_path: str, vocab_size: int) -> Corpus:
  """A prepared folder at a URL (or a glob inside one): its local copy, read as a folder."""
  folder, manifest = _prepared_folder(url)
  if manifest is None:
    raise DataError(
      f"data.path={url!r} has no {shards_lib.MANIFEST}: a URL must name a folder made by "
      "experiments.prepare_data (or a glob inside one); copy other shards to a local disk"
    )
  local = shards_lib.local_copy(folder, manifest, os.environ.get(CACHE_ENV) or DEFAULT_CACHE)

  def localized(p: str, key: str) -> str:  # the same file in the local copy
    if not p.startswith(folder.rstrip("/")):
      raise DataError(f"{key}={p!r} is outside data.path's folder {folder!r}")
    return local + p[len(folder.rstrip("/")) :]

  path = localized(url, "data.path")
  val = localized(val_path, "data.val_path") if val_path else ""
  return _load_prepared(local, manifest, path, val, vocab_size, source=folder)
