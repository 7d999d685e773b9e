"""The residual branches alone against NumPy: causal attention, RoPE, the MLP's activations.

The assembled model (placements, scan, remat, features) is tests/test_model.py.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from resnorm_jax.model import attention as attention_lib
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.model.mlp import MLP


def test_attention_matches_numpy():
  cfg = tiny_config()
  with nnx.use_eager_sharding(False):
    attn = attention_lib.Attention(cfg, InitRule("xavier", 2, 8), nnx.Rngs(params=0))
  x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
  wq, wk, wv, wo = (
    np.asarray(d.kernel[...], np.float64) for d in (attn.q, attn.k, attn.v, attn.out)
  )
  heads = lambda y: y.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)  # B H T K
  q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
  scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(4) + np.triu(np.full((5, 5), -np.inf), 1)
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  expected = (probs @ v).transpose(0, 2, 1, 3).reshape(2, 5, 8) @ wo
  np.testing.assert_allclose(np.asarray(attn(jnp.asarray(x))), expected, rtol=1e-5, atol=1e-6)


def test_rope_rotates_pairs_and_depends_on_relative_position():
  t, k = 6, 8
  sin, cos = attention_lib.rope_tables(t, k)
  x = np.random.default_rng(0).normal(size=(1, t, 1, k)).astype(np.float32)
  angle = np.arange(t)[:, None] * 10000.0 ** (-np.arange(0, k, 2) / k)  # [T, K/2]
  x1, x2 = x[0, :, 0, : k // 2], x[0, :, 0, k // 2 :]
  expected = np.concatenate(
    [x1 * np.cos(angle) - x2 * np.sin(angle), x2 * np.cos(angle) + x1 * np.sin(angle)], -1
  )
  got = np.asarray(attention_lib.apply_rope(jnp.asarray(x), sin, cos))[0, :, 0]
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  # The same q and k at positions (m, n) and (m + s, n + s): the same score.
  q = np.tile(x[:, :1], (1, t, 1, 1))
  kk = np.tile(x[:, 1:2], (1, t, 1, 1))
  rq = np.asarray(attention_lib.apply_rope(jnp.asarray(q), sin, cos))[0, :, 0]
  rk = np.asarray(attention_lib.apply_rope(jnp.asarray(kk), sin, cos))[0, :, 0]
  scores = rq @ rk.T
  np.testing.assert_allclose(scores[3, 1], scores[5, 3], rtol=1e-4)
  np.testing.assert_allclose(scores[2, 2], scores[0, 0], rtol=1e-4)
  assert abs(scores[3, 1] - scores[3, 2]) > 1e-3


def test_rope_makes_attention_order_aware():
  # Causal attention alone is blind to the order of the earlier keys: at the last position,
  # permuting positions 0..2 changes nothing. With RoPE the scores depend on the distance.
  with nnx.use_eager_sharding(False):
    attn = attention_lib.Attention(tiny_config(), InitRule("xavier", 2, 8), nnx.Rngs(params=0))
  x = np.random.default_rng(0).normal(size=(1, 4, 8)).astype(np.float32)
  xp = jnp.asarray(x[:, [2, 0, 1, 3]])
  x = jnp.asarray(x)
  np.testing.assert_allclose(attn(x)[0, 3], attn(xp)[0, 3], rtol=1e-5, atol=1e-6)
  rope = attention_lib.rope_tables(4, 4)
  assert np.abs(np.asarray(attn(x, rope)[0, 3] - attn(xp, rope)[0, 3])).max() > 1e-3


@pytest.mark.parametrize("activation", ["gelu", "relu", "swiglu"])
def test_mlp_matches_numpy(activation):
  cfg = tiny_config(ffn_activation=activation)
  with nnx.use_eager_sharding(False):
    mlp = MLP(cfg, InitRule("xavier", 2, 8), nnx.Rngs(params=0))
  x = np.random.default_rng(0).normal(size=(2, 3, 8))
  h = x @ np.asarray(mlp.ffn_in.kernel[...], np.float64)
  if activation == "gelu":  # the tanh approximation (jax.nn.gelu's default)
    h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
  elif activation == "relu":
    h = np.maximum(h, 0)
  else:
    g = x @ np.asarray(mlp.ffn_gate.kernel[...], np.float64)
    h = g / (1 + np.exp(-g)) * h
  assert (mlp.ffn_gate is not None) == (activation == "swiglu")
  expected = h @ np.asarray(mlp.ffn_out.kernel[...], np.float64)
  got = np.asarray(mlp(jnp.asarray(x, jnp.float32)))
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
