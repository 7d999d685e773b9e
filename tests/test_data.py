"""Tests for the corpus of each data.source (resnorm_jax.data.sources): determinism, sharding,
sources and errors."""

import hashlib
import math
import os
import sysconfig
import types
import zlib

import numpy as np
import pytest

from resnorm_jax.data import (
  batches,
  corpora,
  data_fingerprint,
  heldout,
  prepare,
  sources,
  stdlib_source,
  unigram,
)
from resnorm_jax.data.token_files import DataError


def _cfg(
  source: str = "stdlib",
  path: str = "",
  val_path: str = "",
  val_fraction: float = 0.1,
  split: str = "tail",
):
  """A stand-in for config.data."""
  return types.SimpleNamespace(
    source=source, path=path, val_path=val_path, val_fraction=val_fraction, split=split
  )


@pytest.fixture(scope="module")
def stdlib() -> corpora.Corpus:
  return sources.load_corpus(_cfg(), vocab_size=256, seq_len=128)


TOKENS = np.arange(1000, dtype=np.uint16) * 7 % 997  # distinct neighbours, non-monotone


def test_batch_deterministic_and_step_dependent():
  kw = dict(batch_size=8, seq_len=16)
  x1, y1 = batches.get_batch(TOKENS, seed=3, step=5, **kw)
  x2, y2 = batches.get_batch(TOKENS, seed=3, step=5, **kw)
  np.testing.assert_array_equal(x1, x2)
  np.testing.assert_array_equal(y1, y2)
  x3, _ = batches.get_batch(TOKENS, seed=3, step=6, **kw)
  x4, _ = batches.get_batch(TOKENS, seed=4, step=5, **kw)
  assert not np.array_equal(x1, x3)
  assert not np.array_equal(x1, x4)
  assert x1.shape == y1.shape == (8, 16)
  assert x1.dtype == y1.dtype == np.int32


def test_targets_are_next_tokens_from_corpus():
  x, y = batches.get_batch(TOKENS, seed=0, step=1, batch_size=4, seq_len=10)
  np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
  starts = [int(np.flatnonzero(TOKENS == row[0])[0]) for row in x]  # TOKENS values are unique
  for row_x, row_y, s in zip(x, y, starts, strict=True):
    np.testing.assert_array_equal(row_x, TOKENS[s : s + 10])
    np.testing.assert_array_equal(row_y, TOKENS[s + 1 : s + 11])


def test_offsets_cover_the_whole_range():
  # len - seq_len - 1 is the last valid start: with 12 tokens and seq_len 10, starts are 0 or 1.
  tokens = np.arange(12, dtype=np.uint16)
  firsts = {
    int(batches.get_batch(tokens, seed=0, step=s, batch_size=4, seq_len=10)[0][r, 0])
    for s in range(10)
    for r in range(4)
  }
  assert firsts == {0, 1}


def test_process_rows_concatenate_to_global_batch():
  kw = dict(seed=1, step=7, batch_size=8, seq_len=12)
  gx, gy = batches.get_batch(TOKENS, **kw)
  parts = [batches.get_batch(TOKENS, process_index=i, process_count=2, **kw) for i in range(2)]
  np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), gx)
  np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), gy)
  assert parts[0][0].shape == (4, 12)
  with pytest.raises(DataError, match="process_count=3"):
    batches.get_batch(TOKENS, process_index=0, process_count=3, **kw)


def test_eval_batch_deterministic_sharded_and_distinct_from_train():
  kw = dict(batch_size=4, seq_len=8)
  a = batches.eval_batch(TOKENS, index=2, **kw)
  np.testing.assert_array_equal(a[0], batches.eval_batch(TOKENS, index=2, **kw)[0])
  assert not np.array_equal(a[0], batches.eval_batch(TOKENS, index=3, **kw)[0])
  halves = [
    batches.eval_batch(TOKENS, index=2, process_index=i, process_count=2, **kw) for i in (0, 1)
  ]
  np.testing.assert_array_equal(np.concatenate([h[0] for h in halves]), a[0])
  np.testing.assert_array_equal(a[0][:, 1:], a[1][:, :-1])


def test_stdlib_corpus(stdlib):
  assert stdlib.train.dtype == np.uint8
  assert len(stdlib.train) > 1_000_000
  assert 0.02 < len(stdlib.val) / (len(stdlib.train) + len(stdlib.val)) < 0.3
  assert b"def " in stdlib.train[:100_000].tobytes()
  # Cached: the same object; deterministic: a fresh load gives the same bytes.
  assert sources.load_corpus(_cfg(), vocab_size=256, seq_len=128) is stdlib
  saved = dict(stdlib_source._STDLIB_CACHE)
  stdlib_source._STDLIB_CACHE.clear()
  try:
    fresh = sources.load_corpus(_cfg(), vocab_size=256, seq_len=128)
  finally:
    stdlib_source._STDLIB_CACHE.update(saved)
  assert fresh is not stdlib
  np.testing.assert_array_equal(fresh.train, stdlib.train)
  np.testing.assert_array_equal(fresh.val, stdlib.val)


def test_stdlib_split_is_by_file(stdlib):
  root = sysconfig.get_paths()["stdlib"]
  rel = "os.py"
  body = open(os.path.join(root, rel), "rb").read()
  in_val = zlib.crc32(rel.encode()) % 1000 < 100
  home, other = (stdlib.val, stdlib.train) if in_val else (stdlib.train, stdlib.val)
  # The whole file sits contiguously in its own split and nowhere in the other one.
  assert body in home.tobytes()
  assert body not in other.tobytes()


def test_stdlib_corpus_names_its_python_and_warns_when_it_is_not_the_results_one(stdlib):
  """The setup line names the Python, the file count and a fingerprint of the bytes; a corpus
  other than the committed results' (Python 3.11.7's stdlib) gets a one-line warning."""
  import platform

  files = stdlib_source.stdlib_paths()
  contents = [open(p, "rb").read() for p in files]
  fingerprint = stdlib_source.corpus_fingerprint(contents)
  assert f"stdlib of Python {platform.python_version()}, fingerprint {fingerprint}," in (
    stdlib.description
  )
  assert f"({len(files)} files;" in stdlib.description
  want = stdlib_source.RESULTS_CORPUS
  if platform.python_version() == want["python"]:  # the committed constant is this corpus's
    assert (len(files), fingerprint) == (want["files"], want["fingerprint"])
  assert bool(stdlib.warning) == (fingerprint != want["fingerprint"])
  assert stdlib_source.results_warning(want["python"], want["files"], want["fingerprint"]) == ""
  line = stdlib_source.results_warning("3.12.3", 1740, "0123456789ab")
  assert line.startswith("warning: ") and "\n" not in line
  assert "Python 3.12.3's (1,740 files" in line and f"{want['files']:,} files" in line
  readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
  assert f"stdlib of Python {want['python']}, fingerprint {want['fingerprint']}" in readme


def test_text_source_tail_split_and_val_path(tmp_path):
  text = ("hello world, " * 100).encode()
  (tmp_path / "a.txt").write_bytes(text)
  c = sources.load_corpus(_cfg("text", str(tmp_path / "a.txt"), val_fraction=0.25), 256, 16)
  assert c.train.dtype == np.uint8
  assert c.train.tobytes() + c.val.tobytes() == text
  assert len(c.val) == round(len(text) * 0.25)
  (tmp_path / "v.txt").write_bytes(b"held out text " * 5)
  c = sources.load_corpus(_cfg("text", str(tmp_path / "*.txt"), str(tmp_path / "v.txt")), 256, 16)
  # The glob also matches v.txt: a held-out file is never trained on.
  assert c.train.tobytes() == text
  assert c.val.tobytes() == b"held out text " * 5
  assert "1 of them excluded from train" in c.description
  assert c.split == {
    "method": "val_path",
    "train_tokens": len(text),
    "val_tokens": 70,
    "train_files": 1,
    "val_files": 1,
    "excluded_from_train": 1,
  }
  with pytest.raises(DataError, match="nothing is left to train on"):
    sources.load_corpus(_cfg("text", str(tmp_path / "v.txt"), str(tmp_path / "v.txt")), 256, 16)


def test_text_hash_split_holds_out_pieces_by_the_hash_of_their_bytes(tmp_path):
  n = 1500
  lines = [f"line {i} of file {f}: {'x' * (i % 37)}\n".encode() for f in range(3) for i in range(n)]
  files = [b"".join(lines[f * n : (f + 1) * n]) for f in range(3)]
  for f, body in enumerate(files):
    (tmp_path / f"f{f}.txt").write_bytes(body)
  cfg = _cfg("text", str(tmp_path / "f*.txt"), val_fraction=0.2, split="hash")
  c = sources.load_corpus(cfg, 256, 16)
  limit = c.split["piece_bytes"]
  assert limit == int(sum(map(len, files)) * 0.2 / 32)  # 1/32 of the expected held-out bytes
  want = {"train": b"", "val": b""}
  for body in files:
    start = 0
    while start < len(body):  # pieces end at the last newline within the limit
      end = (
        len(body) if len(body) - start <= limit else body.rindex(b"\n", start, start + limit) + 1
      )
      piece = body[start:end]
      where = int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "big") / 2**64
      want["val" if where < 0.2 else "train"] += piece
      start = end
  assert c.train.tobytes() == want["train"] and c.val.tobytes() == want["val"]
  assert 0.1 < len(c.val) / (len(c.train) + len(c.val)) < 0.3
  assert c.split["method"] == "document_hash" and c.split["val_pieces"] > 10
  tail = sources.load_corpus(_cfg("text", str(tmp_path / "f*.txt"), val_fraction=0.2), 256, 16)
  assert tail.split["method"] == "tail"  # the default is unchanged
  assert tail.train.tobytes() + tail.val.tobytes() == b"".join(files)


def test_pieces_end_at_line_ends_else_at_character_boundaries():
  lines = b"ab\n" * 10
  assert list(heldout.pieces(lines, 7)) == [b"ab\nab\n"] * 5  # the last newline within 7 bytes
  assert list(heldout.pieces(lines, 100)) == [lines]  # short: whole
  accents = ("\u00e9" * 3000).encode()  # 6000 bytes of 2-byte characters, no newline
  parts = list(heldout.pieces(accents, 1001))
  assert b"".join(parts) == accents and {len(p) for p in parts} == {1000}
  assert all(p.decode() for p in parts)  # never a character cut in two
  assert heldout.piece_limit(None, 0.005) == heldout.MAX_PIECE  # streamed: size unknown
  assert heldout.piece_limit(3_000_000, 0.005) == heldout.MIN_PIECE
  assert heldout.piece_limit(10**13, 0.005) == heldout.MAX_PIECE


def test_the_split_key_is_checked(tmp_path):
  (tmp_path / "a.txt").write_bytes(b"some text\n" * 200)
  np.arange(3000, dtype=np.uint16).tofile(tmp_path / "t.bin")
  with pytest.raises(DataError, match="data.split='random' is not one of tail, hash"):
    sources.load_corpus(_cfg("text", str(tmp_path / "a.txt"), split="random"), 256, 8)
  with pytest.raises(DataError, match="both choose the held-out text"):
    sources.load_corpus(
      _cfg("text", str(tmp_path / "a.txt"), str(tmp_path / "a.txt"), split="hash"), 256, 8
    )
  with pytest.raises(DataError, match="needs documents"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "t.bin"), split="hash"), 4096, 8)


def _unique_windows(n: int, seed: int) -> np.ndarray:
  """Tokens whose every 8-token window is (almost surely) unique: random ids in [0, 128),
  ASCII as bytes (a text source refuses bytes that are not UTF-8)."""
  return np.random.default_rng(seed).integers(0, 128, n).astype(np.uint8)


def _assert_eval_never_in_train(corpus: corpora.Corpus, seq_len: int = 16, substring: bool = True):
  """No eval sequence occurs in the train split: at the same offset, or (unique-window
  corpora) anywhere."""
  train = corpus.train.tobytes()
  for i in range(4):
    x, y = batches.eval_batch(corpus.val, index=i, batch_size=8, seq_len=seq_len)
    for row_x, row_y in zip(x, y, strict=True):
      window = np.concatenate([row_x, row_y[-1:]]).astype(corpus.train.dtype)
      start = corpus.val.tobytes().find(window.tobytes())
      assert start >= 0  # drawn from the held-out split
      at_offset = corpus.train[start : start + len(window)]
      assert not np.array_equal(at_offset, window)
      if substring:
        assert window.tobytes() not in train


@pytest.mark.parametrize("source", ["text", "tokens"])
@pytest.mark.parametrize("held", ["tail", "val_path", "val_path_in_glob"])
def test_eval_batches_never_come_from_the_train_split(tmp_path, source, held):
  parts = [_unique_windows(3000, seed) for seed in range(3)]
  suffix = ".txt" if source == "text" else ".bin"
  for i, part in enumerate(parts):
    arr = part if source == "text" else part.astype("<u2")
    arr.tofile(tmp_path / f"part{i}{suffix}")
  pattern = str(tmp_path / f"part*{suffix}")
  val_path = "" if held == "tail" else str(tmp_path / f"part2{suffix}")
  if held == "val_path":
    pattern = str(tmp_path / f"part[01]{suffix}")
  corpus = sources.load_corpus(_cfg(source, pattern, val_path, 0.2), 256, 16)
  if held != "tail":
    np.testing.assert_array_equal(corpus.val, parts[2])
    assert len(corpus.train) == 6000
  assert corpus.split["train_tokens"] + corpus.split["val_tokens"] <= 9000
  _assert_eval_never_in_train(corpus)


def test_stdlib_eval_batches_never_come_from_the_train_split(stdlib):
  # Real code repeats itself (licence headers), so only the same offset is checked.
  _assert_eval_never_in_train(stdlib, seq_len=128, substring=False)
  assert stdlib.split["method"] == "by_file_hash"
  assert stdlib.split["train_tokens"] == len(stdlib.train) > stdlib.split["val_tokens"] > 0


def test_heldout_unigram_entropy_against_numpy():
  train = np.array([0, 0, 0, 1, 1, 2], dtype=np.uint8)
  val = np.array([0, 1, 3, 3], dtype=np.uint8)
  counts = np.array([3, 2, 1, 0]) + 1.0  # add-one smoothing over the vocabulary of 4
  p = counts / counts.sum()
  expected = -(np.log(p[0]) + np.log(p[1]) + 2 * np.log(p[3])) / 4
  assert unigram.heldout_unigram_entropy(train, val, 4) == pytest.approx(expected)
  # Same distribution in both splits: close to the entropy (only the smoothing differs).
  rng = np.random.default_rng(0)
  big = rng.choice(8, 200_000, p=np.arange(1, 9) / 36).astype(np.uint8)
  h = unigram.unigram_entropy(big[:100_000], 8)
  assert unigram.heldout_unigram_entropy(big[:100_000], big[100_000:], 8) == pytest.approx(
    h, abs=2e-3
  )
  # A held-out split with other frequencies costs more than the train split's own entropy.
  assert unigram.heldout_unigram_entropy(train, val, 4) > unigram.unigram_entropy(train, 4)


def test_a_split_counted_once_scores_as_the_array_does(monkeypatch):
  rng = np.random.default_rng(1)
  train, val = rng.integers(0, 9, 5_000).astype(np.uint8), rng.integers(0, 9, 700).astype(np.uint8)
  want = (unigram.unigram_entropy(train, 9), unigram.heldout_unigram_entropy(train, val, 9))
  counted = unigram.Counted(train, 9)
  binned = []
  real = np.bincount
  monkeypatch.setattr(np, "bincount", lambda a, **kw: binned.append(len(a)) or real(a, **kw))
  got = (unigram.unigram_entropy(counted, 9), unigram.heldout_unigram_entropy(counted, val, 9))
  assert got == want and len(counted) == len(train)
  assert binned == [len(val)]  # only the held-out split is counted again


def test_tokens_nanogpt_raw_bin(tmp_path):
  tokens = (np.arange(3000) % 50257).astype(np.uint16)
  tokens.tofile(tmp_path / "train.bin")
  np.arange(100, dtype=np.uint16).tofile(tmp_path / "val.bin")
  cfg = _cfg("tokens", str(tmp_path / "train.bin"), str(tmp_path / "val.bin"))
  c = sources.load_corpus(cfg, vocab_size=50304, seq_len=32)
  np.testing.assert_array_equal(c.train, tokens)
  np.testing.assert_array_equal(c.val, np.arange(100))
  assert c.train.dtype == np.uint16


def _write_llmc(path, tokens: np.ndarray, version: int = 1) -> None:
  header = np.zeros(256, dtype="<i4")
  header[:3] = (20240520, version, len(tokens))
  with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.astype("<u2" if version == 1 else "<u4").tobytes())


def test_tokens_llmc_shards_glob_and_tail_split(tmp_path):
  a = np.full(600, 7, dtype=np.uint16)
  b = np.arange(400, dtype=np.uint16) + 1000
  _write_llmc(tmp_path / "shard_000.bin", a)
  _write_llmc(tmp_path / "shard_001.bin", b)
  cfg = _cfg("tokens", str(tmp_path / "shard_*.bin"), val_fraction=0.1)
  c = sources.load_corpus(cfg, vocab_size=50257, seq_len=32)
  both = np.concatenate([a, b])
  np.testing.assert_array_equal(c.train, both[:900])
  np.testing.assert_array_equal(c.val, both[900:])


def test_tokens_llmc_v2_uint32(tmp_path):
  tokens = np.arange(200, dtype=np.uint32) + 100_000
  _write_llmc(tmp_path / "s.bin", tokens, version=2)
  c = sources.load_corpus(_cfg("tokens", str(tmp_path / "s.bin"), val_fraction=0.5), 128256, 16)
  np.testing.assert_array_equal(c.train, tokens[:100])


def test_missing_path_errors(tmp_path):
  missing = str(tmp_path / "nope.txt")
  with pytest.raises(DataError, match="nope.txt"):
    sources.load_corpus(_cfg("text", missing), 256, 8)
  with pytest.raises(DataError, match="nope_"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "nope_*.bin")), 256, 8)


def test_empty_file_errors(tmp_path):
  (tmp_path / "empty.txt").write_bytes(b"")
  with pytest.raises(DataError, match="empty.txt"):
    sources.load_corpus(_cfg("text", str(tmp_path / "empty.txt")), 256, 8)
  (tmp_path / "empty.bin").write_bytes(b"")
  with pytest.raises(DataError, match="empty.bin"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "empty.bin")), 256, 8)


def test_corpus_shorter_than_one_sequence(tmp_path):
  (tmp_path / "short.txt").write_bytes(b"x" * 100)
  with pytest.raises(DataError, match=r"val split.*short.txt.*10 tokens.*65"):
    sources.load_corpus(_cfg("text", str(tmp_path / "short.txt")), 256, 64)
  with pytest.raises(DataError, match="seq_len=200"):
    sources.load_corpus(_cfg("text", str(tmp_path / "short.txt"), val_fraction=0.5), 256, 200)


def test_token_id_out_of_vocab(tmp_path):
  tokens = np.arange(300, dtype=np.uint16)
  tokens.tofile(tmp_path / "big.bin")
  with pytest.raises(DataError, match=r"token id 299 .*big.bin.*vocab_size=256"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "big.bin")), 256, 8)
  _write_llmc(tmp_path / "big_llmc.bin", tokens)
  with pytest.raises(DataError, match=r"token id 299 .*big_llmc.bin"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "big_llmc.bin")), 299, 8)


def test_bad_llmc_header(tmp_path):
  _write_llmc(tmp_path / "v9.bin", np.arange(10, dtype=np.uint16), version=9)
  with pytest.raises(DataError, match="version 9"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "v9.bin")), 256, 4)


def test_unknown_source_and_small_byte_vocab():
  with pytest.raises(DataError, match=r"'webtext'.*stdlib, text, tokens"):
    sources.load_corpus(_cfg("webtext"), 256, 8)
  with pytest.raises(DataError, match="vocab_size=128"):
    sources.load_corpus(_cfg("stdlib"), 128, 8)


def test_unigram_entropy():
  assert unigram.unigram_entropy(np.array([0, 0, 1, 1]), 4) == pytest.approx(math.log(2))
  assert unigram.unigram_entropy(np.full(50, 3, dtype=np.uint16), 8) == 0.0
  # Against the formula with unequal counts, and chunking must not change the result.
  tokens = np.array([0, 0, 0, 1, 2, 2], dtype=np.uint8)
  p = np.array([3, 1, 2]) / 6
  expected = float(-(p * np.log(p)).sum())
  assert unigram.unigram_entropy(tokens, 256) == pytest.approx(expected)
  assert unigram.unigram_entropy(tokens, 256, chunk=4) == pytest.approx(expected)
  with pytest.raises(DataError, match="token id 9"):
    unigram.unigram_entropy(np.array([9]), 4)


# --- fingerprints: what the data is, for a resume ------------------------------------------


def test_a_binary_file_as_a_text_corpus_is_refused_as_prepare_data_refuses_it(tmp_path):
  """A compiled program given as data.source=text trained as text; prepare_data refused it."""
  binary = tmp_path / "program.bin"
  binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
  with pytest.raises(ValueError, match=rf"text file '{binary}' \(data.source=text\) is not UTF-8"):
    sources.load_corpus(_cfg("text", str(binary)), 256, 8)
  _, documents = prepare.local_documents(str(binary))
  with pytest.raises(ValueError, match=rf"--input file '{binary}' is not UTF-8 text"):
    list(documents())


def test_every_source_fingerprints_the_files_it_reads(tmp_path, stdlib):
  text = tmp_path / "corpus.txt"
  text.write_bytes(b"hello world\n" * 100)
  before = sources.load_corpus(_cfg("text", str(text)), 256, 8).fingerprint
  assert set(before["files"]) == {str(text)} and before["files"][str(text)]["size"] == 1200
  os.utime(text, (1, 1))  # touched (or copied): the same data
  assert (
    data_fingerprint.changes(
      before, sources.load_corpus(_cfg("text", str(text)), 256, 8).fingerprint
    )
    == []
  )
  text.write_bytes(b"hello world\n" * 99 + b"hello World\n")  # edited under the same path and size
  after = sources.load_corpus(_cfg("text", str(text)), 256, 8).fingerprint
  (change,) = data_fingerprint.changes(before, after)
  assert change.startswith(f"{text} (sha256 ")
  # Raw and llm.c shards, without a manifest: each file (train and held out) by itself.
  TOKENS.tofile(tmp_path / "train.bin")
  _write_llmc(tmp_path / "val.bin", TOKENS[:100])
  cfg = _cfg("tokens", str(tmp_path / "train.bin"), str(tmp_path / "val.bin"))
  shards = sources.load_corpus(cfg, 1000, 8).fingerprint
  assert sorted(shards["files"]) == [str(tmp_path / "train.bin"), str(tmp_path / "val.bin")]
  _write_llmc(tmp_path / "val.bin", TOKENS[:99])
  (change,) = data_fingerprint.changes(shards, sources.load_corpus(cfg, 1000, 8).fingerprint)
  assert change == f"{tmp_path / 'val.bin'} (size 1224 -> 1222 bytes)"
  # The stdlib corpus: one record over its bytes, by content (not by where Python lives).
  record = stdlib.fingerprint["corpus"]
  digest = hashlib.sha256(stdlib.train.tobytes() + stdlib.val.tobytes()).hexdigest()
  assert record["sha256"] == digest and record["size"] == len(stdlib.train) + len(stdlib.val)
  moved = {"corpus": {**record, "name": "elsewhere"}}
  assert data_fingerprint.changes(stdlib.fingerprint, moved) == []
  # A fingerprint from before fingerprints (none) is not compared.
  assert data_fingerprint.changes({}, after) == []


def test_large_files_are_fingerprinted_by_samples(tmp_path, monkeypatch):
  monkeypatch.setattr(data_fingerprint, "FULL_HASH_BYTES", 1 << 16)
  path = tmp_path / "big.bin"
  blob = np.random.default_rng(0).integers(0, 255, 4 << 20, dtype=np.uint8)
  blob.tofile(path)
  record = data_fingerprint.file_record(str(path))
  assert record["sampled"] and record["size"] == 4 << 20
  blob[-1] ^= 1  # the last sample holds the last byte
  blob.tofile(path)
  assert data_fingerprint.file_record(str(path))["sha256"] != record["sha256"]
  # A prepared folder's shards are always sampled; a file the samples cover is read whole.
  assert data_fingerprint.file_record(str(path), full_hash_bytes=0)["sampled"]
  (tmp_path / "small.bin").write_bytes(b"ab" * 1000)
  assert not data_fingerprint.file_record(str(tmp_path / "small.bin"), 0)["sampled"]


def test_raw_uint32_tokens_without_a_header_are_refused(tmp_path):
  """They read as uint16 with every other token 0 (the high halves)."""
  (TOKENS.astype("<u4")).tofile(tmp_path / "u32.bin")
  with pytest.raises(DataError, match=r"u32.bin.*no llm.c header.*every other uint16"):
    sources.load_corpus(_cfg("tokens", str(tmp_path / "u32.bin")), 1000, 8)
  TOKENS.tofile(tmp_path / "u16.bin")  # nanoGPT's raw uint16 still reads
  c = sources.load_corpus(_cfg("tokens", str(tmp_path / "u16.bin")), 1000, 8)
  np.testing.assert_array_equal(np.concatenate([c.train, c.val]), TOKENS)


def test_a_folder_given_as_text_data_is_named_as_a_folder(tmp_path):
  (tmp_path / "a.txt").write_bytes(b"x" * 1000)
  with pytest.raises(DataError, match=r"data.path=.* is a folder: give a file or a glob"):
    sources.load_corpus(_cfg("text", str(tmp_path)), 256, 8)
