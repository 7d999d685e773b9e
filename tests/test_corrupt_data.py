"""Corrupt or damaged data is refused in one line naming the file, not trained and tabulated
as a divergence, nor ended in a traceback: token ids past the vocabulary, a prepared folder
missing a shard, a damaged token_counts.npz."""

import os
import types

import numpy as np
import pytest

from resnorm_jax.data import token_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")


@pytest.fixture
def prepared(tmp_path):
  """A token folder prepared from 60 kB of the embedded text, bytes tokenizer, in shards of
  30,000 tokens: (its path, its manifest)."""
  from resnorm_jax.data import prepare
  from resnorm_jax.data import tokenizer as tok_lib

  (tmp_path / "doc.txt").write_bytes(open(SHAKESPEARE, "rb").read()[:60_000])
  source, documents = prepare.local_documents(str(tmp_path / "doc.txt"))
  out = tmp_path / "tokens"
  manifest = prepare.prepare(
    documents,
    source,
    tok_lib.parse("bytes"),
    str(out),
    workers=1,
    log=lambda s: None,
    val_fraction=0.2,
    shard_tokens=30_000,
  )
  return out, manifest


def _load(folder):
  from resnorm_jax.data import sources

  cfg = types.SimpleNamespace(source="tokens", path=str(folder), val_path="", val_fraction=0.1)
  return sources.load_corpus(cfg, 384, 32)


# --- 3. corrupt data is refused, not tabulated as a divergence -------------------------------


def test_token_ids_past_the_vocabulary_are_refused_naming_the_file(prepared):
  """The high byte of every 97th token set in a prepared shard: the manifest vouched for the
  shard by its size, the run ended "diverged at step 1" with exit 0."""
  folder, manifest = prepared
  _load(folder)  # intact
  shard = folder / manifest["splits"]["train"]["shards"][0]["file"]
  tokens = np.array(token_files.read_shard(str(shard)))
  tokens[::97] |= 0x100  # ids 256..511: past the 257 of the tokenizer
  token_files.write_shard(str(shard), tokens, 1)  # same size: the manifest's count holds
  with pytest.raises(token_files.DataError) as e:
    _load(folder)
  msg = str(e.value)
  bad = np.flatnonzero(tokens >= 257)
  assert f"token id {tokens.max()} in {str(shard)!r}" in msg, msg
  assert f"vocab_size=257 (the first such id at token {bad[0]:,}" in msg and "--verify" in msg
  assert isinstance(e.value, ValueError)  # bad input: exit status 2 on the command line


# --- a prepared token folder missing a shard, a damaged token_counts.npz ---------------------


def test_a_prepared_folder_missing_its_val_shard_is_one_line_naming_it(prepared):
  """FileNotFoundError traceback before."""
  folder, manifest = prepared
  _load(folder)  # intact: loads
  shard = folder / manifest["splits"]["val"]["shards"][0]["file"]
  shard.unlink()
  with pytest.raises(token_files.DataError) as e:
    _load(folder)
  assert str(e.value).startswith(f"{str(shard)!r} is missing (1 of the 1 val shards ")
  assert "manifest.json" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("damage", [b"", b"\x80\x04not a zip", b"PK\x03\x04truncated"])
def test_a_damaged_token_counts_npz_is_one_line_naming_it(prepared, damage):
  """A pickle message naming no file before."""
  folder, _ = prepared
  path = folder / token_files.COUNTS
  path.write_bytes(damage)
  with pytest.raises(token_files.DataError) as e:
    _load(folder)
  assert str(e.value).startswith(f"{path} cannot be read (")
  assert "damaged" in str(e.value) and f"--verify={folder}" in str(e.value)
  assert "\n" not in str(e.value)
