"""Token shards on disk: llm.c's format, a multi-shard view, and the folder's manifest.json.

A shard is 256 little-endian int32 (magic 20240520, version 1: uint16 tokens or 2: uint32,
token count) then the tokens; a file without the header is nanoGPT's raw uint16 (raw uint32,
which nothing tells apart from it but its zeros, is refused).
`python -m experiments.prepare_data` writes a folder of them:
`val_000000.bin ...`, `train_000000.bin ...`, `token_counts.npz` (how often each id occurs
in each split) and `manifest.json` (tokenizer, vocabulary size, token and document counts
per split, each file's size and sha256, the source, and a fingerprint over all of that; the
sampled sha256 of each shard above 1 MiB, `sampled`, outside the fingerprint).
Training reads the shards memory-mapped through `ShardedTokens` (no copy of the corpus)
and trusts the manifest's vocabulary and counts instead of scanning every token at start.
A folder at a URL (gs://...) is read through etils.epath; its files are copied once into a
local cache (`local_copy`), since a memory map needs a local file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

import numpy as np
from etils import epath

from resnorm_jax.data import data_fingerprint, fs
from resnorm_jax.files.nofollow import open_nofollow

LLMC_MAGIC = 20240520
LLMC_HEADER_INTS = 256
LLMC_HEADER_BYTES = LLMC_HEADER_INTS * 4
LLMC_DTYPES = {1: np.dtype("<u2"), 2: np.dtype("<u4")}  # 1: GPT-2 uint16, 2: Llama-3 uint32
MANIFEST = "manifest.json"
COUNTS = "token_counts.npz"
MANIFEST_FORMAT = "resnorm_jax token shards 1"
VOCAB_MULTIPLE = 128  # nanoGPT pads GPT-2's 50257 to 50304: whole tiles for the matmuls


class DataError(ValueError):
  """Bad data input: a missing file, a short corpus, a token id outside the vocabulary, a
  shard or manifest that cannot be read as written."""


def shard_version(vocab_size: int) -> int:
  """llm.c version for a vocabulary: 1 (uint16) when every id fits, else 2 (uint32)."""
  return 1 if vocab_size <= 2**16 else 2


def padded_vocab(vocab_size: int, multiple: int = VOCAB_MULTIPLE) -> int:
  """The vocabulary rounded up to a multiple of `multiple` (50257 -> 50304)."""
  return -(-vocab_size // multiple) * multiple


def write_shard(path: str, tokens: np.ndarray, version: int) -> str:
  """Writes one llm.c shard; returns the sha256 of the file's bytes."""
  dtype = LLMC_DTYPES[version]
  if len(tokens) == 0:
    raise DataError(f"refusing to write the empty shard {path!r}")
  if int(tokens.max()) > np.iinfo(dtype).max:
    raise DataError(f"token id {int(tokens.max())} does not fit llm.c version {version}")
  header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
  header[:3] = (LLMC_MAGIC, version, len(tokens))
  digest = hashlib.sha256()
  tmp = path + ".tmp"
  with open_nofollow(tmp, "wb") as f:
    for part in (header.tobytes(), np.asarray(tokens, dtype=dtype).tobytes()):
      digest.update(part)
      f.write(part)
  os.replace(tmp, path)
  return digest.hexdigest()


def read_shard(path: str) -> np.ndarray:
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
  _refuse_raw_uint32(path, size)
  return np.memmap(path, dtype="<u2", mode="r")


def _refuse_raw_uint32(path: str, size: int, words: int = 1 << 16) -> None:
  """DataError for a headerless file of uint32 tokens, which reads as uint16 with every other
  token 0 (the high halves). Checked on the first `words` uint16 words (at least 128): every
  odd one 0 and some even one not, which no real uint16 token stream is."""
  head = np.fromfile(path, dtype="<u2", count=min(words, size // 2))
  if len(head) >= 128 and not head[1::2].any() and head[0::2].any():
    raise DataError(
      f"{path!r} has no llm.c header and every other uint16 in it is 0: uint32 tokens, which "
      "would train as uint16 with every other token 0. Write it as an llm.c shard (a header; "
      "version 2 for uint32: resnorm_jax.data.token_files.write_shard, or experiments.prepare_data)"
    )


def check_token_ids(tokens: np.ndarray, vocab_size: int, path: str, chunk: int = 1 << 24) -> None:
  """DataError naming the file, an id >= `vocab_size` (the largest of the first chunk that
  has one), where the first one is and the vocabulary: a corrupt shard (a flipped high byte)
  would otherwise train as NaN losses, a "divergence". Streamed in chunks of a memmap, one
  vectorised max each (a few GB a second)."""
  for start in range(0, len(tokens), chunk):
    part = np.asarray(tokens[start : start + chunk])
    top = int(part.max())
    if top < vocab_size:
      continue
    bad = part >= vocab_size
    raise DataError(
      f"token id {top} in {path!r} is out of range for vocab_size={vocab_size} (the first "
      f"such id at token {start + int(np.argmax(bad)):,}; {int(bad.sum()):,} in tokens "
      f"{start:,}-{start + len(part) - 1:,}): the data is corrupt (python -m "
      "experiments.prepare_data --verify=FOLDER checks a prepared folder's sha256s)"
    )


class ShardedTokens:
  """Several memory-mapped shards read as one 1-D token array, without copying them.

  Supports len(), .dtype, contiguous slices (another view) and integer-array indexing (a
  gather that touches only the rows asked for). `counts` (how often each id occurs over
  the whole view, from the manifest) spares a full scan; a sub-view has none.
  """

  def __init__(self, shards: Sequence[np.ndarray], counts: np.ndarray | None = None):
    if not shards:
      raise DataError("ShardedTokens needs at least one shard")
    self.shards = list(shards)
    self.dtype = np.result_type(*(s.dtype for s in self.shards))
    self.offsets = np.cumsum([0] + [len(s) for s in self.shards])
    self.counts = counts

  def __len__(self) -> int:
    return int(self.offsets[-1])

  def __array__(self, dtype=None, copy=None):
    out = np.concatenate([np.asarray(s) for s in self.shards])
    return out if dtype is None else out.astype(dtype)

  def tobytes(self) -> bytes:
    return np.asarray(self).tobytes()

  def _slice(self, start: int, stop: int) -> ShardedTokens | np.ndarray:
    parts = []
    for i, shard in enumerate(self.shards):
      lo, hi = max(start, self.offsets[i]), min(stop, self.offsets[i + 1])
      if lo < hi:
        parts.append(shard[lo - self.offsets[i] : hi - self.offsets[i]])
    if len(parts) == 1:
      return parts[0]
    if not parts:
      return np.empty(0, self.dtype)
    return ShardedTokens(parts)

  def __getitem__(self, key):
    n = len(self)
    if isinstance(key, slice):
      start, stop, step = key.indices(n)
      if step != 1:
        raise IndexError("ShardedTokens supports contiguous slices only")
      return self._slice(start, max(start, stop))
    idx = np.asarray(key)
    if idx.dtype.kind not in "iu":
      raise IndexError(f"ShardedTokens index of dtype {idx.dtype}: integers or a slice")
    if idx.size and (idx.min() < -n or idx.max() >= n):
      raise IndexError(f"index out of range for {n} tokens")
    idx = np.where(idx < 0, idx + n, idx)
    which = np.searchsorted(self.offsets, idx, side="right") - 1
    out = np.empty(idx.shape, self.dtype)
    for i in np.unique(which):
      hit = which == i
      out[hit] = self.shards[i][idx[hit] - self.offsets[i]]
    return out[()] if out.ndim == 0 else out


# --- manifest ----------------------------------------------------------------------------------


def fingerprint(manifest: dict) -> str:
  """sha256 (16 hex digits) of what the data is: tokenizer, splits (every file's checksum)
  and the token counts' checksum; not where or when it was made."""
  keep = {k: manifest.get(k) for k in ("format", "tokenizer", "splits", "token_counts")}
  return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:16]


def write_manifest(folder: str, manifest: dict) -> dict:
  """Adds the fingerprint and writes folder/manifest.json; returns the manifest."""
  manifest = {**manifest, "format": MANIFEST_FORMAT}
  manifest["fingerprint"] = fingerprint(manifest)
  tmp = os.path.join(folder, MANIFEST + ".tmp")
  with open_nofollow(tmp, "w") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
  os.replace(tmp, os.path.join(folder, MANIFEST))
  return manifest


def read_manifest(folder: str) -> dict | None:
  """folder/manifest.json (a local folder or a URL) checked for its keys and fingerprint, or
  None if there is none."""
  path = os.path.join(folder, MANIFEST)
  if not epath.Path(path).is_file():
    return None
  try:
    manifest = json.loads(epath.Path(path).read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise DataError(f"{path} cannot be read: {e}") from None
  missing = [k for k in ("format", "tokenizer", "splits", "fingerprint") if k not in manifest]
  if missing or manifest.get("format") != MANIFEST_FORMAT:
    raise DataError(f"{path} is not a {MANIFEST_FORMAT!r} manifest (missing {missing})")
  if fingerprint(manifest) != manifest["fingerprint"]:
    raise DataError(f"{path} was changed after it was written: its fingerprint does not match")
  return manifest


def split_files(folder: str, manifest: dict, split: str) -> list[str]:
  """Paths of a split's shards, in order."""
  if split not in manifest["splits"]:
    raise DataError(f"{folder}/{MANIFEST} has no {split!r} split: {sorted(manifest['splits'])}")
  return [os.path.join(folder, s["file"]) for s in manifest["splits"][split]["shards"]]


def file_sha256(path: str, chunk: int = 1 << 24) -> str:
  """sha256 of a file's bytes (a local path or a URL), streamed."""
  digest = hashlib.sha256()
  with epath.Path(path).open("rb") as f:
    while block := f.read(chunk):
      digest.update(block)
  return digest.hexdigest()


def listed_files(manifest: dict) -> list[dict]:
  """Every file the manifest vouches for ({"file", "sha256", ...}): shards, then the counts."""
  entries = [s for split in manifest["splits"].values() for s in split["shards"]]
  return entries + ([manifest["token_counts"]] if manifest.get("token_counts") else [])


def verify(folder: str) -> list[str]:
  """Re-reads every file the manifest lists and compares checksums; returns the bad ones. A
  local folder whose manifest predates `sampled` and whose files all match gains it (outside
  the fingerprint, which stays), so a run checks its large shards' samples from then on."""
  manifest = read_manifest(folder)
  if manifest is None:
    raise DataError(f"no {MANIFEST} in {folder!r}")
  bad = [
    e["file"]
    for e in listed_files(manifest)
    if not epath.Path(folder, e["file"]).is_file()
    or file_sha256(os.path.join(folder, e["file"])) != e["sha256"]
  ]
  if (
    not bad
    and "sampled" not in manifest
    and not fs.is_remote(folder)
    and os.access(folder, os.W_OK)
  ):
    rest = {k: v for k, v in manifest.items() if k not in ("format", "fingerprint")}
    write_manifest(folder, {**rest, "sampled": sampled_section(folder, manifest)})
  return bad


def sampled_section(folder: str, manifest: dict) -> dict:
  """The manifest's `sampled` section: the sampled sha256 (data_fingerprint.sampled_sha256:
  SAMPLES blocks of SAMPLE_BYTES, the first and the last included) of each shard larger than
  those blocks, which a run compares when it opens the folder (reading those blocks alone)."""
  samples, block = data_fingerprint.SAMPLES, data_fingerprint.SAMPLE_BYTES
  large = [
    e["file"]
    for split in manifest["splits"].values()
    for e in split["shards"]
    if os.path.getsize(os.path.join(folder, e["file"])) > samples * block
  ]
  digests = {f: data_fingerprint.sampled_sha256(os.path.join(folder, f)) for f in large}
  return {"samples": samples, "block_bytes": block, "sha256": digests}


def check_shards(folder: str, manifest: dict, files: dict, verify_folder: str = "") -> str:
  """Compares the shards a run reads (`files`: data_fingerprint.files_record keyed relative
  to `folder`, sampled) with what the manifest vouches for: a shard the record hashed whole by
  its sha256, a larger one by its sampled sha256 (the blocks the record read, or the
  manifest's own). Raises DataError naming the first that differs, how, and the command that
  checks the folder in full; returns a warning line when the manifest predates `sampled` and
  large shards went unchecked, else ''."""
  where = verify_folder or folder
  verify_cmd = f"python -m experiments.prepare_data --verify={where}"
  listed = {e["file"]: e for e in listed_files(manifest)}
  sampled = manifest.get("sampled")
  unchecked = []
  for name, record in sorted(files.items()):
    entry, path = listed.get(name), os.path.join(folder, name)
    if entry is None:  # a file outside the folder (data.val_path), or the counts
      continue
    if not record.get("sampled"):
      how, want, now = "sha256", entry["sha256"], record["sha256"]
    elif sampled is None:
      unchecked.append(name)
      continue
    elif name not in sampled["sha256"]:  # no larger than the manifest's samples
      how, want, now = "sha256", entry["sha256"], file_sha256(path)
    else:
      samples, block = sampled["samples"], sampled["block_bytes"]
      same = (samples, block) == (data_fingerprint.SAMPLES, data_fingerprint.SAMPLE_BYTES)
      how = f"sampled sha256 ({samples} blocks of {block:,} bytes)"
      want = sampled["sha256"][name]
      now = record["sha256"] if same else data_fingerprint.sampled_sha256(path, samples, block)
    if now != want:
      raise DataError(
        f"{where}/{name} was changed after it was prepared: its {how} is {now[:12]}, "
        f"{MANIFEST} lists {want[:12]}; restore it or prepare the folder again ({verify_cmd} "
        "checks every file in full)"
      )
  if not unchecked:
    return ""
  return (
    f"warning: {where}/{MANIFEST} predates sampled sha256s: {len(unchecked)} shards over "
    f"{data_fingerprint.SAMPLES * data_fingerprint.SAMPLE_BYTES:,} bytes were not checked "
    f"against it ({verify_cmd} checks them in full, and in a local folder records their "
    "samples)"
  )


def _copy_checked(src: str, dest: str, sha256: str) -> None:
  """Copies src to dest through a temporary name, renamed only when the checksum matches."""
  tmp = f"{dest}.{fs.unique_suffix()}.tmp"
  digest = hashlib.sha256()
  try:
    with epath.Path(src).open("rb") as f, open_nofollow(tmp, "wb") as g:
      while block := f.read(fs.COPY_CHUNK):
        digest.update(block)
        g.write(block)
    if digest.hexdigest() != sha256:
      raise DataError(f"{src} does not match the sha256 its {MANIFEST} lists: damaged")
    os.replace(tmp, dest)  # several hosts sharing one cache each rename a whole, checked file
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def local_copy(url: str, manifest: dict, cache: str, log=print) -> str:
  """A local folder holding the prepared folder at `url`: <cache>/<fingerprint>, its files
  copied once and checked against the manifest's sha256 (a later run finds them there)."""
  folder = os.path.join(os.path.expanduser(cache), manifest["fingerprint"])
  os.makedirs(folder, exist_ok=True)
  here = lambda e: os.path.join(folder, e["file"])  # noqa: E731
  missing = [e for e in listed_files(manifest) if not os.path.isfile(here(e))]
  if missing:
    log(f"copying {len(missing)} files of {url} into {folder} (once: later runs read them there)")
  for entry in missing:
    _copy_checked(os.path.join(url, entry["file"]), here(entry), entry["sha256"])
  fs.replace_text(os.path.join(folder, MANIFEST), json.dumps(manifest, indent=2, sort_keys=True))
  return folder
