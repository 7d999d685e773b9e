"""Tests for resnorm_jax.model.norms against independent NumPy computations and their
invariances."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx

from configs import base
from resnorm_jax.model import norms, variants
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.model.transformer import Transformer

BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def _no_mesh_needed():
  """Norms annotate their params with logical axes; outside a model, build them mesh-free."""
  with nnx.use_eager_sharding(False):
    yield


def _x(shape=(2, 3, 16), seed=0, loc=0.0, scale=1.0) -> np.ndarray:
  return np.random.default_rng(seed).normal(loc, scale, shape).astype(np.float32)


def _np_layernorm(x, gamma, beta, eps):
  x = x.astype(np.float64)
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _np_rmsnorm(x, gamma, eps):
  x = x.astype(np.float64)
  return x / np.sqrt((x**2).mean(-1, keepdims=True) + eps) * gamma


def _set_affine(norm, dim, seed=1):
  """Non-trivial gamma (and beta) so the affine part is checked too."""
  rng = np.random.default_rng(seed)
  gamma = rng.uniform(0.5, 1.5, dim).astype(np.float32)
  beta = rng.normal(0, 0.5, dim).astype(np.float32)
  norm.scale[...] = jnp.asarray(gamma)
  if hasattr(norm, "bias"):
    norm.bias[...] = jnp.asarray(beta)
  return gamma, beta


# LayerNorm


def test_layernorm_worked_examples():
  ln = variants.make_norm("layernorm", 4, eps=1e-5)
  y = np.asarray(ln(jnp.array([[[2.0, 4.0, 6.0, 8.0], [8.0, 2.0, 2.0, 4.0]]])))
  np.testing.assert_allclose(y[0, 0], [-1.342, -0.447, 0.447, 1.342], atol=1e-3)
  np.testing.assert_allclose(y[0, 1], [1.633, -0.816, -0.816, 0.0], atol=1e-3)


def test_layernorm_matches_numpy():
  x = _x(loc=3.0, scale=2.0)
  ln = norms.LayerNorm(16, eps=1e-3)
  gamma, beta = _set_affine(ln, 16)
  np.testing.assert_allclose(
    np.asarray(ln(jnp.asarray(x))), _np_layernorm(x, gamma, beta, 1e-3), rtol=1e-5, atol=1e-5
  )


def test_layernorm_has_2h_params_gamma_1_beta_0():
  ln = variants.make_norm("layernorm", 12)
  np.testing.assert_array_equal(np.asarray(ln.scale[...]), np.ones(12))
  np.testing.assert_array_equal(np.asarray(ln.bias[...]), np.zeros(12))
  assert sum(p.size for p in _leaves(ln)) == 2 * 12


@pytest.mark.parametrize("shift", [-7.0, 0.5, 100.0])
def test_layernorm_invariant_to_shift(shift):
  ln = norms.LayerNorm(16, eps=1e-6)
  x = _x()
  np.testing.assert_allclose(
    np.asarray(ln(jnp.asarray(x + shift))), np.asarray(ln(jnp.asarray(x))), atol=1e-4
  )


@pytest.mark.parametrize("a", [0.25, 3.0, 50.0])
def test_layernorm_invariant_to_positive_scale(a):
  ln = norms.LayerNorm(16, eps=1e-8)
  x = _x()
  np.testing.assert_allclose(
    np.asarray(ln(jnp.asarray(a * x))), np.asarray(ln(jnp.asarray(x))), atol=1e-4
  )


# RMSNorm


def test_rmsnorm_matches_numpy():
  x = _x(loc=1.0, scale=2.0)
  rn = norms.RMSNorm(16, eps=1e-3)
  gamma, _ = _set_affine(rn, 16)
  np.testing.assert_allclose(
    np.asarray(rn(jnp.asarray(x))), _np_rmsnorm(x, gamma, 1e-3), rtol=1e-5, atol=1e-5
  )


def test_rmsnorm_has_h_params_and_no_bias():
  rn = variants.make_norm("rmsnorm", 12)
  assert not hasattr(rn, "bias")
  assert sum(p.size for p in _leaves(rn)) == 12


def test_rmsnorm_eps_inside_the_square_root():
  # Small activations so eps matters: inside and outside the root differ by ~30% here.
  eps = 1e-2
  x = _x(scale=0.05)
  y = np.asarray(norms.RMSNorm(16, eps=eps)(jnp.asarray(x)))
  inside = _np_rmsnorm(x, 1.0, eps)
  outside = x / (np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True)) + eps)
  np.testing.assert_allclose(y, inside, rtol=1e-5, atol=1e-6)
  assert np.abs(y - outside).max() > 0.1 * np.abs(outside).max()


@pytest.mark.parametrize("a", [0.1, 4.0])
def test_rmsnorm_invariant_to_scale(a):
  rn = norms.RMSNorm(16, eps=1e-8)
  x = _x()
  np.testing.assert_allclose(
    np.asarray(rn(jnp.asarray(a * x))), np.asarray(rn(jnp.asarray(x))), atol=1e-4
  )


def test_rmsnorm_not_invariant_to_shift():
  rn = norms.RMSNorm(16, eps=1e-6)
  x = _x()
  diff = np.abs(np.asarray(rn(jnp.asarray(x + 2.0))) - np.asarray(rn(jnp.asarray(x))))
  assert diff.max() > 0.3


def test_rmsnorm_bfloat16_input_computed_in_float32():
  # Wide rows: a bfloat16 computation of mean(x^2) and the rsqrt rounds several times and
  # misses the correctly rounded float32 result on many elements; float32 then one final
  # rounding to bfloat16 matches it everywhere but on rare ties.
  x = _x(shape=(4, 8, 1024), scale=3.0).astype(BF16)
  y = norms.RMSNorm(1024, eps=1e-5)(jnp.asarray(x))
  assert y.dtype == jnp.bfloat16
  ref = _np_rmsnorm(x.astype(np.float32), 1.0, 1e-5)
  y32 = np.asarray(y).astype(np.float64)
  np.testing.assert_allclose(y32, ref, rtol=2**-8)  # half a bfloat16 ulp
  assert np.mean(y32 == ref.astype(np.float32).astype(BF16).astype(np.float64)) > 0.99


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "batchnorm", "dyt"])
def test_norm_returns_input_dtype_and_f32_value(name):
  x = _x(shape=(2, 4, 64), loc=0.5, scale=2.0)
  xb = jnp.asarray(x.astype(BF16))
  y16 = variants.make_norm(name, 64)(xb)
  y32 = variants.make_norm(name, 64)(xb.astype(jnp.float32))
  assert y16.dtype == jnp.bfloat16 and y32.dtype == jnp.float32
  # The same float32 computation, rounded once: within half a bfloat16 ulp.
  np.testing.assert_allclose(
    np.asarray(y16).astype(np.float32), np.asarray(y32), rtol=2**-8, atol=1e-6
  )


# BatchNorm


def test_batchnorm_train_mode_uses_batch_and_time_statistics():
  # Per-channel offsets and scales that differ, so per-token statistics would not match.
  x = _x(shape=(3, 5, 4)) * np.array([1.0, 2.0, 0.5, 4.0]) + np.array([0.0, 3.0, -2.0, 10.0])
  x = x.astype(np.float32)
  bn = norms.BatchNorm(4, eps=1e-5, momentum=0.9)
  gamma, beta = _set_affine(bn, 4)
  y = np.asarray(bn(jnp.asarray(x)))
  x64 = x.astype(np.float64)
  mean, var = x64.mean((0, 1)), x64.var((0, 1))
  np.testing.assert_allclose(
    y, (x64 - mean) / np.sqrt(var + 1e-5) * gamma + beta, rtol=1e-5, atol=1e-5
  )


def test_batchnorm_running_average_update_with_momentum():
  m = 0.9
  bn = norms.BatchNorm(4, eps=1e-5, momentum=m)
  np.testing.assert_array_equal(np.asarray(bn.mean[...]), np.zeros(4))
  np.testing.assert_array_equal(np.asarray(bn.var[...]), np.ones(4))
  x1 = _x(shape=(3, 5, 4), seed=1, loc=2.0, scale=3.0)
  x2 = _x(shape=(3, 5, 4), seed=2, loc=-1.0, scale=0.5)
  bn(jnp.asarray(x1))
  bn(jnp.asarray(x2))
  mean = m * (m * 0.0 + (1 - m) * x1.mean((0, 1))) + (1 - m) * x2.mean((0, 1))
  var = m * (m * 1.0 + (1 - m) * x1.var((0, 1))) + (1 - m) * x2.var((0, 1))
  np.testing.assert_allclose(np.asarray(bn.mean[...]), mean, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(bn.var[...]), var, rtol=1e-5, atol=1e-6)


def test_batchnorm_eval_mode_uses_running_averages():
  bn = norms.BatchNorm(4, eps=1e-5, momentum=0.9)
  gamma, beta = _set_affine(bn, 4)
  run_mean = np.array([1.0, -2.0, 0.5, 0.0], np.float32)
  run_var = np.array([4.0, 0.25, 1.0, 9.0], np.float32)
  bn.mean[...] = jnp.asarray(run_mean)
  bn.var[...] = jnp.asarray(run_var)
  bn.use_running_average = True
  x = _x(shape=(3, 5, 4), loc=5.0)
  y = np.asarray(bn(jnp.asarray(x)))
  np.testing.assert_allclose(
    y, (x - run_mean) / np.sqrt(run_var + 1e-5) * gamma + beta, rtol=1e-5, atol=1e-5
  )
  # Evaluation leaves the running averages alone.
  np.testing.assert_array_equal(np.asarray(bn.mean[...]), run_mean)
  np.testing.assert_array_equal(np.asarray(bn.var[...]), run_var)


# DyT and none


def test_dyt_formula_and_alpha_init():
  dyt = variants.make_norm("dyt", 16)
  assert float(dyt.alpha[...]) == 0.5
  x = _x(scale=3.0)
  np.testing.assert_allclose(np.asarray(dyt(jnp.asarray(x))), np.tanh(0.5 * x), atol=1e-6)
  gamma, beta = _set_affine(dyt, 16)
  dyt.alpha[...] = jnp.float32(1.7)
  np.testing.assert_allclose(
    np.asarray(dyt(jnp.asarray(x))), gamma * np.tanh(1.7 * x) + beta, rtol=1e-5, atol=1e-6
  )


def test_dyt_alpha_init_from_model_config():
  c = base.get_config()
  c.model.update(dict(num_layers=2, d_model=8, num_heads=2, d_ff=16, max_seq_len=8, vocab_size=16))
  c.model.update(dict(norm="dyt", norm_position="peri", dyt_alpha_init=0.7))
  model = Transformer(model_config_from(c), rngs=nnx.Rngs(params=0))
  alphas = [m.alpha[...] for _, m in nnx.iter_modules(model) if isinstance(m, norms.DyT)]
  # attn + ffn slots, input and output norms (peri), stacked over 2 layers; plus the final.
  assert sorted(a.shape for a in alphas) == [()] + [(2,)] * 4
  np.testing.assert_allclose(np.concatenate([np.ravel(a) for a in alphas]), 0.7, rtol=1e-7)


def test_none_is_identity():
  x = _x()
  ident = variants.make_norm("none", 16)
  np.testing.assert_array_equal(np.asarray(ident(jnp.asarray(x))), x)
  assert _leaves(ident) == []


def test_make_norm_passes_eps():
  # A large eps visibly shrinks LayerNorm's output: var / (var + eps).
  x = _x()
  y = np.asarray(variants.make_norm("layernorm", 16, eps=0.5)(jnp.asarray(x)))
  np.testing.assert_allclose(y, _np_layernorm(x, 1.0, 0.0, 0.5), rtol=1e-5, atol=1e-5)


def test_unknown_norm_raises_listing_valid_names():
  with pytest.raises(ValueError) as err:
    variants.make_norm("groupnorm", 16)
  msg = str(err.value)
  assert "groupnorm" in msg
  for name in ("layernorm", "rmsnorm", "batchnorm", "dyt", "none"):
    assert name in msg


def _leaves(module) -> list:
  return [np.asarray(v[...]) for _, v in nnx.iter_graph(module) if isinstance(v, nnx.Param)]


# Hand-written backward passes (LayerNorm, RMSNorm) against autodiff of the plain formulas,
# through the modules, in every activation dtype the configs use (float32, bfloat16).


def _plain_module_norm(name, x, scale, bias, eps):
  """The norm written plainly (autodiff gives its gradient), with the modules' casts."""
  xf = x.astype(jnp.float32)
  if name == "layernorm":
    mean = xf.mean(-1, keepdims=True)
    y = (xf - mean) * jax.lax.rsqrt(jnp.square(xf - mean).mean(-1, keepdims=True) + eps)
    return (y * scale + bias).astype(x.dtype)
  y = xf * jax.lax.rsqrt(jnp.square(xf).mean(-1, keepdims=True) + eps)
  return (y * scale).astype(x.dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("name", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("eps", [1e-5, 1.0])  # 1.0: eps too large to drop from the gradient
def test_hand_written_backward_matches_autodiff(name, dtype, eps):
  d = 16
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.normal(0.7, 2.0, (2, 5, d)), dtype)  # off-centre: mean-centering matters
  cot = jnp.asarray(rng.normal(0, 1, (2, 5, d)), dtype)
  norm = variants.make_norm(name, d, eps=eps)
  gamma, beta = _set_affine(norm, d)
  has_bias = name == "layernorm"

  graphdef, state = nnx.split(norm)

  def module(x, state):
    return nnx.merge(graphdef, state)(x)

  out, pull = jax.vjp(module, x, state)
  args = (x, jnp.asarray(gamma), jnp.asarray(beta))
  ref, ref_pull = jax.vjp(lambda x, s, b: _plain_module_norm(name, x, s, b, eps), *args)
  assert out.dtype == ref.dtype == dtype
  tol = 1e-5 if dtype == jnp.float32 else 2e-2
  np.testing.assert_allclose(np.float32(out), np.float32(ref), rtol=tol, atol=tol)
  gx, gstate = pull(cot)
  grads = (gx, gstate["scale"][...], gstate["bias"][...] if has_bias else None)
  ref_grads = ref_pull(cot)
  for g, r, what in zip(grads, ref_grads, ("x", "scale", "bias"), strict=True):
    if what == "bias" and not has_bias:
      continue
    assert g.dtype == r.dtype, what
    scale = float(np.abs(np.float32(r)).max())
    np.testing.assert_allclose(
      np.float32(g), np.float32(r), rtol=tol, atol=tol * scale, err_msg=what
    )
