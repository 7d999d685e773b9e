"""A text corpus -> a folder of llm.c token shards with a manifest (experiments.prepare_data).

Documents come from local text files (one document per file) or a Hugging Face dataset
streamed row by row. They are tokenized in parallel (a process pool over batches of
documents, results taken in order: the output does not depend on the number of workers),
the first `val_tokens` tokens of the stream go to the `val` split (as llm.c holds out its
first shard) and the rest to `train`, each split cut into shards of `shard_tokens`. Every
shard's sha256 and each split's token counts per id go into manifest.json.
"""

from __future__ import annotations

import glob
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from resnorm_jax import shards
from resnorm_jax import tokenizer as tok_lib

BATCH_CHARS = 1 << 20  # characters of text per task sent to a worker


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
      try:
        yield raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(f"--input file {path!r} is not UTF-8 text: {e}") from None

  size = sum(os.path.getsize(p) for p in paths)
  return {"input": pattern, "files": len(paths), "bytes": size}, documents


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
    rows = datasets.load_dataset(name, name=config or None, split=split, streaming=True)
    for row in rows:
      if field not in row:
        raise ValueError(f"--hf_text_field={field!r} is not a column; columns: {sorted(row)}")
      yield row[field]

  source = {"hf_dataset": name, "hf_name": config, "hf_split": split, "hf_text_field": field}
  return {**source, "datasets_version": datasets.__version__}, documents


def _batches(docs: Iterable[str]) -> Iterator[list[str]]:
  batch, chars = [], 0
  for doc in docs:
    batch.append(doc)
    chars += len(doc)
    if chars >= BATCH_CHARS:
      yield batch
      batch, chars = [], 0
  if batch:
    yield batch


_WORKER: tok_lib.Tokenizer | None = None


def _init_worker(name: str, hf_json: str | None) -> None:
  global _WORKER
  os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process
  _WORKER = tok_lib.Tokenizer(name, hf_json)


def _encode(batch: list[str]) -> list[np.ndarray]:
  return [_WORKER.encode(doc) for doc in batch]


class _SplitWriter:
  """Fills shards of `shard_tokens` for one split; counts tokens per id as it goes."""

  def __init__(self, folder: str, split: str, shard_tokens: int, vocab: int, version: int):
    self.folder, self.split, self.version = folder, split, version
    self.buf = np.empty(shard_tokens, dtype=shards.LLMC_DTYPES[version])
    self.fill = self.tokens = self.documents = 0
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
    sha = shards.write_shard(os.path.join(self.folder, name), data, self.version)
    self.counts += np.bincount(data, minlength=len(self.counts))
    self.entries.append({"file": name, "tokens": int(self.fill), "sha256": sha})
    self.fill = 0

  def record(self) -> dict:
    return {"tokens": self.tokens, "documents": self.documents, "shards": self.entries}


def prepare(
  documents: Callable[[], Iterator[str]],
  source: dict,
  spec: tok_lib.Spec,
  out: str,
  *,
  val_tokens: int,
  shard_tokens: int,
  workers: int,
  max_docs: int = 0,
  tokenizer_train_docs: int = 0,
  command: list[str] | None = None,
  progress_every: float = 10.0,
  log: Callable[[str], None] = print,
) -> dict:
  """Tokenizes the documents into `out`; returns the manifest (also in out/manifest.json)."""
  if val_tokens < 1 or shard_tokens < 1 or workers < 1 or max_docs < 0:
    raise ValueError(
      f"--val_tokens={val_tokens}, --shard_tokens={shard_tokens} and --workers={workers} "
      f"must be positive, --max_docs={max_docs} >= 0"
    )
  if os.path.exists(os.path.join(out, shards.MANIFEST)) or glob.glob(os.path.join(out, "*.bin")):
    raise ValueError(f"--out={out!r} already holds shards: choose a new folder")
  os.makedirs(out, exist_ok=True)

  def docs(limit: int = max_docs) -> Iterator[str]:
    for i, doc in enumerate(documents()):
      if limit and i >= limit:
        return
      yield doc

  train_docs = tokenizer_train_docs if tokenizer_train_docs else max_docs
  if spec.kind == "train":
    log(f"training a byte-level BPE of {spec.vocab_size} ids on the input ...")
  tokenizer = tok_lib.build(spec, docs(train_docs) if spec.kind == "train" else None)
  tokenizer.save(out)
  version = shards.shard_version(tokenizer.vocab_size)
  writers = {
    s: _SplitWriter(out, s, shard_tokens, tokenizer.vocab_size, version) for s in ("val", "train")
  }
  start = last = time.time()
  n_docs = 0
  init = (tokenizer.name, tokenizer.json)
  pool = multiprocessing.Pool(workers, _init_worker, init) if workers > 1 else None
  try:
    if pool is None:
      _init_worker(*init)
    encoded = (pool.imap if pool else map)(_encode, _batches(docs()))
    for batch in encoded:
      for ids in batch:
        head = max(0, val_tokens - writers["val"].tokens)
        first = "val" if head else "train"
        writers[first].documents += 1
        writers["val"].add(ids[:head])
        writers["train"].add(ids[head:])
        n_docs += 1
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
  if not writers["train"].tokens:
    raise ValueError(
      f"the input has {writers['val'].tokens:,} tokens: --val_tokens={val_tokens:,} leaves "
      "nothing to train on"
    )
  counts_path = os.path.join(out, shards.COUNTS)
  np.savez(counts_path, **{s: w.counts for s, w in writers.items()})
  manifest = {
    "tokenizer": tokenizer.describe(),
    "shard_version": version,
    "splits": {s: w.record() for s, w in writers.items()},
    "token_counts": {"file": shards.COUNTS, "sha256": shards.file_sha256(counts_path)},
    "source": {**source, "documents": n_docs, "max_docs": max_docs},
    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    "command": command or [],
    "seconds": round(time.time() - start, 1),
  }
  return shards.write_manifest(out, manifest)
