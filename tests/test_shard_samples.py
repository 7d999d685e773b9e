"""A prepared folder's large shards are compared with their manifest's sampled sha256s at every
start, a resume included (token_files.check_shards): an edited byte in a sampled block is
refused in one line naming the shard and the --verify command; an intact folder opens
silently; a manifest from before `sampled` says in one line that its large shards were not
checked, until --verify records their samples. Small blocks keep the shards small here."""

import json
import os
import types

import numpy as np
import pytest

from resnorm_jax.data import data_fingerprint, token_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")
SAMPLES, BLOCK = 4, 1024  # shards over 4 KiB are sampled


@pytest.fixture
def prepared(tmp_path, monkeypatch):
  """A folder prepared from 60 kB of the embedded text (bytes tokenizer, shards of 20,000
  tokens: 41 kB each), sampled in 4 blocks of 1 KiB: (its path, its manifest)."""
  from resnorm_jax.data import prepare
  from resnorm_jax.data import tokenizer as tok_lib

  monkeypatch.setattr(data_fingerprint, "SAMPLES", SAMPLES)
  monkeypatch.setattr(data_fingerprint, "SAMPLE_BYTES", BLOCK)
  (tmp_path / "doc.txt").write_bytes(open(SHAKESPEARE, "rb").read()[:60_000])
  source, documents = prepare.local_documents(str(tmp_path / "doc.txt"))
  out = tmp_path / "tokens"
  manifest = prepare.prepare(
    documents, source, tok_lib.parse("bytes"), str(out), workers=1, log=lambda s: None,
    val_fraction=0.2, shard_tokens=20_000,
  )  # fmt: skip
  return out, manifest


def _load(folder):
  from resnorm_jax.data import sources

  cfg = types.SimpleNamespace(source="tokens", path=str(folder), val_path="", val_fraction=0.1)
  return sources.load_corpus(cfg, 384, 32)


def _edit_token(shard: str, byte_offset: int) -> None:
  """One token, the one at `byte_offset` of the file, changed to another valid id (same size)."""
  tokens = np.array(token_files.read_shard(shard))
  k = (byte_offset - token_files.LLMC_HEADER_BYTES) // 2
  tokens[k] = (int(tokens[k]) + 1) % 256
  token_files.write_shard(shard, tokens, 1)


def _sampled_offsets(size: int) -> list[int]:
  last = size - BLOCK
  return [last * i // (SAMPLES - 1) for i in range(SAMPLES)]


def test_the_manifest_records_each_large_shards_sampled_sha256(prepared):
  folder, manifest = prepared
  sampled = manifest["sampled"]
  assert (sampled["samples"], sampled["block_bytes"]) == (SAMPLES, BLOCK)
  shards = [e["file"] for e in token_files.listed_files(manifest)[:-1]]
  assert sorted(sampled["sha256"]) == sorted(shards) and len(shards) >= 2
  # outside the fingerprint: the same data prepared before `sampled` has the same one
  assert (
    token_files.fingerprint({k: v for k, v in manifest.items() if k != "sampled"})
    == (manifest["fingerprint"])
  )


def test_an_intact_folder_opens_silently(prepared):
  folder, _ = prepared
  assert _load(folder).warning == ""


def test_an_edit_in_a_sampled_block_is_refused_naming_the_shard(prepared):
  folder, manifest = prepared
  name = manifest["splits"]["train"]["shards"][0]["file"]
  shard = str(folder / name)
  fresh = _load(folder).fingerprint  # what a checkpoint of this run records
  middle = _sampled_offsets(os.path.getsize(shard))[1] + BLOCK // 2
  _edit_token(shard, middle)
  with pytest.raises(token_files.DataError) as e:
    _load(folder)
  msg = str(e.value)
  assert f"{folder}/{name} was changed after it was prepared: its sampled sha256" in msg, msg
  assert f"--verify={folder}" in msg and "\n" not in msg
  assert isinstance(e.value, ValueError)  # exit status 2, before a checkpoint is read
  assert fresh["files"][name]["sampled"]


def test_an_edited_small_shard_is_refused_by_its_full_sha256(prepared):
  folder, manifest = prepared
  entry = manifest["splits"]["val"]["shards"][-1]
  shard = str(folder / entry["file"])
  tokens = np.array(token_files.read_shard(shard))[:1000]  # under the 4 KiB of the samples
  token_files.write_shard(shard, tokens, 1)
  manifest = {k: v for k, v in manifest.items() if k not in ("format", "fingerprint")}
  for e in manifest["splits"]["val"]["shards"]:
    e["tokens"] = 1000 if e["file"] == entry["file"] else e["tokens"]
  token_files.write_manifest(str(folder), manifest)  # the count vouched for, not the bytes
  tokens[500] = (int(tokens[500]) + 1) % 256
  token_files.write_shard(shard, tokens, 1)
  with pytest.raises(token_files.DataError, match=r"its sha256 is [0-9a-f]{12}, manifest.json"):
    _load(folder)


def test_an_old_manifest_says_once_that_its_large_shards_were_not_checked(prepared):
  folder, manifest = prepared
  old = {k: v for k, v in manifest.items() if k not in ("format", "fingerprint", "sampled")}
  assert token_files.write_manifest(str(folder), old)["fingerprint"] == manifest["fingerprint"]
  warning = _load(folder).warning
  n = len(manifest["sampled"]["sha256"])
  assert warning.count("\n") == 0 and f"{n} shards over 4,096 bytes were not checked" in warning
  assert f"python -m experiments.prepare_data --verify={folder}" in warning
  assert token_files.verify(str(folder)) == []  # every checksum matches: the samples recorded
  again = json.loads((folder / token_files.MANIFEST).read_text())
  assert again["sampled"] == manifest["sampled"]
  assert again["fingerprint"] == manifest["fingerprint"]
  assert _load(folder).warning == ""


def test_verify_records_no_samples_for_a_damaged_folder(prepared):
  folder, manifest = prepared
  old = {k: v for k, v in manifest.items() if k not in ("format", "fingerprint", "sampled")}
  token_files.write_manifest(str(folder), old)
  name = manifest["splits"]["train"]["shards"][0]["file"]
  _edit_token(str(folder / name), 3000)
  assert token_files.verify(str(folder)) == [name]
  assert "sampled" not in json.loads((folder / token_files.MANIFEST).read_text())


def test_an_edit_between_the_samples_is_left_to_verify(prepared):
  """The limit of a sampled check, as documented: only --verify reads every byte."""
  folder, manifest = prepared
  name = manifest["splits"]["train"]["shards"][0]["file"]
  offsets = _sampled_offsets(os.path.getsize(folder / name))
  assert offsets[0] + BLOCK < 3000 < offsets[1]
  _edit_token(str(folder / name), 3000)
  assert _load(folder).warning == ""
  assert token_files.verify(str(folder)) == [name]
