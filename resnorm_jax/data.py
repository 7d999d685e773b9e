"""Corpora -> deterministic batches: a batch is a pure function of (seed, step, process index).

Pure NumPy. Sources (`data.source`): `stdlib` (the running Python's standard-library source,
split into train/val by file), `text` (a UTF-8 file or glob, byte level) and `tokens`
(pre-tokenized shards: nanoGPT raw uint16 `.bin` and llm.c headered shards).
Shapes: B = rows of this process, T = sequence length.
"""

import dataclasses
import glob
import os
import sysconfig
import zlib
from typing import Any

import numpy as np

SOURCES = ("stdlib", "text", "tokens")
BYTE_VOCAB = 256
# llm.c shard header: 256 little-endian int32; [0] magic, [1] version, [2] number of tokens.
LLMC_MAGIC = 20240520
LLMC_HEADER_INTS = 256
LLMC_HEADER_BYTES = LLMC_HEADER_INTS * 4
LLMC_DTYPES = {1: np.dtype("<u2"), 2: np.dtype("<u4")}  # 1: GPT-2 uint16, 2: Llama-3 uint32
# Held-out batches draw from their own stream: a 3-word key never equals a train [seed, step].
EVAL_STREAM = (12345, 1)
# Stdlib directories that hold third-party code, not the standard library.
_STDLIB_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
_STDLIB_CACHE: dict[tuple[str, float], "Corpus"] = {}


class DataError(ValueError):
  """Bad data input: a missing file, a short corpus, a token id outside the vocabulary."""


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Train and held-out 1-D token arrays (uint8 bytes or uint16/uint32 token ids).

  `split` says how the held-out part was made (recorded in config.json and summary.json):
  `method` (`by_file_hash`, `tail`, `val_path`), the token counts of both splits, the
  file counts and how many files matched by `data.val_path` were left out of training.
  """

  train: np.ndarray
  val: np.ndarray
  description: str
  split: dict = dataclasses.field(default_factory=dict)


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
  val_path = getattr(data_cfg, "val_path", "") or ""
  val_fraction = float(data_cfg.val_fraction)
  if not val_path and not 0.0 < val_fraction < 1.0:
    raise DataError(
      f"data.val_fraction={val_fraction} must be in (0, 1) when data.val_path is unset"
    )
  if source == "stdlib":
    corpus = _load_stdlib(val_fraction)
  elif source == "text":
    corpus = _load_text(data_cfg.path, val_path, val_fraction)
  else:
    corpus = _load_tokens(data_cfg.path, val_path, val_fraction, vocab_size)
  for split, tokens in (("train", corpus.train), ("val", corpus.val)):
    if len(tokens) < seq_len + 1:
      raise DataError(
        f"{split} split of {corpus.description} has {len(tokens)} tokens; one sequence of "
        f"train.seq_len={seq_len} needs at least {seq_len + 1}"
      )
  return corpus


def _load_stdlib(val_fraction: float) -> Corpus:
  """Standard-library `*.py` files as bytes, each file to train or val by a hash of its path."""
  root = sysconfig.get_paths()["stdlib"]
  key = (root, val_fraction)
  if key in _STDLIB_CACHE:
    return _STDLIB_CACHE[key]
  files = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = [d for d in dirnames if d not in _STDLIB_SKIP_DIRS]
    files.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
  if not files:
    raise DataError(f"no *.py files found under the standard library at {root!r}")
  train_parts, val_parts = [], []
  threshold = val_fraction * 1000
  for path in sorted(files):
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
  corpus = Corpus(train=train, val=val, description=description, split=split)
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


def _bytes_array(data: bytes) -> np.ndarray:
  """Read-only uint8 view: cached corpora must not be changed by a caller."""
  return np.frombuffer(data, dtype=np.uint8)


def _expand(pattern: str, key: str) -> list[str]:
  """Sorted files matching a path or glob; DataError when nothing matches."""
  if not pattern:
    raise DataError(f"{key} is empty: expected a file path or glob")
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


def _load_text(path: str, val_path: str, val_fraction: float) -> Corpus:
  """Byte-level text from a file or glob; val from `val_path` or the tail of the bytes."""
  paths, val_paths, excluded = _train_and_val_paths(path, val_path)
  tokens = _read_text(paths)
  if val_path:
    train, val = tokens, _read_text(val_paths)
    held = f"val {val_path!r}, {len(val_paths)} files, {excluded} of them excluded from train"
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
  description = (
    f"text {path!r} ({len(paths)} files; {held}): "
    f"train {len(train):,} bytes, val {len(val):,} bytes"
  )
  return Corpus(train=train, val=val, description=description, split=split)


def _read_shard(path: str) -> np.ndarray:
  """Memory-maps one shard: llm.c (detected by its magic number) or nanoGPT raw uint16."""
  size = os.path.getsize(path)
  if size == 0:
    raise DataError(f"token shard {path!r} is empty")
  header = (
    np.fromfile(path, dtype="<i4", count=LLMC_HEADER_INTS) if size >= LLMC_HEADER_BYTES else None
  )
  if header is not None and header[0] == LLMC_MAGIC:
    version, count = int(header[1]), int(header[2])
    if version not in LLMC_DTYPES:
      raise DataError(
        f"llm.c shard {path!r} has version {version}; expected one of {sorted(LLMC_DTYPES)}"
      )
    dtype = LLMC_DTYPES[version]
    expected = LLMC_HEADER_BYTES + count * dtype.itemsize
    if size != expected or count == 0:
      raise DataError(
        f"llm.c shard {path!r} header says {count} tokens ({expected} bytes) but the file "
        f"has {size} bytes"
      )
    return np.memmap(path, dtype=dtype, mode="r", offset=LLMC_HEADER_BYTES, shape=(count,))
  if size % 2:
    raise DataError(f"raw uint16 token shard {path!r} has an odd size of {size} bytes")
  return np.memmap(path, dtype="<u2", mode="r")


def _max_token(tokens: np.ndarray, chunk: int = 1 << 24) -> int:
  """Max over a memmap in chunks, so a large shard is streamed rather than copied."""
  return max(int(tokens[i : i + chunk].max()) for i in range(0, len(tokens), chunk))


def _read_shards(paths: list[str], vocab_size: int) -> np.ndarray:
  """Shards checked against the vocabulary and joined (one shard stays a memmap)."""
  shards = []
  for path in paths:
    shard = _read_shard(path)
    top = _max_token(shard)
    if top >= vocab_size:
      raise DataError(
        f"token id {top} in {path!r} is out of range for model.vocab_size={vocab_size}"
      )
    shards.append(shard)
  # Several shards are copied into memory; a single one is read lazily from disk.
  return shards[0] if len(shards) == 1 else np.concatenate(shards)


def _load_tokens(path: str, val_path: str, val_fraction: float, vocab_size: int) -> Corpus:
  """Pre-tokenized shards from a glob; val from `val_path` or the tail of the tokens."""
  paths, val_paths, excluded = _train_and_val_paths(path, val_path)
  tokens = _read_shards(paths, vocab_size)
  if val_path:
    train, val = tokens, _read_shards(val_paths, vocab_size)
    held = f"val {val_path!r}, {len(val_paths)} shards, {excluded} of them excluded from train"
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
  description = (
    f"tokens {path!r} ({len(paths)} shards, {tokens.dtype}; {held}): "
    f"train {len(train):,} tokens, val {len(val):,} tokens"
  )
  return Corpus(train=train, val=val, description=description, split=split)


def _rows(
  rng: np.random.Generator,
  tokens: np.ndarray,
  batch_size: int,
  seq_len: int,
  process_index: int,
  process_count: int,
) -> tuple[np.ndarray, np.ndarray]:
  """Draws the global batch's offsets, gathers only this process's rows."""
  if batch_size <= 0 or seq_len <= 0:
    raise DataError(f"batch_size={batch_size} and seq_len={seq_len} must be positive")
  if process_count <= 0 or not 0 <= process_index < process_count:
    raise DataError(f"process_index={process_index} must be in [0, process_count={process_count})")
  if batch_size % process_count:
    raise DataError(f"batch_size={batch_size} is not divisible by process_count={process_count}")
  if len(tokens) < seq_len + 1:
    raise DataError(f"{len(tokens)} tokens cannot fill one sequence of seq_len={seq_len} + 1")
  # All offsets are drawn on every process, so the global batch does not depend on the
  # process count; only this process's rows are read from the corpus.
  starts_B = rng.integers(0, len(tokens) - seq_len, size=batch_size)
  b = batch_size // process_count
  starts_B = starts_B[process_index * b : (process_index + 1) * b]
  window_BxT1 = np.asarray(tokens[starts_B[:, None] + np.arange(seq_len + 1)], dtype=np.int32)
  return window_BxT1[:, :-1], window_BxT1[:, 1:]


def get_batch(
  tokens: np.ndarray,
  *,
  seed: int,
  step: int,
  batch_size: int,
  seq_len: int,
  process_index: int = 0,
  process_count: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
  """Training (inputs_BxT, targets_BxT) int32 for this process: a pure function of its args."""
  if seed < 0 or step < 0:
    raise DataError(f"seed={seed} and step={step} must be non-negative")
  rng = np.random.default_rng([seed, step])
  return _rows(rng, tokens, batch_size, seq_len, process_index, process_count)


def eval_batch(
  tokens: np.ndarray,
  *,
  index: int,
  batch_size: int,
  seq_len: int,
  process_index: int = 0,
  process_count: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
  """Held-out batch number `index`: the same rows for every run, whatever its seed."""
  if index < 0:
    raise DataError(f"eval batch index={index} must be non-negative")
  rng = np.random.default_rng([*EVAL_STREAM, index])
  return _rows(rng, tokens, batch_size, seq_len, process_index, process_count)


def token_counts(tokens: np.ndarray, vocab_size: int, chunk: int = 1 << 24) -> np.ndarray:
  """How often each id occurs: int64 [vocab_size]."""
  counts = np.zeros(vocab_size, dtype=np.int64)
  # Chunked so a large memmap is never widened to int64 in one piece.
  for i in range(0, len(tokens), chunk):
    c = np.bincount(np.asarray(tokens[i : i + chunk]), minlength=vocab_size)
    if len(c) > vocab_size:
      raise DataError(f"token id {len(c) - 1} is out of range for vocab_size={vocab_size}")
    counts += c
  return counts


def unigram_entropy(tokens: np.ndarray, vocab_size: int, chunk: int = 1 << 24) -> float:
  """Entropy in nats/token of the token frequencies: the loss of a context-free model."""
  if len(tokens) == 0:
    raise DataError("unigram_entropy of an empty token array")
  counts = token_counts(tokens, vocab_size, chunk)
  p = counts[counts > 0] / counts.sum()
  return float(-(p * np.log(p)).sum())


# Add-one (Laplace) smoothing of the train counts: an id the train split never holds gets
# probability 1/(n + V), finite, as a context-free model that predicts every id would give.
UNIGRAM_SMOOTHING = 1.0


def heldout_unigram_entropy(
  train: np.ndarray, val: np.ndarray, vocab_size: int, chunk: int = 1 << 24
) -> float:
  """Cross-entropy (nats/token) of the train split's unigram distribution on the val split.

  The plateau a model that learned nothing about context reaches on the eval loss: it can
  only know the train frequencies, and is scored on held-out text. Higher than the train
  split's own entropy by the KL divergence between the two splits' frequencies.
  """
  if len(train) == 0 or len(val) == 0:
    raise DataError("heldout_unigram_entropy needs non-empty train and val token arrays")
  p_train = token_counts(train, vocab_size, chunk) + UNIGRAM_SMOOTHING
  p_train = p_train / p_train.sum()
  val_counts = token_counts(val, vocab_size, chunk)
  return float(-(val_counts * np.log(p_train)).sum() / val_counts.sum())
