"""Corrupt data is refused naming the file, not trained and tabulated as a divergence: token
ids past the vocabulary."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- 3. corrupt data is refused, not tabulated as a divergence -------------------------------


def test_token_ids_past_the_vocabulary_are_refused_naming_the_file(tmp_path):
  """The high byte of every 97th token set in a prepared shard: the manifest vouched for the
  shard by its size, the run ended "diverged at step 1" with exit 0."""
  import types

  import numpy as np

  from resnorm_jax.data import prepare, sources, token_files
  from resnorm_jax.data import tokenizer as tok_lib

  (tmp_path / "doc.txt").write_bytes(
    open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb").read()[:60_000]
  )
  source, documents = prepare.local_documents(str(tmp_path / "doc.txt"))
  folder = tmp_path / "bytes"
  manifest = prepare.prepare(
    documents,
    source,
    tok_lib.parse("bytes"),
    str(folder),
    workers=1,
    log=lambda s: None,
    val_fraction=0.1,
    shard_tokens=30_000,
  )
  cfg = types.SimpleNamespace(source="tokens", path=str(folder), val_path="", val_fraction=0.1)
  sources.load_corpus(cfg, 384, 32)  # intact
  shard = folder / manifest["splits"]["train"]["shards"][0]["file"]
  tokens = np.array(token_files.read_shard(str(shard)))
  tokens[::97] |= 0x100  # ids 256..511: past the 257 of the tokenizer
  token_files.write_shard(str(shard), tokens, 1)  # same size: the manifest's count holds
  with pytest.raises(token_files.DataError) as e:
    sources.load_corpus(cfg, 384, 32)
  msg = str(e.value)
  bad = np.flatnonzero(tokens >= 257)
  assert f"token id {tokens.max()} in {str(shard)!r}" in msg, msg
  assert f"vocab_size=257 (the first such id at token {bad[0]:,}" in msg and "--verify" in msg
  assert isinstance(e.value, ValueError)  # bad input: exit status 2 on the command line
