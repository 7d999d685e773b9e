"""The epoch sampler (data.sampling=epoch): every window once per epoch, a pure function of
(seed, step, process), and the random sampler unchanged."""

import collections

import numpy as np
import pytest

from resnorm_jax.data import batches
from resnorm_jax.data.token_files import DataError


@pytest.mark.parametrize("domain", [1, 2, 3, 7, 64, 1000, 4099])
def test_permute_is_a_bijection_that_depends_on_its_key(domain):
  idx = np.arange(domain)
  a, b = batches.permute(idx, domain, key=1), batches.permute(idx, domain, key=2)
  assert sorted(a.tolist()) == list(range(domain))
  if domain >= 64:
    assert (a != b).mean() > 0.9  # another key, another order
    assert (a != idx).mean() > 0.9  # not the identity


def _epoch_batches(tokens, steps, batch_size, seq_len, seed=0, **process):
  return [
    batches.get_batch(
      tokens, seed=seed, step=s, batch_size=batch_size, seq_len=seq_len, sampling="epoch", **process
    )
    for s in range(steps)
  ]


def test_two_epochs_see_every_window_exactly_once_each():
  seq_len, batch_size = 8, 4
  tokens = np.arange(8 * 30 + 5, dtype=np.int32)  # 30 windows and a tail that fits none
  windows = (len(tokens) - 1) // seq_len
  steps = 2 * windows // batch_size  # 15 steps: exactly two epochs of 30 windows
  got = _epoch_batches(tokens, steps, batch_size, seq_len)
  starts = np.concatenate([x[:, 0] for x, _ in got])
  for epoch in (starts[:windows], starts[windows:]):
    assert sorted(epoch.tolist()) == [w * seq_len for w in range(windows)]
  assert not np.array_equal(starts[:windows], starts[windows:])  # a fresh order each epoch
  for x, y in got:  # targets are the inputs shifted by one token
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:])


def test_a_batch_across_an_epoch_boundary_and_every_token_once():
  seq_len, batch_size = 4, 3
  tokens = np.arange(4 * 10 + 1, dtype=np.int32)  # 10 windows: batches straddle epochs
  got = _epoch_batches(tokens, 10, batch_size, seq_len)  # 30 windows: 3 epochs
  counts = collections.Counter(np.concatenate([x.ravel() for x, _ in got]).tolist())
  assert set(counts.values()) == {3}  # every input token 3 times in 3 epochs
  assert len(counts) == 40


def test_epoch_batches_are_a_pure_function_split_across_processes():
  tokens = np.arange(10_000, dtype=np.int32)
  whole = _epoch_batches(tokens, 3, 8, 16, seed=5)
  again = _epoch_batches(tokens, 3, 8, 16, seed=5)
  other_seed = _epoch_batches(tokens, 3, 8, 16, seed=6)
  for (x, _), (x2, _), (x3, _) in zip(whole, again, other_seed, strict=True):
    np.testing.assert_array_equal(x, x2)
    assert not np.array_equal(x, x3)
  halves = [
    _epoch_batches(tokens, 3, 8, 16, seed=5, process_index=p, process_count=2) for p in (0, 1)
  ]
  for step, (x, _) in enumerate(whole):
    np.testing.assert_array_equal(np.concatenate([halves[0][step][0], halves[1][step][0]]), x)


def test_the_random_sampler_is_the_default_and_unchanged():
  tokens = np.arange(10_000, dtype=np.int32)
  default = batches.get_batch(tokens, seed=3, step=7, batch_size=4, seq_len=16)
  rng = np.random.default_rng([3, 7])  # the with-replacement draw every committed run used
  starts = rng.integers(0, len(tokens) - 16, size=4)
  np.testing.assert_array_equal(default[0][:, 0], tokens[starts])


def test_an_unknown_sampler_is_refused_naming_the_choices():
  with pytest.raises(DataError, match=r"data.sampling='epochs' is not one of random, epoch"):
    batches.get_batch(np.arange(100), seed=0, step=0, batch_size=2, seq_len=4, sampling="epochs")


def test_a_config_with_an_unknown_sampler_is_refused_before_any_device():
  from configs import smoke
  from resnorm_jax.train import run_setup

  c = smoke.get_config()
  c.data.sampling = "shuffle"
  with pytest.raises(ValueError, match=r"data.sampling='shuffle' is not one of random, epoch"):
    run_setup.validate(c, vocab_size=256, platform="cpu")


def test_a_prepared_folder_trained_two_epochs_sees_every_window_once_per_epoch(tmp_path):
  """The batch source the loop uses, on a folder made by prepare_data (bytes)."""
  import types

  from resnorm_jax.data import prepare, sources
  from resnorm_jax.data import tokenizer as tok_lib

  text = tmp_path / "doc.txt"
  text.write_bytes(b"".join(b"line %d of a small corpus\n" % i for i in range(2000)))
  source, documents = prepare.local_documents(str(text))
  out = tmp_path / "prepared"
  prepare.prepare(
    documents,
    source,
    tok_lib.parse("bytes"),
    str(out),
    workers=1,
    log=lambda s: None,
    val_fraction=0.1,
    shard_tokens=10_000,
  )
  cfg = types.SimpleNamespace(source="tokens", path=str(out), val_path="", val_fraction=0.1)
  corpus = sources.load_corpus(cfg, 384, 32)
  seq_len, batch_size = 32, 8
  tokens = np.asarray(corpus.train)
  windows = (len(tokens) - 1) // seq_len
  steps = -(-2 * windows // batch_size)  # two epochs (and a little of the third)
  starts = batches.epoch_starts(len(tokens), seq_len, 0, 0, steps * batch_size)
  for epoch in (starts[:windows], starts[windows : 2 * windows]):
    assert sorted(epoch.tolist()) == [w * seq_len for w in range(windows)]
  # ... and those are the rows the batch source hands the loop, inputs and targets.
  got = _epoch_batches(tokens, steps, batch_size, seq_len)
  for step, (x, y) in enumerate(got):
    for row, start in enumerate(starts[step * batch_size : (step + 1) * batch_size]):
      np.testing.assert_array_equal(x[row], tokens[start : start + seq_len])
      np.testing.assert_array_equal(y[row], tokens[start + 1 : start + seq_len + 1])


@pytest.mark.slow
@pytest.mark.long  # three runs
def test_a_run_with_the_epoch_sampler_resumes_to_the_uninterrupted_losses(tmp_path, run_script):
  """Extended in two segments (10 then 20 steps) = 20 steps at once: the epoch order is a
  pure function of (seed, step)."""
  import sys

  from resnorm_jax.runs.metrics_file import read_metrics

  def train(workdir, steps):
    r = run_script(
      [
        sys.executable,
        "-m",
        "experiments.train",
        "--config=configs/smoke.py",
        f"--workdir={workdir}",
        f"--config.train.steps={steps}",
        "--config.data.sampling=epoch",
      ]
    )
    assert r.returncode == 0, r.stderr[-2000:]

  whole, split = tmp_path / "whole", tmp_path / "split"
  train(whole, 20)
  train(split, 10)
  train(split, 20)
  losses = lambda d: [(r["step"], r["train/loss"]) for r in read_metrics(str(d / "metrics.jsonl"))]
  assert losses(split) == losses(whole)
