"""Performance rewrites keep the values: hand-written backward passes (LayerNorm, RMSNorm, GELU,
softmax) against autodiff of the plain formulas, 2-D matmuls against `x @ w`, an unrolled layer
stack against the scanned one.

They exist for speed and memory (fewer saved tensors per layer, no strided transposes, no
loop); the forward values must be the same and the gradients equal within float32 rounding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import base
from resnorm_jax.model import attention, layers, mlp, norms
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from


def _plain_layer_norm(x, scale, bias, eps):
  mean = x.mean(-1, keepdims=True)
  var = jnp.square(x - mean).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def _plain_rms_norm(x, scale, eps):
  return x * jax.lax.rsqrt(jnp.square(x).mean(-1, keepdims=True) + eps) * scale


def _inputs(shape, seed=0):
  k1, k2, k3, k4 = jax.random.split(jax.random.key(seed), 4)
  x = 3.0 * jax.random.normal(k1, shape) + 0.5
  d = shape[-1]
  scale = 1.0 + 0.3 * jax.random.normal(k2, (d,))
  bias = 0.2 * jax.random.normal(k3, (d,))
  cot = jax.random.normal(k4, shape)
  return x, scale, bias, cot


def _vjp(fn, args, cot):
  out, pullback = jax.vjp(fn, *args)
  return out, pullback(cot)


@pytest.mark.parametrize("shape", [(2, 5, 16), pytest.param((3, 4, 2, 8), marks=pytest.mark.slow)])
def test_layer_norm_value_and_gradients_match_autodiff(shape):
  x, scale, bias, cot = _inputs(shape)
  out, grads = _vjp(lambda x, s, b: norms.layer_norm(x, s, b, 1e-5), (x, scale, bias), cot)
  ref, ref_grads = _vjp(lambda x, s, b: _plain_layer_norm(x, s, b, 1e-5), (x, scale, bias), cot)
  np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
  for g, r in zip(grads, ref_grads, strict=True):
    assert g.shape == r.shape
    np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 5, 16), (3, 4, 2, 8)])
@pytest.mark.parametrize("eps", [1e-6, 1.0])  # 1.0: eps too large to drop from the gradient
def test_rms_norm_value_and_gradients_match_autodiff(shape, eps):
  x, scale, _, cot = _inputs(shape)
  out, grads = _vjp(lambda x, s: norms.rms_norm(x, s, eps), (x, scale), cot)
  ref, ref_grads = _vjp(lambda x, s: _plain_rms_norm(x, s, eps), (x, scale), cot)
  np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
  for g, r in zip(grads, ref_grads, strict=True):
    assert g.shape == r.shape
    np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_gelu_value_and_gradient_match_autodiff(dtype):
  x = jnp.linspace(-6.0, 6.0, 401).astype(dtype)
  cot = jnp.cos(jnp.arange(401.0)).astype(dtype)
  out, (g,) = _vjp(mlp.gelu, (x,), cot)
  ref, (r,) = _vjp(jax.nn.gelu, (x,), cot)
  np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(ref, np.float32))
  assert g.dtype == dtype
  tol = 1e-5 if dtype == jnp.float32 else 2e-2
  np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(r, np.float32), atol=tol)


def test_softmax_value_and_gradient_match_autodiff_with_masked_entries():
  x, _, _, cot = _inputs((2, 3, 6, 6), seed=2)
  causal = jnp.tril(jnp.ones((6, 6), bool))
  x = jnp.where(causal, x, jnp.finfo(jnp.float32).min)
  out, (g,) = _vjp(attention.softmax, (x,), cot)
  ref, (r,) = _vjp(lambda x: jax.nn.softmax(x, axis=-1), (x,), cot)
  np.testing.assert_array_equal(out, ref)
  np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(g)[..., ~np.asarray(causal)] == 0)  # masked scores get no gradient


def test_matmul_2d_equals_batched_matmul_and_its_gradients():
  x, _, _, _ = _inputs((2, 3, 8), seed=3)
  w = jax.random.normal(jax.random.key(4), (8, 5))
  np.testing.assert_allclose(layers.matmul(x, w), x @ w, rtol=1e-6, atol=1e-6)
  g = jax.grad(lambda x, w: jnp.sum(jnp.sin(layers.matmul(x, w))), argnums=(0, 1))(x, w)
  r = jax.grad(lambda x, w: jnp.sum(jnp.sin(x @ w)), argnums=(0, 1))(x, w)
  for a, b in zip(g, r, strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # compiles each unroll
@pytest.mark.parametrize(
  "unroll", [2, pytest.param(3, marks=pytest.mark.long)]
)  # 2: a loop of 2 layers + 1 left over; 3: no loop
def test_unrolled_stack_equals_scanned_stack(unroll):
  c = base.get_config()
  c.model.update(vocab_size=8, num_layers=3, d_model=8, num_heads=2, d_ff=8, max_seq_len=8)
  c.model.norm_position = "pre"
  tokens = jnp.array([[3, 7, 1, 6], [0, 5, 5, 2]], jnp.int32)
  out = {}
  for u in (1, unroll):
    c.model.scan_unroll = u
    md = mdl.make_model_def(model_config_from(c))
    params, model_state = mdl.init_model(md.cfg, 0)

    def loss(params, md=md, model_state=model_state):
      logits, stats, _ = md.apply(params, model_state, tokens, train=True)
      return jnp.mean(logits**2), stats

    (value, stats), grads = jax.value_and_grad(loss, has_aux=True)(params)
    out[u] = (value, stats, grads)
    hlo = jax.jit(loss).lower(params).as_text()
    assert ("while" in hlo) == (u < 3)  # fully unrolled: straight-line code
  for a, b in zip(jax.tree.leaves(out[1]), jax.tree.leaves(out[unroll]), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_scan_unroll_must_be_positive():
  c = base.get_config()
  c.model.scan_unroll = 0
  with pytest.raises(ValueError, match="model.scan_unroll"):
    model_config_from(c)
