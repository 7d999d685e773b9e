"""The 2025-26 variants against NumPy: manifold-constrained hyper-connections (mHC), HybridNorm,
value residual learning, DenseFormer's depth-weighted averaging and Derf; the property each
paper states at init (mHC's H_res doubly stochastic and the model Pre-LN; DenseFormer the
plain model; value residuals at lambda_2 = 0 the plain model) and a traced stack that does
not grow with depth.

Attention is written out in NumPy where the variant changes it (HybridNorm's q, k, v norms,
the value mixing); the FFN and unchanged attention are called as black boxes.
"""

import functools
import math

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import TINY, tiny_config, tiny_model
from resnorm_jax.model import variants
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.model.variants import make_norm, mhc
from resnorm_jax.model.variants.derf import Derf

SHAPE = dict(TINY, num_layers=3)
TOKENS = jnp.array([[3, 7, 1, 6], [0, 5, 5, 2]], jnp.int32)
X = np.random.default_rng(0).normal(0.5, 2.0, (2, 4, 8)).astype(np.float32)
_cfg = functools.partial(tiny_config, SHAPE)


@functools.cache
def _built(items: tuple) -> Transformer:
  return tiny_model(SHAPE, **dict(items))


def _build(**model) -> Transformer:
  """A fresh copy of the model (built once per setting: the tests change its weights)."""
  return nnx.clone(_built(tuple(sorted(model.items()))))


def _layer(model: Transformer, i: int):
  graphdef, state = nnx.split(model.layers)
  return nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))


def _np(a) -> np.ndarray:
  return np.asarray(a, np.float64)


def _ln(x, module=None, eps=1e-5):
  x = _np(x)
  y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
  return y if module is None else y * _np(module.scale[...]) + _np(module.bias[...])


def _sigmoid(x):
  return 1 / (1 + np.exp(-x))


def _randomize(module, rng, skip=()) -> None:
  """Every parameter of `module` away from its init (norm gains near 1), except `skip`."""
  for path, v in nnx.iter_graph(module):
    if isinstance(v, nnx.Param) and not any(s in path for s in skip):
      v[...] = jnp.asarray(rng.normal(1.0 if v.ndim == 1 else 0.0, 0.3, v.shape), jnp.float32)


def _attention(attn, h, *, qkv_norm=False, values=None, heads=2):
  """Causal MHA in NumPy (learned positions: no RoPE); q, k, v normalized per head with the
  module's norms when qkv_norm; `values(v)` maps the [B, T, H, K] values. Returns (out, v)."""
  w = {n: _np(getattr(attn, n).kernel[...]) for n in ("q", "k", "v", "out")}
  b, t, d = h.shape
  q, k, v = ((_np(h) @ w[n]).reshape(b, t, heads, d // heads) for n in ("q", "k", "v"))
  if qkv_norm:
    q, k, v = _ln(q, attn.q_norm), _ln(k, attn.k_norm), _ln(v, attn.v_norm)
  raw_v = v
  if values is not None:
    v = values(v)
  s = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(d // heads)
  s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  return np.einsum("bhts,bshk->bthk", p, v).reshape(b, t, d) @ w["out"], raw_v


def _ffn(layer):
  return lambda h: _np(layer.mlp(jnp.asarray(h, jnp.float32)))


# mHC


def _np_sinkhorn(logits, iters):
  """Sinkhorn-Knopp as the paper writes it, exp then row and column divisions, in float64 (an
  independent form of the log-domain float32 one)."""
  m = np.exp(np.asarray(logits, np.float64))
  for _ in range(iters):
    m = m / m.sum(-1, keepdims=True)
    m = m / m.sum(-2, keepdims=True)
  return m


@pytest.mark.parametrize("below", [60.0, 85.0])
def test_sinkhorn_keeps_a_row_far_below_the_others_exact_and_its_gradient_finite(below):
  """A row whose logits sit `below` nats under the rest: in float32, exp then divide makes it
  a sum of denormals (a NaN gradient from 60 down, a wrong forward from 85); the log domain
  keeps both, against the float64 reference."""
  rng = np.random.default_rng(0)
  logits = rng.normal(0.0, 1.0, (4, 4)).astype(np.float32)
  logits[2] -= below
  weights = jnp.asarray(rng.normal(0.0, 1.0, (4, 4)), jnp.float32)
  got = np.asarray(mhc.sinkhorn(jnp.asarray(logits), 20))
  np.testing.assert_allclose(got, _np_sinkhorn(logits, 20), rtol=1e-4, atol=1e-6)
  grad = jax.grad(lambda x: jnp.sum(mhc.sinkhorn(x, 20) * weights))(jnp.asarray(logits))
  assert np.isfinite(np.asarray(grad)).all()

  # The float32 exp-then-divide form on the same logits: its gradient is not finite.
  def divided(x):
    m = jnp.exp(x - x.max())
    for _ in range(20):
      m = m / m.sum(-1, keepdims=True)
      m = m / m.sum(-2, keepdims=True)
    return jnp.sum(m * weights)

  assert not np.isfinite(np.asarray(jax.grad(divided)(jnp.asarray(logits)))).all()


def test_sinkhorn_projection_is_doubly_stochastic():
  rng = np.random.default_rng(1)
  logits = rng.normal(0.0, 1.0, (64, 4, 4)).astype(np.float32)
  got = np.asarray(mhc.sinkhorn(jnp.asarray(logits), 20), np.float64)
  assert np.all(got > 0)
  np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)  # rows
  np.testing.assert_allclose(got.sum(-2), 1.0, atol=1e-5)  # columns
  np.testing.assert_allclose(got, _np_sinkhorn(logits, 20), rtol=1e-5, atol=1e-6)
  # Not a doubly stochastic matrix to begin with: the projection is doing the work.
  assert np.abs(np.exp(logits).sum(-1) - 1).max() > 0.5
  # 20 iterations are a finite projection: logits of std 2 leave rows 2e-2 off (measured;
  # the columns, normalized last, stay exact); 400 iterations close the gap.
  wide = jnp.asarray(2 * logits)
  rows = lambda iters: np.abs(np.asarray(mhc.sinkhorn(wide, iters)).sum(-1) - 1).max()
  assert rows(20) > 1e-3 and rows(400) < 1e-5
  np.testing.assert_allclose(np.asarray(mhc.sinkhorn(wide, 20)).sum(-2), 1.0, atol=1e-5)


@pytest.mark.parametrize("dynamic", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mhc_coefficients_at_init_and_h_res_doubly_stochastic_per_token(dynamic):
  n = 3
  model = _build(norm_position="pre", residual="mhc", mhc_rate=n, mhc_dynamic=dynamic)
  for i in range(3):
    for s, slot in enumerate(("attn", "ffn")):
      k = 2 * i + s
      bias = np.asarray(model.layers.residuals[slot].bias[...][i])
      np.testing.assert_array_equal(bias[:n], np.eye(n)[k % n], err_msg=f"b_pre of {k}")
      np.testing.assert_array_equal(bias[n : 2 * n], 0.0)
      np.testing.assert_array_equal(bias[2 * n :].reshape(n, n), np.eye(n))
  layer = _layer(model, 1)
  hc = layer.residuals["attn"]
  rng = np.random.default_rng(2)
  _randomize(hc, rng)
  hc.bias[...] = jnp.asarray(rng.normal(0.0, 1.0, hc.bias.shape), jnp.float32)
  if dynamic:  # gates 0.01 at init; 0.2 puts the per-token part at about the biases' spread
    hc.gates[...] = jnp.full((3,), 0.2, jnp.float32)
  H = np.random.default_rng(3).normal(size=(2, 4, n, 8)).astype(np.float32)
  with jax.disable_jit():
    h_pre, h_post, h_res = (np.asarray(c, np.float64) for c in hc.coefficients(jnp.asarray(H)))
  assert h_res.shape == ((2, 4, n, n) if dynamic else (n, n))
  np.testing.assert_allclose(h_res.sum(-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(h_res.sum(-2), 1.0, atol=1e-5)
  assert np.all((h_pre > 0) & (h_pre < 1)) and np.all((h_post > 0) & (h_post < 2))
  if dynamic:  # per token: the coefficients differ between tokens
    assert np.abs(h_res[0, 0] - h_res[1, 3]).max() > 1e-3


@pytest.mark.parametrize("dynamic", [False, True])
def test_mhc_sublayer_matches_numpy(dynamic):
  n = 3
  model = _build(norm_position="pre", residual="mhc", mhc_rate=n, mhc_dynamic=dynamic)
  layer = _layer(model, 1)
  rng = np.random.default_rng(4)
  hc = layer.residuals["attn"]
  _randomize(hc, rng)
  _randomize(layer.norms, rng)
  H = rng.normal(size=(2, 4, n, 8)).astype(np.float32)
  with jax.disable_jit():
    got = _np(layer._sublayer("attn", jnp.asarray(H), lambda h, st: layer.attn(h), {}, None))
    bias = _np(hc.bias[...])
    if dynamic:  # x~ = RMSNorm(vec(x)); H~ = gate * (x~ phi) + b, one gate per group
      flat = _np(H).reshape(2, 4, n * 8)
      xn = flat / np.sqrt(np.mean(flat**2, -1, keepdims=True) + 1e-5) * _np(hc.norm.scale[...])
      g = _np(hc.gates[...])
      gate = np.concatenate([np.full(n, g[0]), np.full(n, g[1]), np.full(n * n, g[2])])
      logits = gate * (xn @ _np(hc.phi[...])) + bias
    else:
      logits = np.broadcast_to(bias, (2, 4, bias.size))
    h_pre = _sigmoid(logits[..., :n])
    h_post = 2 * _sigmoid(logits[..., n : 2 * n])
    h_res = _np_sinkhorn(logits[..., 2 * n :].reshape(2, 4, n, n), 20)
    branch_in = np.einsum("btn,btnd->btd", h_pre, H)
    f = _np(layer.attn(jnp.asarray(_ln(branch_in, layer.norms["attn"]), jnp.float32)))
    expected = np.einsum("btnm,btmd->btnd", h_res, H) + h_post[..., None] * f[:, :, None, :]
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dynamic", [pytest.param(False, marks=pytest.mark.slow), True])
def test_mhc_is_prenorm_at_init(dynamic):
  n = 3
  model = _build(norm_position="pre", residual="mhc", mhc_rate=n, mhc_dynamic=dynamic)
  pre = _build(norm_position="pre")
  with jax.disable_jit():
    x0 = np.asarray(pre.embed_tokens(TOKENS))
    h, _ = model.run_stack(jnp.broadcast_to(x0[:, :, None], (2, 4, n, 8)), None)
    p, _ = pre.run_stack(jnp.asarray(x0), None)
    logits_m, logits_p = np.asarray(model(TOKENS)[0]), np.asarray(pre(TOKENS)[0])
  for c in range(n):  # every copy is the Pre-LN stream (the norm removes H_pre's sum, 2.0)
    np.testing.assert_allclose(np.asarray(h[:, :, c]), np.asarray(p), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(logits_m, logits_p, rtol=1e-4, atol=1e-4)
  model.layers.residuals["ffn"].bias[...] = model.layers.residuals["ffn"].bias[...].at[:, n].set(1)
  with jax.disable_jit():
    assert np.abs(np.asarray(model(TOKENS)[0]) - logits_p).max() > 1e-3


def test_mhc_product_of_residual_matrices_stays_doubly_stochastic_at_depth():
  # The paper's motivation: HC's composite A_r over many layers has an unbounded gain; the
  # product of doubly stochastic matrices is doubly stochastic (max row sum 1).
  rng = np.random.default_rng(5)
  mats = np.asarray(mhc.sinkhorn(jnp.asarray(rng.normal(0, 1, (200, 4, 4)), jnp.float32), 20))
  prod = functools.reduce(lambda a, b: b @ a, _np(mats))
  np.testing.assert_allclose(prod.sum(-1), 1.0, atol=1e-4)
  np.testing.assert_allclose(prod.sum(-2), 1.0, atol=1e-4)
  unconstrained = functools.reduce(lambda a, b: b @ a, np.exp(rng.normal(0, 1, (200, 4, 4)) / 4))
  assert np.abs(unconstrained).sum(-1).max() > 1e3  # what the constraint prevents


@pytest.mark.parametrize("placement", ["post", "hybridnorm"])
def test_mhc_refuses_a_placement_that_normalizes_the_stream(placement):
  with pytest.raises(ValueError, match=rf"model\.residual=mhc .*'{placement}'"):
    _cfg(norm_position=placement, residual="mhc")


# HybridNorm


def _np_hybrid(layer, x, first_pre: bool):
  ffn, norms = _ffn(layer), layer.norms
  if first_pre:  # HybridNorm*'s first layer: Pre-Norm, with the QKV norms
    y = x + _attention(layer.attn, _ln(x, norms["attn"]), qkv_norm=True)[0]
    return y + ffn(_ln(y, norms["ffn"]))
  y = x + _attention(layer.attn, x, qkv_norm=True)[0]
  n = _ln(y, norms["ffn"])
  return n + ffn(n)


@pytest.mark.parametrize("first_pre", [False, True])
def test_hybridnorm_layers_match_numpy(first_pre):
  model = _build(norm_position="hybridnorm", hybridnorm_first_pre=first_pre)
  assert model.cfg.final_norm  # the reference's ln_f
  rng = np.random.default_rng(6)
  for i in range(2):
    layer = _layer(model, i)
    assert set(layer.norms) == ({"attn", "ffn"} if first_pre else {"ffn"})
    _randomize(layer.norms, rng)
    _randomize(layer.attn, rng, skip=("kernel",))  # the q, k, v norms' gains and biases
    with jax.disable_jit():
      got = _np(layer(jnp.asarray(X), None, jnp.int32(i))[0])
    expected = _np_hybrid(layer, X, first_pre and i == 0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=f"layer {i}")
    if first_pre:  # layer 0's form and the others' differ: the check above can fail
      assert np.abs(expected - _np_hybrid(layer, X, i != 0)).max() > 1e-2


def test_hybridnorm_refuses_parallel_blocks_and_a_second_qk_norm():
  with pytest.raises(ValueError, match=r"model\.block='parallel'.*valid: sequential"):
    _cfg(norm_position="hybridnorm", block="parallel")
  with pytest.raises(ValueError, match=r"model\.qk_norm=True"):
    _cfg(norm_position="hybridnorm", qk_norm=True)


# Value residual learning


def test_value_residual_stack_matches_numpy():
  model = _build(norm_position="pre", residual="valueres")
  rng = np.random.default_rng(7)
  layers = [_layer(model, i) for i in range(3)]
  for layer in layers:
    _randomize(layer.norms, rng)
    layer.attn.value_mix.lambdas[...] = jnp.asarray(rng.uniform(0.2, 0.8, 2), jnp.float32)
  nnx.update(model.layers, jax.tree.map(lambda *a: jnp.stack(a), *map(nnx.state, layers)))
  x, v1 = _np(X), None
  for layer in layers:  # V'_n = lambda_1 V_n + lambda_2 V_1; the first layer: V_1
    lam = _np(layer.attn.value_mix.lambdas[...])
    mix = (lambda v: v) if v1 is None else (lambda v, lam=lam, v1=v1: lam[0] * v + lam[1] * v1)
    a, v = _attention(layer.attn, _ln(x, layer.norms["attn"]), values=mix)
    v1 = v if v1 is None else v1
    x = x + a
    x = x + _ffn(layer)(_ln(x, layer.norms["ffn"]))
  with jax.disable_jit():
    stream = variants.residual("valueres").stream_in(jnp.asarray(X), model.cfg)
    (got, values), _ = model.run_stack(stream, None)
  np.testing.assert_allclose(_np(got), x, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(_np(values), v1, rtol=1e-4, atol=1e-4)  # the first layer's V


def test_value_residual_with_lambda_2_zero_is_the_plain_model():
  plain = _build(norm_position="pre")
  zero = _build(norm_position="pre", residual="valueres", valueres_lambda_init=0.0)
  half = _build(norm_position="pre", residual="valueres")
  np.testing.assert_array_equal(np.asarray(half.layers.attn.value_mix.lambdas[...]), 0.5)
  with jax.disable_jit():
    p, z, h = (np.asarray(m(TOKENS)[0]) for m in (plain, zero, half))
  np.testing.assert_allclose(z, p, rtol=1e-6, atol=1e-6)
  assert np.abs(h - p).max() > 1e-3


def test_value_residual_lambda_init_is_checked():
  with pytest.raises(ValueError, match=r"model\.valueres_lambda_init=1\.5 not in \[0, 1\]"):
    _cfg(valueres_lambda_init=1.5)


# DenseFormer


def test_denseformer_weights_start_as_the_identity_and_the_model_as_the_plain_one():
  model = _build(norm_position="pre", residual="denseformer")
  plain = _build(norm_position="pre")
  alpha = np.asarray(model.layers.residuals["layer"].alpha[...])  # [L, L+1]
  np.testing.assert_array_equal(alpha, np.eye(3, 4, k=1))  # alpha_(i,i) = 1, others 0
  with jax.disable_jit():
    got, want = np.asarray(model(TOKENS)[0]), np.asarray(plain(TOKENS)[0])
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_denseformer_stack_matches_numpy():
  model = _build(norm_position="pre", residual="denseformer")
  rng = np.random.default_rng(8)
  model.layers.residuals["layer"].alpha[...] = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
  outputs, y = [_np(X)], _np(X)
  for i in range(3):  # X_i = B_i(Y_(i-1)), Y_i = sum_(j<=i) alpha_(i,j) X_j
    layer = _layer(model, i)
    with jax.disable_jit():
      outputs.append(_np(layer(jnp.asarray(y, jnp.float32), None, jnp.int32(i))[0]))
    alpha = _np(layer.residuals["layer"].alpha[...])
    y = sum(alpha[j] * outputs[j] for j in range(i + 2))
  with jax.disable_jit():
    stream = variants.residual("denseformer").stream_in(jnp.asarray(X), model.cfg)
    (got, past), _ = model.run_stack(stream, None)
    (looped, _), _ = model.run_loop(stream, None)
  np.testing.assert_allclose(_np(got), y, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(_np(past), np.stack(outputs), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(_np(looped), _np(got), rtol=1e-6, atol=1e-6)


# Derf


def test_derf_matches_numpy_erf():
  assert "derf" in variants.names("norm")
  with nnx.use_eager_sharding(False):
    norm = make_norm("derf", 8)
  assert isinstance(norm, Derf)
  np.testing.assert_array_equal(np.asarray(norm.alpha[...]), 0.5)  # the official defaults
  np.testing.assert_array_equal(np.asarray(norm.shift[...]), 0.0)
  erf = np.vectorize(math.erf)
  np.testing.assert_allclose(_np(norm(jnp.asarray(X))), erf(0.5 * _np(X)), rtol=1e-5, atol=1e-6)
  rng = np.random.default_rng(9)
  norm.alpha[...], norm.shift[...] = jnp.float32(0.8), jnp.float32(-0.3)
  gamma, beta = rng.normal(1, 0.3, 8), rng.normal(0, 0.3, 8)
  norm.scale[...], norm.bias[...] = jnp.asarray(gamma, jnp.float32), jnp.asarray(beta, jnp.float32)
  expected = gamma * erf(0.8 * _np(X) - 0.3) + beta
  np.testing.assert_allclose(_np(norm(jnp.asarray(X))), expected, rtol=1e-5, atol=1e-5)


def test_derf_prenorm_block_matches_numpy():
  model = _build(norm="derf", norm_position="pre")
  layer = _layer(model, 1)
  erf = np.vectorize(math.erf)
  for slot, (a, s) in {"attn": (0.7, 0.1), "ffn": (0.4, -0.2)}.items():
    layer.norms[slot].alpha[...], layer.norms[slot].shift[...] = jnp.float32(a), jnp.float32(s)
  derf = lambda slot, h: erf(
    _np(layer.norms[slot].alpha[...]) * h + _np(layer.norms[slot].shift[...])
  )
  with jax.disable_jit():
    got = _np(layer(jnp.asarray(X), None, jnp.int32(1))[0])
    x = _np(X) + _attention(layer.attn, derf("attn", _np(X)))[0]
    x = x + _ffn(layer)(derf("ffn", x))
  np.testing.assert_allclose(got, x, rtol=1e-4, atol=1e-4)
  assert model.cfg.final_norm and isinstance(model.final_norm, Derf)


# Depth: one scanned stack, the same traced program at 6 and 1000 layers

NEW = {
  "mhc": dict(norm_position="pre", residual="mhc"),
  "hybridnorm_star": dict(norm_position="hybridnorm", hybridnorm_first_pre=True),
  "valueres": dict(norm_position="pre", residual="valueres"),
  "denseformer": dict(norm_position="pre", residual="denseformer"),
}


def _eqns(jaxpr) -> int:
  count = 0
  for eqn in jaxpr.eqns:
    count += 1
    for value in eqn.params.values():
      for sub in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(sub, jax.extend.core.ClosedJaxpr):
          count += _eqns(sub.jaxpr)
        elif isinstance(sub, jax.extend.core.Jaxpr):
          count += _eqns(sub)
  return count


def _forward_eqns(n: int, **model) -> int:
  cfg = _cfg(num_layers=n, **model)
  abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  graphdef, state = nnx.split(abstract)
  return _eqns(jax.make_jaxpr(lambda st: nnx.merge(graphdef, st)(TOKENS)[0])(state).jaxpr)


@pytest.mark.parametrize("name", sorted(NEW))
def test_traced_forward_is_the_same_size_at_6_and_1000_layers(name):
  assert _forward_eqns(6, **NEW[name]) == _forward_eqns(1000, **NEW[name])
