"""data.seed: the data order's seed apart from `seed` (the init). Unset it is `seed`, so every
run made before it draws the same batches; set, the batches are those of the data seed and the
init that of `seed`; it is part of a run's identity and refused out of range."""

import types

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from configs import base
from resnorm_jax.config import same_experiment
from resnorm_jax.train import resume_policy, run_setup

TOKENS = np.arange(5000, dtype=np.uint16) % 251


def _batches(seed: int, data_seed: int | None):
  c = base.get_config()
  c.seed = seed
  if data_seed is not None:
    c.data.seed = data_seed
  c.train.batch_size, c.train.seq_len = 4, 16
  corpus = types.SimpleNamespace(train=TOKENS, val=TOKENS)
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
  b = run_setup.Batches(corpus, c, NamedSharding(mesh, PartitionSpec()))
  return c, [np.asarray(b.train(step)[0]) for step in (0, 1, 57)]


def test_unset_data_seed_is_the_seed_and_the_batches_are_unchanged():
  c, unset = _batches(3, None)
  assert c.data.seed is None and run_setup.data_seed(c) == 3
  _, same = _batches(3, 3)
  for a, b in zip(unset, same, strict=True):
    np.testing.assert_array_equal(a, b)


def test_data_seed_alone_sets_the_data_order():
  c, mixed = _batches(0, 7)
  assert run_setup.data_seed(c) == 7
  _, data7 = _batches(7, None)  # the batches of seed 7
  _, data0 = _batches(0, None)
  for a, b, z in zip(mixed, data7, data0, strict=True):
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, z)


@pytest.mark.parametrize("bad", [-1, 2**31, True])
def test_a_bad_data_seed_is_refused_naming_it(bad):
  c = base.get_config()
  c.data.seed = bad  # a placeholder of int takes a bool in ml_collections: refused here
  with pytest.raises(ValueError, match=r"data\.seed=.* must be an integer in \[0, 2147483647\]"):
    run_setup.check_seed(c)


def test_data_seed_is_part_of_the_run_identity():
  """A run recorded before the key (no data.seed) is the same run as one with it unset; a
  data seed set or changed is another run, for a sweep, a workdir and a checkpoint."""
  old = same_experiment.flatten(base.get_config().to_dict())
  del old["data.seed"]
  now = base.get_config()
  for policy in (same_experiment.SWEEP, same_experiment.WORKDIR, resume_policy.CHECKPOINT):
    assert same_experiment.changed_keys(old, now.to_dict(), policy) == []
  now.data.seed = 5
  for policy in (same_experiment.SWEEP, same_experiment.WORKDIR, resume_policy.CHECKPOINT):
    assert same_experiment.changed_keys(old, now.to_dict(), policy) == ["data.seed"]
