"""What a run's data is: a fingerprint of every file it reads, to refuse a resume on other data.

Without it a corpus edited under the same path would resume silently (two corpora mixed in one
run). Each file is recorded by its size and sha256: the whole file up to FULL_HASH_BYTES, above
that a sampled hash (SAMPLES blocks of SAMPLE_BYTES spread evenly, the first and the last
included: a few MB read however large the shard). The mtime is recorded too but not compared,
so a copy or a `touch` is the same data. A prepared folder's shards are always sampled: its
manifest holds their full sha256s and the same sampled sha256s, which a start compares
(token_files.check_shards), and a start reads none of them whole. The stdlib corpus
is one record over all its bytes.
The record goes into config.json (`data_files`, a section sweeps do not compare) and every
checkpoint's meta; a resume compares it with the data it finds. Pure Python, no JAX.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

FULL_HASH_BYTES = 64 << 20
SAMPLES = 16
SAMPLE_BYTES = 64 << 10


def _sha256(
  path: str, size: int, full_hash_bytes: int, samples: int | None = None, block: int | None = None
) -> tuple[str, bool]:
  """(hex digest, sampled?) of a file's bytes: whole up to `full_hash_bytes` (or what the
  samples would read anyway), else `samples` blocks of `block` bytes (default SAMPLES of
  SAMPLE_BYTES) and the size."""
  samples = SAMPLES if samples is None else samples
  block = SAMPLE_BYTES if block is None else block
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    if size <= max(full_hash_bytes, samples * block):
      while part := f.read(1 << 24):
        digest.update(part)
      return digest.hexdigest(), False
    last = size - block
    for i in range(samples):
      f.seek(last * i // (samples - 1))
      digest.update(f.read(block))
  digest.update(str(size).encode())
  return digest.hexdigest(), True


def sampled_sha256(path: str, samples: int | None = None, block: int | None = None) -> str:
  """The sampled sha256 of a file larger than `samples` blocks of `block` bytes (the whole
  file's sha256 up to that): what a prepared folder's manifest records of each large shard
  (`sampled`), compared when a run opens the folder."""
  return _sha256(path, os.path.getsize(path), 0, samples, block)[0]


def file_record(path: str, full_hash_bytes: int | None = None) -> dict[str, Any]:
  """{size, sha256, sampled, mtime_ns} of one local file (whole up to `full_hash_bytes`,
  default FULL_HASH_BYTES)."""
  st = os.stat(path)
  limit = FULL_HASH_BYTES if full_hash_bytes is None else full_hash_bytes
  sha, sampled = _sha256(path, st.st_size, limit)
  return {"size": st.st_size, "sha256": sha, "sampled": sampled, "mtime_ns": st.st_mtime_ns}


def files_record(
  paths: Iterable[str], root: str | None = None, full_hash_bytes: int | None = None
) -> dict[str, dict[str, Any]]:
  """{path: file_record} for each file; paths relative to `root` when given (a prepared
  folder, which may be read from another place: its local copy of a gs:// folder), else
  absolute."""
  out = {}
  for path in paths:
    key = os.path.relpath(path, root) if root else os.path.abspath(path)
    out[key] = file_record(path, full_hash_bytes)
  return out


def bytes_record(*parts: bytes) -> dict[str, Any]:
  """{size, sha256} over byte strings read as one (a corpus held in memory)."""
  digest = hashlib.sha256()
  for part in parts:
    digest.update(part)
  return {"size": sum(len(p) for p in parts), "sha256": digest.hexdigest()}


def _describe(name: str, was: Mapping[str, Any], now: Mapping[str, Any]) -> str:
  if was.get("size") != now.get("size"):
    return f"{name} (size {was.get('size')} -> {now.get('size')} bytes)"
  return f"{name} (sha256 {str(was.get('sha256'))[:12]} -> {str(now.get('sha256'))[:12]})"


def changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
  """The files on which two fingerprints (of the same data.path) differ, each with how: size
  or content, gone or new. A fingerprint records {"files": {path: record}} and/or
  {"corpus": record}; sections one of them lacks are not compared."""
  out = []
  for section in ("corpus", "manifest"):
    if section not in recorded or section not in current:
      continue
    was, now = recorded[section], current[section]
    if isinstance(was, Mapping) and isinstance(now, Mapping):  # by content, not by name
      if (was.get("size"), was.get("sha256")) != (now.get("size"), now.get("sha256")):
        out.append(_describe(now.get("name", section), was, now))
    elif was != now:
      out.append(f"the {section}'s fingerprint ({was} -> {now})")
  if "files" in recorded and "files" in current:
    was, now = recorded["files"], current["files"]
    for name in sorted(set(was) | set(now)):
      if name not in now:
        out.append(f"{name} (no longer read)")
      elif name not in was:
        out.append(f"{name} (new)")
      elif (was[name].get("size"), was[name].get("sha256")) != (
        now[name].get("size"),
        now[name].get("sha256"),
      ):
        out.append(_describe(name, was[name], now[name]))
  return out
