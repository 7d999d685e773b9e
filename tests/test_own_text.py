"""Training on your own text: data.path alone names its source (a text file: text; a folder
made by experiments.prepare_data: tokens, with its vocabulary), never a silent fall-back to
the stdlib corpus; the BPE tokenizers name requirements-data.txt where `tokenizers` is
missing; a held-out split smaller than the end-of-run eval is warned about and counted.
Every file here is a temporary one: nothing depends on a corpus outside the repository."""

import builtins
import json
import os
import sys

import numpy as np
import pytest

from configs import base
from resnorm_jax.data import batches, corpora, sources
from resnorm_jax.data import tokenizer as tok_lib
from resnorm_jax.data import vocab as vocab_lib
from resnorm_jax.data.token_files import DataError

TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(2000))


@pytest.fixture
def text_file(tmp_path):
  path = tmp_path / "my.txt"
  path.write_text(TEXT)
  return str(path)


@pytest.fixture
def prepared(tmp_path, text_file):
  """A folder prepared from the text file (bytes: 257 ids, more than model.vocab_size=256)."""
  from resnorm_jax.data import prepare

  out = str(tmp_path / "my_bytes")
  source, documents = prepare.local_documents(text_file)
  prepare.prepare(
    documents, source, tok_lib.parse("bytes"), out, val_fraction=0.1, shard_tokens=10**6, workers=1
  )
  return out


def test_source_for_path(tmp_path, text_file, prepared):
  assert sources.source_for_path(text_file) == "text"
  assert sources.source_for_path(str(tmp_path / "*.txt")) == "text"
  assert sources.source_for_path(prepared) == "tokens"
  np.arange(100, dtype=np.uint16).tofile(tmp_path / "a.bin")
  assert sources.source_for_path(str(tmp_path / "a.bin")) == "tokens"
  assert sources.source_for_path("gs://bucket/folder") == "tokens"
  (tmp_path / "empty").mkdir()
  with pytest.raises(DataError, match="neither manifest.json nor .bin"):
    sources.source_for_path(str(tmp_path / "empty"))
  with pytest.raises(DataError, match=r"nothere.txt' matches no file.*data.source=text"):
    sources.source_for_path(str(tmp_path / "nothere.txt"))


def test_data_path_alone_names_its_source_and_a_folder_its_vocabulary(text_file, prepared):
  c = base.get_config()
  c.data.path = text_file
  note = sources.source_from_path(c, {"data.path": text_file})
  assert c.data.source == "text" and c.model.vocab_size == 256
  assert note == f"data.path={text_file}: data.source=text"
  c = base.get_config()
  c.data.path = prepared
  note = sources.source_from_path(c, {"data.path": prepared})
  assert c.data.source == "tokens" and c.model.vocab_size == 0
  assert "model.vocab_size=0 (from its manifest: bytes)" in note
  assert vocab_lib.resolve_vocab_size(c.data, c.model.vocab_size) == 384  # 257 padded
  # Given together, data.source and model.vocab_size stand (and are checked as given).
  c = base.get_config()
  c.data.path, c.data.source = prepared, "tokens"
  assert sources.source_from_path(c, {"data.path": prepared, "data.source": "tokens"}) is None
  assert c.model.vocab_size == 256
  # data.path from the config file, not the command line: nothing inferred.
  c = base.get_config()
  c.data.path = text_file
  assert sources.source_from_path(c, {}) is None and c.data.source == "stdlib"


def test_a_path_the_source_would_not_read_is_refused(text_file, prepared):
  """Before: data.source=stdlib with data.path trained on the stdlib corpus, exit 0."""
  c = base.get_config()
  c.data.path = text_file
  with pytest.raises(DataError, match=r"data.source='stdlib' reads no file.*my.txt"):
    sources.load_corpus(c.data, 256, 64)
  with pytest.raises(DataError, match="data.source='stdlib' reads no file"):
    vocab_lib.resolve_vocab_size(c.data, 256)  # what run_setup.validate and sweeps check
  c.data.source, c.data.path = "text", prepared
  with pytest.raises(
    DataError, match="is a folder made by experiments.prepare_data: give data.source=tokens"
  ):
    sources.load_corpus(c.data, 512, 64)


def test_bpe_without_tokenizers_names_the_requirements_file(monkeypatch):
  real_import = builtins.__import__

  def no_tokenizers(name, *args, **kwargs):
    if name == "tokenizers" or name.startswith("tokenizers."):
      raise ModuleNotFoundError("No module named 'tokenizers'")
    return real_import(name, *args, **kwargs)

  monkeypatch.delitem(sys.modules, "tokenizers", raising=False)
  monkeypatch.setattr(builtins, "__import__", no_tokenizers)
  assert tok_lib.parse("bytes").kind == "bytes"  # needs no library
  for spec in ("train:1024", "gpt2"):
    with pytest.raises(ValueError, match=r"pip install -r requirements-data.txt") as e:
      tok_lib.parse(spec)
    assert f"--tokenizer={spec}:" in str(e.value)
  with pytest.raises(ValueError, match="requirements-data.txt"):
    tok_lib.train_bpe(["some text"], 300)


def test_distinct_eval_targets_counts_repeats():
  assert batches.distinct_eval_targets(1000, 4, batch_size=8, seq_len=64) <= 999
  big = batches.distinct_eval_targets(10**6, 1, batch_size=2, seq_len=8)
  assert big == 16  # two windows of 8 targets that do not overlap (drawn from 10^6)


def test_end_line_shows_each_eval_beside_its_own_baseline_and_repeats():
  from resnorm_jax.runs import end_line

  summary = {
    "status": "completed",
    "outcome": "stuck",
    "steps": 200,
    "final_train_loss": 3.3,
    "final_eval_loss": 3.2617,
    "final_eval_tokens": 16384,
    "final_eval_distinct_tokens": 9012,
    "periodic_eval_loss": 3.3181,
    "periodic_eval_tokens": 8192,
    "periodic_eval_no_context_loss": 3.2991,
    "best_eval_loss": 3.3119,
    "heldout_unigram_entropy": 3.238,
    "tokens_per_second": 580.0,
    "wall_seconds": 300.0,
  }
  line = end_line.end_message(summary, "runs/x", None).splitlines()[0]
  assert "final eval 3.2617 on 16,384 tokens (9,012 distinct) (no-context 3.238)" in line
  assert "periodic eval 3.3181 on 8,192 tokens (no-context 3.299; best 3.3119)" in line


def test_a_short_heldout_split_is_warned_once_and_recorded(capsys):
  from resnorm_jax.train import eval_budget

  c = base.get_config()
  t = c.train  # 16,384 tokens asked for by the end-of-run eval
  val = np.zeros(5000, np.uint8)
  corpus = corpora.Corpus(np.zeros(10000, np.uint8), val, "test")
  short = eval_budget.short_heldout(corpus, t)
  out = capsys.readouterr().out
  assert out.count("warning:") == 1 and "5,000 tokens, fewer than the 16,384" in out
  assert 0 < short["final_eval_distinct_tokens"] < 5000
  assert f"{short['final_eval_distinct_tokens']:,} distinct" in out
  big = corpora.Corpus(val, np.zeros(20000, np.uint8), "test")
  assert eval_budget.short_heldout(big, t) == {} and capsys.readouterr().out == ""


@pytest.mark.long  # prepare, train and sample in processes
def test_own_text_in_two_commands(tmp_path, text_file, run_script):
  """The README's recipe at smoke length: train on a text file, then on a folder prepared
  from it, each with data.path alone (no data.source, no model.vocab_size)."""
  steps = ["--config.train.steps=4", "--config.opt.warmup_steps=0"]
  cfg = "--config=configs/nanogpt_char.py"
  run = run_script(
    [sys.executable, "-m", "experiments.train", cfg, f"--config.data.path={text_file}", *steps]
    + [f"--workdir={tmp_path / 'run_text'}"],
    timeout=600,
  )
  assert run.returncode == 0, run.stderr[-2000:]
  assert "(1 files; last 0.1 held out)" in run.stdout  # the text, not the stdlib corpus
  config = json.load(open(tmp_path / "run_text" / "config.json"))
  assert config["data"]["source"] == "text" and config["data"]["path"] == text_file
  out = str(tmp_path / "my_bytes")
  prep = run_script(
    [sys.executable, "-m", "experiments.prepare_data", f"--input={text_file}", "--tokenizer=bytes"]
    + ["--val_fraction=0.1", f"--out={out}"]
  )
  assert prep.returncode == 0, prep.stderr[-2000:]
  run = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/base.py",
      f"--config.data.path={out}",
    ]
    + ["--config.train.steps=4", f"--workdir={tmp_path / 'run_tokens'}"],
    timeout=600,
  )
  assert run.returncode == 0, run.stderr[-2000:]
  assert "data.source=tokens, model.vocab_size=0 (from its manifest: bytes)" in run.stdout
  resolved = json.load(open(tmp_path / "run_tokens" / "config.json"))["resolved_model"]
  assert resolved["vocab_size"] == 384
  bad = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/base.py",
      "--config.data.source=stdlib",
    ]
    + [f"--config.data.path={text_file}", f"--workdir={tmp_path / 'run_bad'}"]
  )
  assert bad.returncode == 2 and "data.source='stdlib' reads no file" in bad.stderr
  assert not os.path.exists(tmp_path / "run_bad" / "config.json")
