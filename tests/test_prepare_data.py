"""experiments.prepare_data -> data.source=tokens, offline: bytes and train:V tokenizers on small
local text, the held-out split by document hash (and a BPE that never saw it), the manifest, the
memory-mapped multi-shard view, vocab from the manifest, the fingerprint in config.json,
summary.json and the checkpoint check. Nothing downloads."""

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import types

import numpy as np
import pytest

from configs import base
from resnorm_jax.data import batches, heldout, prepare, sources, token_files, unigram
from resnorm_jax.data import tokenizer as tok_lib
from resnorm_jax.data.token_files import DataError
from resnorm_jax.train import run_setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> tuple[str, list[bytes]]:
  """Four documents (files) of Shakespeare, 40 kB each: (glob, their bytes)."""
  folder = tmp_path_factory.mktemp("texts")
  raw = open(SHAKESPEARE, "rb").read()[: 4 * 40_000]
  parts = [raw[i * 40_000 : (i + 1) * 40_000] for i in range(4)]
  for i, part in enumerate(parts):
    (folder / f"doc{i}.txt").write_bytes(part)
  return str(folder / "doc*.txt"), parts


def _prepare(texts, out, tokenizer="bytes", workers=1, **kw):
  source, documents = prepare.local_documents(texts[0])
  kw = {"val_fraction": 0.1, "shard_tokens": 30_000, **kw}
  return prepare.prepare(
    documents, source, tok_lib.parse(tokenizer), str(out), workers=workers, log=lambda s: None, **kw
  )


def _cfg(path, val_path=""):
  return types.SimpleNamespace(source="tokens", path=str(path), val_path=val_path, val_fraction=0.1)


def _hash_split(parts: list[bytes], fraction: float, limit: int) -> dict[str, list]:
  """{split: [(piece, starts its document)]}: pieces held out when blake2b-64 < fraction."""
  out: dict[str, list] = {"val": [], "train": []}
  for doc in parts:
    for i, piece in enumerate(heldout.pieces(doc, limit)):
      where = int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "big") / 2**64
      out["val" if where < fraction else "train"].append((piece, i == 0))
  return out


def _byte_stream(pieces: list) -> np.ndarray:
  """The bytes tokenizer's ids of pieces: 256 before each document's first piece."""
  ids = [([256] if first else []) + list(piece) for piece, first in pieces]
  return np.array([i for part in ids for i in part], np.uint16)


def test_bytes_shards_hold_the_hash_split_with_separators_and_checksums(texts, tmp_path):
  m = _prepare(texts, tmp_path / "b")
  assert m["tokenizer"] == {"name": "bytes", "vocab_size": 257, "eot_id": 256}
  limit = m["held_out"]["piece_bytes"]
  assert limit == 1024  # 10% of 160 kB / 32 is below the 1 KiB floor
  expected = {s: _byte_stream(p) for s, p in _hash_split(texts[1], 0.1, limit).items()}
  assert 0 < len(expected["val"]) < 0.2 * len(expected["train"])
  val, train = m["splits"]["val"], m["splits"]["train"]
  assert (val["tokens"], train["tokens"]) == (len(expected["val"]), len(expected["train"]))
  assert val["documents"] + train["documents"] == 4  # each counted where it starts
  assert [s["tokens"] for s in train["shards"][:-1]] == [30_000] * (len(train["shards"]) - 1)
  for entry in val["shards"] + train["shards"]:
    raw = (tmp_path / "b" / entry["file"]).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == entry["sha256"]
    assert np.frombuffer(raw[:12], "<i4").tolist() == [20240520, 1, entry["tokens"]]
  corpus = sources.load_corpus(_cfg(tmp_path / "b"), 384, 64)
  assert isinstance(corpus.train, token_files.ShardedTokens)  # memmaps, not one copy
  assert all(isinstance(s, np.memmap) for s in corpus.train.shards)
  np.testing.assert_array_equal(np.asarray(corpus.val), expected["val"])
  np.testing.assert_array_equal(np.asarray(corpus.train), expected["train"])
  assert corpus.split["method"] == "manifest"
  assert corpus.split["manifest"]["fingerprint"] == m["fingerprint"]
  assert m["held_out"]["method"] == "document_hash" and m["held_out"]["val_fraction"] == 0.1
  # Counts from the manifest: the same entropies as counting every token.
  plain = np.asarray(corpus.train)
  assert unigram.unigram_entropy(corpus.train, 384) == pytest.approx(
    unigram.unigram_entropy(plain, 384)
  )
  assert token_files.verify(str(tmp_path / "b")) == []


def test_the_split_follows_the_text_not_the_order(texts, tmp_path):
  """Documents in another order (another file listing): each held-out piece stays held out."""
  docs = [p.decode() for p in texts[1]]
  kw = dict(shard_tokens=30_000, workers=1, val_fraction=0.1, log=lambda s: None)
  source = {"bytes": sum(map(len, texts[1]))}
  a = prepare.prepare(lambda: iter(docs), source, tok_lib.parse("bytes"), str(tmp_path / "a"), **kw)
  b = prepare.prepare(
    lambda: iter(docs[::-1]), source, tok_lib.parse("bytes"), str(tmp_path / "b"), **kw
  )
  assert a["splits"]["val"]["tokens"] == b["splits"]["val"]["tokens"]
  assert a["splits"]["val"]["pieces"] == b["splits"]["val"]["pieces"] > 0


def test_train_bpe_offline_deterministic_and_parallel(texts, tmp_path):
  one = _prepare(texts, tmp_path / "w1", "train:300", workers=1)
  two = _prepare(texts, tmp_path / "w2", "train:300", workers=2)  # a process pool
  assert one["fingerprint"] == two["fingerprint"]  # same tokenizer, same shards
  tok = one["tokenizer"]
  assert (tok["name"], tok["vocab_size"], tok["eot_id"]) == ("train:300", 300, 0)
  assert one["held_out"]["tokenizer_trained_on"] == "train"
  # Each split decodes back to its pieces; every document starts with <|endoftext|> once.
  from tokenizers import Tokenizer

  hf = Tokenizer.from_file(str(tmp_path / "w1" / "tokenizer.json"))
  pieces = _hash_split(texts[1], 0.1, one["held_out"]["piece_bytes"])
  total = 0
  for split in ("val", "train"):
    stream = np.concatenate(
      [token_files.read_shard(p) for p in token_files.split_files(str(tmp_path / "w1"), one, split)]
    )
    assert hf.decode(stream.tolist()).encode() == b"".join(p for p, _ in pieces[split])
    assert (stream == 0).sum() == sum(first for _, first in pieces[split])
    total += len(stream)
  assert total < 0.8 * sum(map(len, texts[1]))  # it compresses


def _salted(body: str, held: bool, fraction: float) -> str:
  """`body` plus the first salt whose hash puts it on the asked side of the split."""
  for salt in range(10_000):
    doc = f"{body} {salt}\n"
    if heldout.is_held_out(doc.encode(), fraction) == held:
      return doc
  raise AssertionError("no salt found")


@pytest.mark.parametrize("held", [True, False])
def test_the_bpe_never_sees_a_held_out_document(tmp_path, monkeypatch, held):
  """A word found in one document only: a merge of it exists iff that document trains."""
  raw = open(SHAKESPEARE, "rb").read()[:40_000].decode()
  docs = [raw[i : i + 1000] for i in range(0, len(raw), 1000)]  # whole pieces: <= 1 KiB
  docs.append(_salted("qzqz" * 200, held, 0.2))
  seen: list[str] = []
  train_bpe = tok_lib.train_bpe

  def recorded(texts, vocab_size):  # what the BPE is trained on
    seen.extend(texts)
    return train_bpe(seen, vocab_size)

  monkeypatch.setattr(tok_lib, "train_bpe", recorded)
  m = prepare.prepare(
    lambda: iter(docs), {"bytes": len(raw)}, tok_lib.parse("train:600"), str(tmp_path / "o"),
    val_fraction=0.2, shard_tokens=100_000, workers=1, log=lambda s: None,
  )  # fmt: skip
  val_docs = [d for d in docs if heldout.is_held_out(d.encode(), 0.2)]
  assert 0 < len(val_docs) < len(docs) and (docs[-1] in val_docs) == held
  assert sorted(seen) == sorted(d for d in docs if d not in val_docs)  # the training input
  vocab = json.loads((tmp_path / "o" / "tokenizer.json").read_text())["model"]["vocab"]
  assert any("qz" in token for token in vocab) != held
  assert m["splits"]["val"]["documents"] == len(val_docs)


def test_vocab_from_the_manifest_padded_and_a_smaller_one_refused(texts, tmp_path):
  _prepare(texts, tmp_path / "t", "train:300")
  c = base.get_config()
  c.data.source, c.data.path, c.model.vocab_size = "tokens", str(tmp_path / "t"), 0
  assert run_setup.model_config(c).vocab_size == 384  # 300 up to a multiple of 128
  c.model.vocab_size = 512
  assert run_setup.model_config(c).vocab_size == 512
  c.model.vocab_size = 299
  with pytest.raises(DataError, match=r"vocab_size=299 is smaller.*300 ids.*takes 384"):
    run_setup.model_config(c)
  c.data.source, c.data.path, c.model.vocab_size = "stdlib", "", 0  # bytes: 256, as before
  assert run_setup.model_config(c).vocab_size == 256
  c.data.source, c.data.path = "tokens", str(tmp_path / "nothing_here.bin")
  with pytest.raises(DataError, match="manifest.json"):
    run_setup.model_config(c)
  assert base.get_config().model.vocab_size == 256  # the current default is unchanged


def test_manifest_spares_the_scan_and_guards_the_files(texts, tmp_path, monkeypatch):
  m = _prepare(texts, tmp_path / "t", "train:300")
  corpus = sources.load_corpus(_cfg(tmp_path / "t"), 384, 32)
  assert corpus.train.counts is not None and corpus.train.counts.sum() == len(corpus.train)
  # A glob over every shard: the held-out ones are still held out, never trained on.
  both = sources.load_corpus(_cfg(tmp_path / "t" / "*.bin"), 384, 32)
  assert len(both.train) == len(corpus.train) and both.split["excluded_from_train"] == 1
  with pytest.raises(DataError, match="smaller"):
    sources.load_corpus(_cfg(tmp_path / "t"), 299, 32)
  # A changed manifest, or a shard of the wrong length, is refused.
  edited = dict(m, splits={**m["splits"], "val": {**m["splits"]["val"], "tokens": 1}})
  (tmp_path / "t" / "manifest.json").write_text(json.dumps(edited))
  with pytest.raises(DataError, match="fingerprint does not match"):
    sources.load_corpus(_cfg(tmp_path / "t"), 384, 32)
  token_files.write_manifest(
    str(tmp_path / "t"), {k: v for k, v in m.items() if k != "fingerprint"}
  )
  first = tmp_path / "t" / m["splits"]["train"]["shards"][0]["file"]
  token_files.write_shard(str(first), np.zeros(10, np.uint16), 1)
  with pytest.raises(DataError, match="its manifest says"):
    sources.load_corpus(_cfg(tmp_path / "t"), 384, 32)
  assert token_files.verify(str(tmp_path / "t")) == [first.name]


def test_sharded_view_indexes_like_the_concatenation():
  rng = np.random.default_rng(0)
  parts = [rng.integers(0, 1000, n).astype(np.uint16) for n in (7, 1, 30, 12)]
  view, flat = token_files.ShardedTokens(parts), np.concatenate(parts)
  assert len(view) == 50 and view.dtype == np.uint16
  idx = rng.integers(0, 50, size=(6, 9))
  np.testing.assert_array_equal(view[idx], flat[idx])
  for a, b in ((0, 50), (5, 9), (8, 38), (40, 50), (7, 8), (20, 20)):
    np.testing.assert_array_equal(np.asarray(view[a:b]), flat[a:b])
  assert view[49] == flat[49] and view[-1] == flat[-1]
  x, y = batches.get_batch(view, seed=1, step=2, batch_size=4, seq_len=8)
  np.testing.assert_array_equal(
    (x, y), batches.get_batch(flat, seed=1, step=2, batch_size=4, seq_len=8)
  )
  with pytest.raises(IndexError):
    view[np.array([50])]


@pytest.mark.long  # prepare and two runs in processes
def test_prepare_then_train_records_the_fingerprint_and_guards_the_checkpoint(
  texts, tmp_path, run_script
):
  out, work = tmp_path / "prepared", tmp_path / "run"
  prep = [
    "-m", "experiments.prepare_data", f"--input={texts[0]}", "--tokenizer=train:300",
    f"--out={out}", "--val_fraction=0.05", "--shard_tokens=20000", "--workers=2",
  ]  # fmt: skip
  proc = run_script([sys.executable, *prep])
  assert proc.returncode == 0, proc.stderr[-2000:]
  manifest = json.loads((out / "manifest.json").read_text())
  assert f"fingerprint {manifest['fingerprint']}" in proc.stdout
  train = [
    sys.executable, "-m", "experiments.train", "--config=configs/smoke.py", f"--workdir={work}",
    "--config.data.source=tokens", f"--config.data.path={out}", "--config.model.vocab_size=0",
  ]  # fmt: skip
  proc = run_script(train, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "train:300, 300 ids" in proc.stdout
  assert "on cpu: 1 x " in proc.stdout and " in 1 process; attention dense;" in proc.stdout
  assert json.loads((work / "summary.json").read_text())["devices"]["platform"] == "cpu"
  config = json.loads((work / "config.json").read_text())
  summary = json.loads((work / "summary.json").read_text())
  assert config["resolved_model"]["vocab_size"] == 384
  for record in (config["data_split"], summary["data_split"]):
    assert record["manifest"]["fingerprint"] == manifest["fingerprint"]
  assert summary["status"] == "completed"
  # The same folder prepared again differently: the checkpoint is another experiment's.
  shutil.rmtree(out)
  redo = [a if a != "--tokenizer=train:300" else "--tokenizer=train:320" for a in prep]
  assert run_script([sys.executable, *redo]).returncode == 0
  proc = run_script([*train, "--config.train.steps=30"], timeout=300)  # extends it
  assert proc.returncode == 2 and "data_fingerprint" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize(
  "args, message",
  [
    (["--tokenizer=bogus"], "bytes, gpt2, train:V"),
    (["--tokenizer=train:100"], "above 256"),
    (["--tokenizer=bytes", "--hf_dataset=x"], "exactly one of"),
    (["--tokenizer=bytes", "--val_fraction=0"], "must be in (0, 1)"),
    (["--tokenizer=bytes", "--max_val_tokens=0"], "positive"),
    (["--tokenizer=missing.json"], "no such tokenizer.json"),
  ],
)
def test_prepare_refuses_bad_input(texts, tmp_path, run_script, args, message):
  proc = run_script(
    [sys.executable, "-m", "experiments.prepare_data", f"--input={texts[0]}",
     f"--out={tmp_path / 'o'}", *args]
  )  # fmt: skip
  assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_prepare_refuses_an_existing_folder_and_a_missing_datasets_library(texts, tmp_path):
  _prepare(texts, tmp_path / "b")
  with pytest.raises(ValueError, match="already exists and is not an empty folder"):
    _prepare(texts, tmp_path / "b")
  with pytest.raises(ValueError, match="nothing to train on"):
    _prepare(texts, tmp_path / "c", val_fraction=1 - 1e-12)
  with pytest.raises(ValueError, match="nothing is held out"):
    _prepare(texts, tmp_path / "d", val_fraction=1e-12)
  if importlib.util.find_spec("datasets") is None:  # never download in a test
    with pytest.raises(ValueError, match="requirements-data.txt"):
      prepare.hf_documents("HuggingFaceFW/fineweb-edu", "sample-10BT", "train", "text")


def _paper_config():
  path = os.path.join(ROOT, "configs", "postnorm_96L.py")
  spec = importlib.util.spec_from_file_location("_paper_postnorm", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config("paper")


def test_paper_scale_trains_on_resnorm_data_and_refuses_stdlib(texts, tmp_path, monkeypatch):
  _prepare(texts, tmp_path / "p", "train:300")
  monkeypatch.setenv(base.DATA_ENV, str(tmp_path / "p"))
  c = _paper_config()
  assert (c.data.source, c.data.path, c.model.vocab_size) == ("tokens", str(tmp_path / "p"), 0)
  assert run_setup.model_config(c).vocab_size == 384
  corpus = sources.load_corpus(c.data, 384, c.train.seq_len)
  assert corpus.split["manifest"]["tokenizer"] == "train:300"
  monkeypatch.delenv(base.DATA_ENV)
  c = _paper_config()
  with pytest.raises(DataError, match="RESNORM_DATA=DIR"):
    run_setup.model_config(c)
  c.data.source, c.model.vocab_size = "stdlib", 0
  with pytest.raises(DataError, match="allow_stdlib=true"):
    sources.load_corpus(c.data, 256, c.train.seq_len)
  c.data.allow_stdlib = True  # asked for explicitly: the stdlib corpus at paper scale
  assert sources.load_corpus(c.data, 256, c.train.seq_len).split["method"] == "by_file_hash"


def _words_file(path, size: int) -> None:
  """About `size` bytes of lines of random words: a corpus with no document boundaries."""
  rng = np.random.default_rng(0)
  words = np.array(["".join(rng.choice(list("abcdefghij"), n)) for n in rng.integers(1, 9, 500)])
  lines = [" ".join(rng.choice(words, 12)) + "\n" for _ in range(size // 60)]
  path.write_text("".join(lines))


def test_defaults_work_on_a_3mb_file_and_a_failed_run_does_not_block_the_retry(
  tmp_path, run_script
):
  corpus, out = tmp_path / "corpus", tmp_path / "prepared"
  corpus.mkdir()
  _words_file(corpus / "a.txt", 3_000_000)
  (corpus / "z_bad.txt").write_bytes(b"\xff\xfe not UTF-8")
  prep = [sys.executable, "-m", "experiments.prepare_data", "--tokenizer=bytes", f"--out={out}"]
  # Fails after shards of a.txt were written (small shards): nothing is left in the way.
  failed = run_script([*prep, f"--input={corpus / '*.txt'}", "--shard_tokens=100000"])
  assert failed.returncode == 2 and "not UTF-8" in failed.stderr, failed.stderr[-2000:]
  assert len(failed.stderr.strip().splitlines()) == 1  # one line, no traceback
  assert sorted(os.listdir(tmp_path)) == ["corpus"]  # no output, no partial folder
  (tmp_path / ".prepared.partial-otherhost.1").mkdir()  # as a killed run leaves it
  proc = run_script([*prep, f"--input={corpus / 'a.txt'}"])  # every other flag by default
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "partial output of another run" in proc.stdout
  m = json.loads((out / "manifest.json").read_text())
  files = ["manifest.json", "token_counts.npz", "train_000000.bin", "val_000000.bin"]
  assert sorted(os.listdir(out)) == files  # bytes: no tokenizer.json
  val, train = m["splits"]["val"]["tokens"], m["splits"]["train"]["tokens"]
  assert 0.002 < val / (val + train) < 0.01  # the default 0.5%, by piece hash
  assert m["held_out"]["val_fraction"] == 0.005 and m["held_out"]["max_val_tokens"] == 10**8
  assert m["splits"]["val"]["pieces"] > 5 and m["source"]["documents"] == 1
  corpus_ = sources.load_corpus(_cfg(out), 384, 64)
  assert len(corpus_.val) == val and corpus_.split["manifest"]["fingerprint"] == m["fingerprint"]
  again = run_script([*prep, f"--input={corpus / 'a.txt'}"])
  assert again.returncode == 2 and "already exists" in again.stderr


def test_an_unreachable_hub_ends_in_one_line_and_exit_2(tmp_path, run_script):
  """--hf_dataset offline (here a stand-in `datasets` whose stream fails as the hub's does):
  one line on stderr, exit status 2, no output folder; with a worker pool and without."""
  fake = tmp_path / "fake" / "datasets"
  fake.mkdir(parents=True)
  (fake / "__init__.py").write_text(
    '__version__ = "0"\n\n\ndef load_dataset(*args, **kwargs):\n'
    '  raise ConnectionError("Couldn\'t reach the Hugging Face Hub\\n(offline)")\n'
  )
  for tokenizer, workers in (("bytes", 2), ("train:300", 1)):
    proc = run_script(
      [sys.executable, "-m", "experiments.prepare_data", "--hf_dataset=HuggingFaceFW/fineweb-edu",
       f"--tokenizer={tokenizer}", f"--workers={workers}", f"--out={tmp_path / 'o'}"],
      PYTHONPATH=str(tmp_path / "fake"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: --hf_dataset='HuggingFaceFW/fineweb-edu'")
    assert "ConnectionError: Couldn't reach the Hugging Face Hub (offline)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["fake"]


def test_a_refused_write_is_a_fault_naming_the_file_and_the_free_space(tmp_path):
  """A full disk while preparing: exit 1 (a fault: the same command once there is room) in
  one line naming the file, or the folder when the write did not say which, and the free
  space; an input that cannot be read stays bad input (exit 2) naming its path."""
  import errno

  from experiments import prepare_data

  out = str(tmp_path / "out")
  shard = os.path.join(out, "train_000000.bin")
  code, message = prepare_data.os_error_exit(
    OSError(errno.ENOSPC, "No space left on device", shard), out
  )
  assert code == 1
  assert f"preparing {out} failed: No space left on device (writing {shard})" in message
  assert "free" in message and "\n" not in message
  code, message = prepare_data.os_error_exit(OSError(errno.ENOSPC, "No space left on device"), out)
  assert code == 1 and f"on the disk of {out}" in message
  code, message = prepare_data.os_error_exit(
    FileNotFoundError(errno.ENOENT, "No such file or directory", "/nope/corpus.txt"), out
  )
  assert code == 2 and "/nope/corpus.txt" in message
