"""Faults that gave a wrong result without a word (issue 44): a lost config.json letting a
resume change the experiment, a sweep started from a second checkout running the first's
code, token ids outside the vocabulary trained as a divergence, sweep records that stayed
stale, and a population weaker than a single run."""

import json
import os

import pytest

from configs import smoke
from resnorm_jax.train import checkpoint as ckpt_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _smoke(**overrides):
  config = smoke.get_config()
  for key, value in overrides.items():
    section, name = key.split("__")
    config[section][name] = value
  return config


# --- 1. a run's identity survives a lost config.json -----------------------------------------


@pytest.mark.parametrize(
  "changes, named",
  [
    ({"opt__lr": 2e-3}, "opt.lr (0.001 -> 0.002)"),
    ({"opt__schedule": "cosine"}, "opt.schedule ("),
    ({"opt__warmup_steps": 7}, "opt.warmup_steps ("),
    ({"opt__weight_decay": 0.5}, "opt.weight_decay ("),
  ],
)
def test_a_checkpoint_refuses_a_resume_that_changes_the_optimizer(changes, named):
  """The checkpoint's frozen keys let opt.lr, the schedule and the warmup change; only
  config.json refused them, so with it lost a resume trained one run at two settings."""
  saved = ckpt_lib.run_meta(_smoke().to_dict(), [], {})
  ckpt_lib.check_same_run(saved, _smoke().to_dict(), "ckpt")  # the same run resumes
  longer = _smoke(train__steps=99, train__log_every=3, model__remat="full")
  ckpt_lib.check_same_run(saved, longer.to_dict(), "ckpt")  # length, logging, speed may change
  with pytest.raises(ValueError, match="another experiment") as e:
    ckpt_lib.check_same_run(saved, _smoke(**changes).to_dict(), "ckpt")
  assert named in str(e.value) and "new --workdir" in str(e.value)


def _run_smoke(workdir, **overrides):
  from resnorm_jax.train import loop

  config = _smoke(train__checkpoint_every=2, train__eval_every=2, train__log_every=2)
  for key, value in overrides.items():
    section, name = key.split("__")
    config[section][name] = value
  return loop.run(config, str(workdir))


@pytest.mark.slow  # trains
@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_lost_config_json_does_not_let_a_resume_change_the_lr(tmp_path, capsys, damage):
  """config.json deleted or truncated (a full disk, a bad copy), then a resume with another
  lr, schedule and warmup exited 0 with the two settings in one run."""
  workdir = tmp_path / "run"
  _run_smoke(workdir, train__steps=4)
  path = workdir / "config.json"
  if damage == "deleted":
    path.unlink()
  else:
    path.write_text(path.read_text()[:100])
  before = (workdir / "metrics.jsonl").read_text()
  capsys.readouterr()
  with pytest.raises(ValueError) as e:
    _run_smoke(workdir, train__steps=6, opt__lr=2e-3, opt__schedule="cosine")
  assert "opt.lr (0.001 -> 0.002)" in str(e.value)
  out = capsys.readouterr().out
  assert f"{path} is missing" in out if damage == "deleted" else f"{path} cannot be read" in out
  assert (workdir / "metrics.jsonl").read_text() == before  # nothing trained or cut
  # The same config resumes, and config.json is rebuilt.
  summary = _run_smoke(workdir, train__steps=6)
  assert summary["status"] == "completed" and summary["steps"] == 6
  assert json.loads(path.read_text())["opt"]["lr"] == 1e-3


# --- 3. corrupt data is refused, not tabulated as a divergence -------------------------------


def test_token_ids_past_the_vocabulary_are_refused_naming_the_file(tmp_path):
  """The high byte of every 97th token set in a prepared shard: the manifest vouched for the
  shard by its size, the run ended "diverged at step 1" with exit 0."""
  import types

  import numpy as np

  from resnorm_jax.data import corpora, prepare, token_files
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
  corpora.load_corpus(cfg, 384, 32)  # intact
  shard = folder / manifest["splits"]["train"]["shards"][0]["file"]
  tokens = np.array(token_files.read_shard(str(shard)))
  tokens[::97] |= 0x100  # ids 256..511: past the 257 of the tokenizer
  token_files.write_shard(str(shard), tokens, 1)  # same size: the manifest's count holds
  with pytest.raises(corpora.DataError) as e:
    corpora.load_corpus(cfg, 384, 32)
  msg = str(e.value)
  bad = np.flatnonzero(tokens >= 257)
  assert f"token id {tokens.max()} in {str(shard)!r}" in msg, msg
  assert f"vocab_size=257 (the first such id at token {bad[0]:,}" in msg and "--verify" in msg
  assert isinstance(e.value, ValueError)  # bad input: exit status 2 on the command line
