"""The training loss (train_step.cross_entropy): its formula, its equality with optax's, and
that it picks the target's logit without a gather (which made XLA write the float32 logits)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from resnorm_jax.train import train_step as ts


def _case(dtype, shape=(2, 3, 7), seed=0):
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(0, 4, shape), dtype)
  targets = jnp.asarray(rng.integers(0, shape[-1], shape[:-1]), jnp.int32)
  return logits, targets


def test_cross_entropy_is_log_partition_minus_the_target_logit():
  logits, targets = _case(jnp.float32)
  x = np.asarray(logits, np.float64)
  m = x.max(-1, keepdims=True)
  lse = (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]
  target = np.take_along_axis(x, np.asarray(targets)[..., None], -1)[..., 0]
  assert float(ts.cross_entropy(logits, targets)) == pytest.approx((lse - target).mean(), 1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_cross_entropy_equals_optax_to_the_bit(dtype):
  logits, targets = _case(dtype, (4, 16, 1000))
  want = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
  assert float(ts.cross_entropy(logits, targets)) == float(want.mean())


def test_cross_entropy_gradient_is_softmax_minus_one_hot():
  logits, targets = _case(jnp.float32)
  g = np.asarray(jax.grad(ts.cross_entropy)(logits, targets))
  p = np.asarray(jax.nn.softmax(logits, axis=-1))
  one_hot = np.eye(logits.shape[-1])[np.asarray(targets)]
  np.testing.assert_allclose(g, (p - one_hot) / targets.size, atol=1e-7)


def test_cross_entropy_and_its_gradient_lower_without_a_gather():
  logits, targets = _case(jnp.bfloat16)
  text = jax.jit(jax.value_and_grad(ts.cross_entropy)).lower(logits, targets).as_text()
  assert "gather" not in text and "scatter" not in text
