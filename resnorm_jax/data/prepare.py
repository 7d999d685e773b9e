"""A text corpus -> a folder of llm.c token shards with a manifest (experiments.prepare_data).

Documents come from local text files (one document per file), the running Python's
standard-library source (`stdlib`: the files of data.source=stdlib, one document each) or a
Hugging Face dataset streamed row by row. A document goes to the `val` split when its hash
falls below `val_fraction` (resnorm_jax.data.heldout: a long document is cut into pieces, each by
its own hash), until `val` holds `max_val_tokens`; the rest to `train`, each split cut into
shards of `shard_tokens`. A `train:V` tokenizer is trained on the training documents only.
Pieces are tokenized in parallel (a process pool over batches, results taken in order: the
output does not depend on the number of workers). Every shard's sha256, each split's token
counts per id and how the split was made go into manifest.json.
"""

from __future__ import annotations

import glob
import itertools
import multiprocessing
import os
import shutil
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from resnorm_jax.data import fs, heldout, stdlib_source, text_source, token_files
from resnorm_jax.data import tokenizer as tok_lib

# The folders the CPU configs train on (the :wide scale, configs/base.py): made on the fly by
# one command each, under data/prepared/ (git-ignored), never committed. name -> the flags
# that make it (10% held out, as the byte-level runs hold out 10% of the same text).
PREPARED_DIR = "data/prepared"
RECIPES = {
  "stdlib_bpe4096": ("--input=stdlib", "--tokenizer=train:4096", "--val_fraction=0.1"),
  "shakespeare_bpe4096": (
    "--input=data/tinyshakespeare.txt",
    "--tokenizer=train:4096",
    "--val_fraction=0.1",
  ),
}
BATCH_BYTES = 1 << 20  # bytes of text per task sent to a worker
VAL_FRACTION = 0.005  # nanoGPT holds out 0.05% of OpenWebText; a smaller corpus needs more
MAX_VAL_TOKENS = 100_000_000  # an eval never reads more; the rest is better trained on


def recipe_command(path: str) -> str | None:
  """The one command that makes the prepared folder `path`, when its name is a recipe's."""
  flags = RECIPES.get(os.path.basename(os.path.normpath(path)))
  if flags is None:
    return None
  return " ".join(["python -m experiments.prepare_data", *flags, f"--out={path}"])


def local_documents(pattern: str) -> tuple[dict, Callable[[], Iterator[str]]]:
  """(source record, a function that yields the documents again): one per matching file."""
  paths = sorted(
    p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p)
  )
  if not paths:
    raise ValueError(f"--input={pattern!r} matches no file")

  def documents() -> Iterator[str]:
    for path in paths:
      with open(path, "rb") as f:
        raw = f.read()
      yield text_source.utf8_text(raw, f"--input file {path!r}")

  size = sum(os.path.getsize(p) for p in paths)
  return {"input": pattern, "files": len(paths), "bytes": size}, documents


STDLIB = "stdlib"  # --input=stdlib: the default corpus's files


def stdlib_paths(root: str | None = None) -> list[str]:
  """The `*.py` files of the standard library at `root` (default: the running Python's),
  sorted: the files data.source=stdlib reads (resnorm_jax/data/stdlib_source.py's list)."""
  paths = stdlib_source.stdlib_paths(root)
  if not paths:
    root = root or sysconfig.get_paths()["stdlib"]
    raise ValueError(f"--input=stdlib: no *.py files under the standard library at {root!r}")
  return paths


def stdlib_documents(root: str | None = None) -> tuple[dict, Callable[[], Iterator[str]]]:
  """The standard library's source as documents (one per file, bytes that are not UTF-8
  replaced: a handful of test files hold deliberately bad encodings)."""
  root = root or sysconfig.get_paths()["stdlib"]
  paths = stdlib_paths(root)

  def documents() -> Iterator[str]:
    for path in paths:
      with open(path, "rb") as f:
        yield f.read().decode("utf-8", errors="replace")

  source = {
    "input": STDLIB,
    "stdlib": root,
    "python": sys.version.split()[0],
    "files": len(paths),
    "bytes": sum(os.path.getsize(p) for p in paths),
  }
  return source, documents


class HubError(ValueError):
  """A Hugging Face dataset that could not be streamed (offline, unknown, cut off)."""


def hf_documents(
  name: str, config: str, split: str, field: str
) -> tuple[dict, Callable[[], Iterator[str]]]:
  """A Hugging Face dataset streamed (nothing downloaded ahead): `field` of each row."""
  try:
    import datasets  # optional (requirements-data.txt): only this path needs it
  except ImportError:
    raise ValueError(
      "--hf_dataset needs the `datasets` library: pip install -r requirements-data.txt"
    ) from None

  def documents() -> Iterator[str]:
    try:
      rows = datasets.load_dataset(name, name=config or None, split=split, streaming=True)
      for row in rows:
        if field not in row:
          raise ValueError(f"--hf_text_field={field!r} is not a column; columns: {sorted(row)}")
        yield row[field]
    except ValueError:
      raise
    except Exception as e:  # noqa: BLE001 - offline, no such dataset, a dropped stream: one line
      raise HubError(
        f"--hf_dataset={name!r} (--hf_name={config!r}, --hf_split={split!r}) could not be "
        f"read from the Hugging Face hub: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
      ) from None

  source = {"hf_dataset": name, "hf_name": config, "hf_split": split, "hf_text_field": field}
  return {**source, "datasets_version": datasets.__version__}, documents


Unit = tuple[bytes, bool]  # (a document or a piece of one, whether it starts the document)


def units(docs: Iterable[str], limit: int) -> Iterator[Unit]:
  """Each document's pieces of at most `limit` bytes, the first marked as its start."""
  for doc in docs:
    for i, piece in enumerate(heldout.pieces(doc.encode("utf-8"), limit)):
      yield piece, i == 0


def _batches(items: Iterable[Unit]) -> Iterator[list[Unit]]:
  batch, size = [], 0
  for item in items:
    batch.append(item)
    size += len(item[0])
    if size >= BATCH_BYTES:
      yield batch
      batch, size = [], 0
  if batch:
    yield batch


_WORKER: tok_lib.Tokenizer | None = None


def _init_worker(name: str, hf_json: str | None) -> None:
  global _WORKER
  os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process
  _WORKER = tok_lib.Tokenizer(name, hf_json)


def _encode(batch: list[Unit]) -> list[tuple[float, bool, np.ndarray]]:
  """(hash position, whether it starts a document, ids) of each piece."""
  return [
    (heldout.position(piece), first, _WORKER.encode(piece.decode("utf-8"), first))
    for piece, first in batch
  ]


class _SplitWriter:
  """Fills shards of `shard_tokens` for one split; counts tokens per id as it goes."""

  def __init__(self, folder: str, split: str, shard_tokens: int, vocab: int, version: int):
    self.folder, self.split, self.version = folder, split, version
    self.buf = np.empty(shard_tokens, dtype=token_files.LLMC_DTYPES[version])
    self.fill = self.tokens = self.documents = self.pieces = 0
    self.counts = np.zeros(vocab, dtype=np.int64)
    self.entries: list[dict] = []

  def add(self, ids: np.ndarray) -> None:
    while len(ids):
      take = min(len(ids), len(self.buf) - self.fill)
      self.buf[self.fill : self.fill + take] = ids[:take]
      self.fill, self.tokens, ids = self.fill + take, self.tokens + take, ids[take:]
      if self.fill == len(self.buf):
        self.flush()

  def flush(self) -> None:
    if not self.fill:
      return
    name = f"{self.split}_{len(self.entries):06d}.bin"
    data = self.buf[: self.fill]
    sha = token_files.write_shard(os.path.join(self.folder, name), data, self.version)
    self.counts += np.bincount(data, minlength=len(self.counts))
    self.entries.append({"file": name, "tokens": int(self.fill), "sha256": sha})
    self.fill = 0

  def record(self) -> dict:
    return {
      "tokens": self.tokens,
      "documents": self.documents,
      "pieces": self.pieces,
      "shards": self.entries,
    }


def prepare(
  documents: Callable[[], Iterator[str]],
  source: dict,
  spec: tok_lib.Spec,
  out: str,
  *,
  shard_tokens: int,
  workers: int,
  val_fraction: float = VAL_FRACTION,
  max_val_tokens: int = MAX_VAL_TOKENS,
  max_docs: int = 0,
  tokenizer_train_docs: int = 0,
  command: list[str] | None = None,
  progress_every: float = 10.0,
  log: Callable[[str], None] = print,
) -> dict:
  """Tokenizes the documents into the new folder `out`; returns the manifest (also in
  out/manifest.json). Written into a hidden sibling renamed at the end: a failed run leaves
  nothing in the way of the next."""
  if not 0 < val_fraction < 1 or max_val_tokens < 1:
    raise ValueError(
      f"--val_fraction={val_fraction} must be in (0, 1) and --max_val_tokens={max_val_tokens} "
      "positive"
    )
  if shard_tokens < 1 or workers < 1 or max_docs < 0 or tokenizer_train_docs < 0:
    raise ValueError(
      f"--shard_tokens={shard_tokens} and --workers={workers} must be positive, "
      f"--max_docs={max_docs} and --tokenizer_train_docs={tokenizer_train_docs} >= 0"
    )
  path = os.path.abspath(os.path.expanduser(out))
  if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
    raise ValueError(f"--out={out!r} already exists and is not an empty folder: choose a new one")
  folder = _partial_folder(path, log)
  try:
    manifest = _tokenize_into(
      folder, documents, source, spec, shard_tokens=shard_tokens, workers=workers,
      val_fraction=val_fraction, max_val_tokens=max_val_tokens, max_docs=max_docs,
      tokenizer_train_docs=tokenizer_train_docs, command=command,
      progress_every=progress_every, log=log,
    )  # fmt: skip
    os.rename(folder, path)  # over nothing, or over an empty folder
  except BaseException:
    shutil.rmtree(folder, ignore_errors=True)
    raise
  return manifest


def _partial_folder(out: str, log: Callable[[str], None]) -> str:
  """A new hidden sibling of `out` to write into (the same filesystem: the rename is atomic);
  names those a killed run left (never in the way, but taking space)."""
  parent, name = os.path.split(out)
  os.makedirs(parent, exist_ok=True)
  prefix = f".{name}.partial-"
  stale = sorted(glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*")))
  if stale:
    log(f"note: partial output of another run (a stopped one's is safe to delete): {stale}")
  folder = os.path.join(parent, prefix + fs.unique_suffix())
  os.mkdir(folder)
  return folder


def _tokenize_into(
  out: str,
  documents: Callable[[], Iterator[str]],
  source: dict,
  spec: tok_lib.Spec,
  *,
  shard_tokens: int,
  workers: int,
  val_fraction: float,
  max_val_tokens: int,
  max_docs: int,
  tokenizer_train_docs: int,
  command: list[str] | None,
  progress_every: float,
  log: Callable[[str], None],
) -> dict:
  """prepare() into the folder `out`, which exists and is empty."""
  limit = heldout.piece_limit(source.get("bytes"), val_fraction)

  def stream(max_documents: int = max_docs) -> Iterator[Unit]:
    docs = documents()
    return units(itertools.islice(docs, max_documents) if max_documents else docs, limit)

  tokenizer = _tokenizer(spec, stream(tokenizer_train_docs or max_docs), val_fraction, log)
  tokenizer.save(out)
  version = token_files.shard_version(tokenizer.vocab_size)
  writers = {
    s: _SplitWriter(out, s, shard_tokens, tokenizer.vocab_size, version) for s in ("val", "train")
  }
  start = last = time.time()
  n_docs = capped = 0
  init = (tokenizer.name, tokenizer.json)
  # Spawned, not forked: a process that has started JAX (its threads) must not fork.
  spawn = multiprocessing.get_context("spawn")
  pool = spawn.Pool(workers, _init_worker, init) if workers > 1 else None
  try:
    if pool is None:
      _init_worker(*init)
    for batch in (pool.imap if pool else map)(_encode, _batches(stream())):
      for where, first, ids in batch:
        held = where < val_fraction
        if held and writers["val"].tokens + len(ids) > max_val_tokens:
          held, capped = False, capped + 1  # val is full: the rest of the corpus trains
        w = writers["val" if held else "train"]
        w.add(ids)
        w.pieces += 1
        w.documents += first
        n_docs += first
      if time.time() - last >= progress_every:
        last = time.time()
        total = writers["val"].tokens + writers["train"].tokens
        log(
          f"{n_docs:,} documents, {total:,} tokens ({total / (last - start):,.0f} tokens/s), "
          f"shards: val {len(writers['val'].entries)}, train {len(writers['train'].entries)}"
        )
  finally:
    if pool is not None:
      pool.terminate()
  for w in writers.values():
    w.flush()
  _check_splits(writers, val_fraction, max_val_tokens)
  counts_path = os.path.join(out, token_files.COUNTS)
  np.savez(counts_path, **{s: w.counts for s, w in writers.items()})
  manifest = {
    "tokenizer": tokenizer.describe(),
    "shard_version": version,
    "splits": {s: w.record() for s, w in writers.items()},
    "token_counts": {"file": token_files.COUNTS, "sha256": token_files.file_sha256(counts_path)},
    "held_out": {
      "method": "document_hash",
      "hash": heldout.HASH,
      "val_fraction": val_fraction,
      "max_val_tokens": max_val_tokens,
      "piece_bytes": limit,
      "capped_pieces": capped,
      "tokenizer_trained_on": "train" if spec.kind == "train" else None,
    },
    "source": {**source, "documents": n_docs, "max_docs": max_docs},
    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    "command": command or [],
    "seconds": round(time.time() - start, 1),
  }
  manifest["sampled"] = token_files.sampled_section(out, manifest)
  return token_files.write_manifest(out, manifest)


def _tokenizer(
  spec: tok_lib.Spec, stream: Iterator[Unit], val_fraction: float, log: Callable[[str], None]
) -> tok_lib.Tokenizer:
  """The tokenizer; `train:V` learns from the training pieces of `stream` only."""
  if spec.kind != "train":
    return tok_lib.build(spec)
  log(f"training a byte-level BPE of {spec.vocab_size} ids on the training documents ...")
  texts = (p.decode("utf-8") for p, _ in stream if not heldout.is_held_out(p, val_fraction))
  return tok_lib.build(spec, texts)


def _check_splits(writers: dict, val_fraction: float, max_val_tokens: int) -> None:
  """Refuses a split left empty: nothing held out, or nothing to train on."""
  val, train = writers["val"], writers["train"]
  if not val.tokens:
    raise ValueError(
      f"no piece of the {train.pieces:,} of the input hashes below --val_fraction="
      f"{val_fraction}: nothing is held out; give more text or a larger --val_fraction"
    )
  if not train.tokens:
    raise ValueError(
      f"the input's {val.tokens:,} tokens are all held out (--val_fraction={val_fraction}, "
      f"--max_val_tokens={max_val_tokens:,}): nothing to train on"
    )
