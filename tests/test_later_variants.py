"""The post-DeepNet variants against NumPy: Sub-LN/Magneto, Admin, Mix-LN, LayerNorm scaling and
hyper-connections; their init constants, the property each paper relies on, and a stack
whose traced size does not grow with depth.

Branch internals (attention, MLP) are checked against NumPy in test_model.py; here the
branches are written out in NumPy only where the variant changes them (Sub-LN's inner norms),
and otherwise called as black boxes around a NumPy placement/residual formula.
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
from resnorm_jax.model.initializers import magneto_gamma
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.model.variants import admin
from resnorm_jax.model.variants.lnscale import lnscale_factor
from resnorm_jax.model.variants.mix import mixln_num_post

# tests/conftest.py's shapes at 4 layers (Mix-LN's split and LN scaling's 1/sqrt(l) need
# several).
SHAPE = dict(TINY, num_layers=4)
TOKENS = jnp.array([[3, 7, 1, 6], [0, 5, 5, 2]], jnp.int32)


_cfg = functools.partial(tiny_config, SHAPE)
_build = functools.partial(tiny_model, SHAPE)


def _layer(model: Transformer, i: int):
  graphdef, state = nnx.split(model.layers)
  return nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))


def _np(a) -> np.ndarray:
  return np.asarray(a, np.float64)


def _ln(x, scale=1.0, bias=0.0, eps=1e-5):
  x = _np(x)
  mu = x.mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps) * scale + bias


def _gelu(x):
  return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _embed_input(model: Transformer, tokens=TOKENS) -> np.ndarray:
  with jax.disable_jit():
    return np.asarray(model.embed_tokens(tokens))


def _randomize_norms(layer, rng) -> None:
  """Norm gains/biases away from 1/0, so a formula that drops them fails."""
  for _, v in nnx.iter_graph(layer):
    if isinstance(v, nnx.Param) and v.shape and v.shape[-1] == 8 and v.ndim == 1:
      v[...] = jnp.asarray(rng.normal(1.0, 0.3, v.shape), jnp.float32)


def _black_box(layer):
  attn = lambda h: _np(layer.attn(jnp.asarray(h, jnp.float32)))
  ffn = lambda h: _np(layer.mlp(jnp.asarray(h, jnp.float32)))
  return attn, ffn


X = np.random.default_rng(0).normal(0.5, 2.0, (2, 4, 8)).astype(np.float32)


# Sub-LN / Magneto


def _np_subln_attn(layer, h, heads=2):
  """Causal MHA with Sub-LN's norm on the concatenated heads before the output projection."""
  a = layer.attn
  w = {k: _np(getattr(a, k).kernel[...]) for k in ("q", "k", "v", "out")}
  b, t, d = h.shape
  kd = d // heads
  q, k, v = ((h @ w[n]).reshape(b, t, heads, kd) for n in ("q", "k", "v"))
  s = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(kd)
  s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  ctx = np.einsum("bhts,bshk->bthk", p, v).reshape(b, t, d)
  ctx = _ln(ctx, _np(a.sub_norm.scale[...]), _np(a.sub_norm.bias[...]))
  return ctx @ w["out"]


def _np_subln_ffn(layer, h):
  m = layer.mlp
  u = _gelu(h @ _np(m.ffn_in.kernel[...]))
  u = _ln(u, _np(m.sub_norm.scale[...]), _np(m.sub_norm.bias[...]))
  return u @ _np(m.ffn_out.kernel[...])


def test_subln_block_matches_numpy():
  model = _build(norm_position="subln", init="magneto")
  layer = _layer(model, 1)
  _randomize_norms(layer, np.random.default_rng(1))
  with jax.disable_jit():
    y = _np(layer(jnp.asarray(X))[0])
  n = lambda slot, h: _ln(h, _np(layer.norms[slot].scale[...]), _np(layer.norms[slot].bias[...]))
  x1 = X + _np_subln_attn(layer, n("attn", X))
  x2 = x1 + _np_subln_ffn(layer, n("ffn", x1))
  np.testing.assert_allclose(y, x2, rtol=1e-4, atol=1e-4)
  assert model.cfg.final_norm  # auto: on, as for Pre-LN


@pytest.mark.parametrize("n, gamma", [(6, 1.576), (24, 1.968), (96, 2.293), (1000, 2.757)])
def test_magneto_gamma_is_sqrt_ln_2n(n, gamma):
  assert round(magneto_gamma(n), 3) == gamma
  assert round(_cfg(num_layers=n, init="magneto").init_beta, 3) == gamma
  # deepnorm's beta is untouched by the new rule, and an explicit init_beta wins.
  assert _cfg(num_layers=n, init="deepnorm").init_beta == pytest.approx((8 * n) ** -0.25)
  assert _cfg(num_layers=n, init="magneto", init_beta=0.7).init_beta == 0.7


def test_magneto_gain_on_exactly_v_out_ffn_in_ffn_out():
  # 64 layers of 16x32 kernels: enough entries for the std to ~1%.
  deep = dict(SHAPE, num_layers=64, d_model=16, d_ff=32, ffn_activation="swiglu")
  mag = _build(**deep, norm_position="subln", init="magneto")
  xav = _build(**deep, norm_position="subln", init="xavier")
  gamma = math.sqrt(math.log(128))
  paths = {
    "q": ("attn", "q"),
    "k": ("attn", "k"),
    "v": ("attn", "v"),
    "attn_out": ("attn", "out"),
    "ffn_in": ("mlp", "ffn_in"),
    "ffn_gate": ("mlp", "ffn_gate"),
    "ffn_out": ("mlp", "ffn_out"),
  }

  def std(m, mod, name):
    return np.std(_np(getattr(getattr(m.layers, mod), name).kernel[...]))

  for role, where in paths.items():
    gain = gamma if role in ("v", "attn_out", "ffn_in", "ffn_out") else 1.0
    assert std(mag, *where) / std(xav, *where) == pytest.approx(gain, rel=0.03), role


# Admin


def test_admin_residual_formula():
  rng = np.random.default_rng(2)
  x, f = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 3, 8))
  with nnx.use_eager_sharding(False):
    res = admin.AdminResidual(8)
  np.testing.assert_array_equal(np.asarray(res.omega[...]), np.ones(8))
  w = rng.normal(size=8)
  res.omega[...] = jnp.asarray(w, jnp.float32)
  y = res(jnp.asarray(x, jnp.float32), jnp.asarray(f, jnp.float32))
  np.testing.assert_allclose(np.asarray(y), w * x + f, rtol=1e-5, atol=1e-5)


def test_omega_from_variances_hand_example():
  got = admin.omega_from_variances(jnp.float32(1.0), jnp.array([0.5, 2.0, 1.0]))
  np.testing.assert_allclose(np.asarray(got), [1.0, math.sqrt(1.5), math.sqrt(3.5)], rtol=1e-6)


@pytest.mark.slow  # profiles a model
@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_admin_omega_from_profiled_variances(block):
  model = _build(residual="admin", block=block)
  slots = ("block",) if block == "parallel" else ("attn", "ffn")
  built = [np.asarray(model.layers.residuals[s].omega[...]) for s in slots]
  for s in slots:  # back to stage 1: omega = 1 (plain Post-LN)
    model.layers.residuals[s].omega[...] = jnp.ones_like(model.layers.residuals[s].omega[...])
  key = jax.random.key(7)
  tokens = jax.random.randint(key, (admin.PROFILE_BATCH, 8), 0, 8)
  # Stage 1 in NumPy: run the layers one by one, each branch as a black box, Post-LN formula.
  x = _embed_input(model, tokens).astype(np.float64)
  ms = lambda a: np.mean(np.square(a))  # the variance about the expected mean, 0 at init
  v_in, v = ms(x), []
  for i in range(model.cfg.num_layers):
    layer = _layer(model, i)
    attn, ffn = _black_box(layer)
    both = lambda h, attn=attn, ffn=ffn: attn(h) + ffn(h)
    subs = [("block", both)] if block == "parallel" else [("attn", attn), ("ffn", ffn)]
    with jax.disable_jit():
      for slot, fn in subs:
        f = fn(x)
        v.append(ms(f) if block == "sequential" else ms(attn(x)) + ms(ffn(x)))
        x = _ln(x + f, _np(layer.norms[slot].scale[...]), _np(layer.norms[slot].bias[...]))
  expected = np.sqrt(v_in + np.concatenate([[0.0], np.cumsum(v)[:-1]]))
  expected[0] = 1.0
  with jax.disable_jit():
    admin.initialize_omega(model, key)
  got = np.stack([np.asarray(model.layers.residuals[s].omega[...]) for s in slots], axis=1)
  assert np.all(got == got[..., :1])  # every channel the same value
  np.testing.assert_allclose(got[..., 0].reshape(-1), expected, rtol=1e-4)
  assert expected[-1] > 1.5  # omega grows with depth: the check above can fail
  # The model built normally ran the two stages (on its own random profiling tokens).
  built_LxS = np.stack([b[:, 0] for b in built], axis=1)
  assert built_LxS.reshape(-1)[0] == 1.0 and np.all(np.diff(built_LxS.reshape(-1)) > 0)


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_admin_resolved_records_the_init_omegas():
  mcfg = _cfg(residual="admin")
  from resnorm_jax.model import model_def as mdl

  rec = variants.record(mcfg, lambda: mdl.init_model(mcfg, 0)[0])["admin_omega"]
  model = _build(residual="admin")
  table = [
    [float(model.layers.residuals[s].omega[...][i, 0]) for s in ("attn", "ffn")] for i in range(4)
  ]
  np.testing.assert_allclose(rec, table, rtol=1e-5)
  assert variants.record(_cfg(), lambda: None) == {}


# Mix-LN


@pytest.mark.parametrize(
  "n, frac, post", [(96, 0.25, 24), (24, 0.25, 6), (6, 0.25, 1), (2, 0.25, 0)]
)
def test_mixln_num_post_layers(n, frac, post):
  assert mixln_num_post(n, frac) == post


def _np_post(layer, x):
  attn, ffn = _black_box(layer)
  n = lambda s, h: _ln(h, _np(layer.norms[s].scale[...]), _np(layer.norms[s].bias[...]))
  x = n("attn", x + attn(x))
  return n("ffn", x + ffn(x))


def _np_pre(layer, x, scale=1.0):
  attn, ffn = _black_box(layer)
  n = lambda s, h: _ln(h, _np(layer.norms[s].scale[...]), _np(layer.norms[s].bias[...])) * scale
  x = x + attn(n("attn", x))
  return x + ffn(n("ffn", x))


def test_mixln_first_layers_post_later_pre():
  model = _build(norm_position="mix", mixln_post_fraction=0.5)  # layers 0, 1 post; 2, 3 pre
  assert model.cfg.final_norm
  rng = np.random.default_rng(3)
  for i in range(4):
    layer = _layer(model, i)
    _randomize_norms(layer, rng)
    with jax.disable_jit():
      y = _np(layer(jnp.asarray(X), None, jnp.int32(i))[0])
      expected = (_np_post if i < 2 else _np_pre)(layer, X)
      other = (_np_pre if i < 2 else _np_post)(layer, X)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4, err_msg=f"layer {i}")
    assert np.abs(y - other).max() > 1e-2, i


# LayerNorm scaling


def test_lnscale_factor_per_layer():
  got = np.asarray(jax.vmap(lnscale_factor)(jnp.arange(6)))
  np.testing.assert_allclose(got, 1 / np.sqrt(np.arange(1, 7)), rtol=1e-6)


def test_lnscale_block_scales_each_layers_norm_by_one_over_sqrt_l():
  model = _build(norm_position="lnscale")
  assert model.cfg.final_norm
  rng = np.random.default_rng(4)
  for i in range(4):
    layer = _layer(model, i)
    _randomize_norms(layer, rng)
    with jax.disable_jit():
      y = _np(layer(jnp.asarray(X), None, jnp.int32(i))[0])
      expected = _np_pre(layer, X, scale=1 / math.sqrt(i + 1))
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4, err_msg=f"layer {i}")
  with pytest.raises(ValueError, match="layer index"):
    layer(jnp.asarray(X))


# Hyper-connections


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_hyperconn_equals_prenorm_at_init(dynamic, block):
  common = dict(norm_position="pre", block=block)
  hyper = _build(residual="hyperconn", hyperconn_rate=3, hyperconn_dynamic=dynamic, **common)
  pre = _build(residual="add", **common)
  x0 = _embed_input(pre)
  with jax.disable_jit():
    h, _ = hyper.run_stack(jnp.broadcast_to(x0[:, :, None], (2, 4, 3, 8)), None)
    p, _ = pre.run_stack(jnp.asarray(x0), None)
    logits_h, logits_p = hyper(TOKENS)[0], pre(TOKENS)[0]
  for c in range(3):  # every copy is the Pre-LN stream
    np.testing.assert_allclose(np.asarray(h[:, :, c]), np.asarray(p), rtol=1e-6, atol=1e-6)
  # The head sees LN(sum of 3 equal copies) = LN(Pre-LN stream) up to eps / 9.
  np.testing.assert_allclose(np.asarray(logits_h), np.asarray(logits_p), rtol=1e-5, atol=1e-5)
  hyper.layers.residuals["block" if block == "parallel" else "ffn"].beta[...] *= 0.5
  with jax.disable_jit():
    assert np.abs(np.asarray(hyper(TOKENS)[0]) - np.asarray(logits_p)).max() > 1e-3


def test_hyperconn_static_init_is_the_papers():
  model = _build(norm_position="pre", residual="hyperconn", hyperconn_rate=3)
  for i in range(4):
    for s, slot in enumerate(("attn", "ffn")):
      k = 2 * i + s
      alpha = np.asarray(model.layers.residuals[slot].alpha[...][i])
      np.testing.assert_array_equal(alpha[:, 0], np.eye(3)[k % 3], err_msg=f"A_m of {k}")
      np.testing.assert_array_equal(alpha[:, 1:], np.eye(3))
      np.testing.assert_array_equal(np.asarray(model.layers.residuals[slot].beta[...][i]), 1.0)


@pytest.mark.parametrize("dynamic", [False, True])
def test_hyperconn_sublayer_matches_numpy(dynamic):
  n = 3
  model = _build(
    norm_position="pre", residual="hyperconn", hyperconn_rate=n, hyperconn_dynamic=dynamic
  )
  layer = _layer(model, 1)
  rng = np.random.default_rng(5)
  hc = layer.residuals["attn"]
  alpha, beta = rng.normal(size=(n, n + 1)), rng.normal(size=n)
  hc.alpha[...], hc.beta[...] = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)
  if dynamic:
    wa, wb = rng.normal(size=(8, n + 1)), rng.normal(size=8)
    hc.alpha_fn[...], hc.beta_fn[...] = jnp.asarray(wa, jnp.float32), jnp.asarray(wb, jnp.float32)
    hc.alpha_scale[...], hc.beta_scale[...] = jnp.float32(0.3), jnp.float32(0.2)
  H = rng.normal(size=(2, 4, n, 8)).astype(np.float32)
  attn, _ = _black_box(layer)
  norm = lambda h: _ln(h, _np(layer.norms["attn"].scale[...]), _np(layer.norms["attn"].bias[...]))
  with jax.disable_jit():
    got = _np(layer._sublayer("attn", jnp.asarray(H), lambda h, st: layer.attn(h), {}, None))
    if dynamic:  # per token: alpha + s_a tanh(norm(H) W_a), beta + s_b tanh(norm(H) W_b)
      hbar = _ln(H)  # the dynamic norm's gain/bias are 1/0 at init
      a = alpha + 0.3 * np.tanh(hbar @ wa)  # [B, T, n, n+1]
      b = beta + 0.2 * np.tanh(hbar @ wb)  # [B, T, n]
    else:
      a, b = np.broadcast_to(alpha, (2, 4, n, n + 1)), np.broadcast_to(beta, (2, 4, n))
    mix = np.einsum("btnm,btnd->btmd", a, H)
    f = attn(norm(mix[:, :, 0]))
    expected = b[..., None] * f[:, :, None, :] + mix[:, :, 1:]
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_hyperconn_refuses_post_placement():
  with pytest.raises(ValueError, match="hyperconn"):
    _cfg(norm_position="post", residual="hyperconn")


# Depth: one scanned stack, the same traced program at 6 and 1000 layers

NEW = {
  "subln": dict(norm_position="subln", init="magneto"),
  "admin": dict(norm_position="post", residual="admin"),
  "mixln": dict(norm_position="mix"),
  "lnscale": dict(norm_position="lnscale"),
  "hyperconn": dict(norm_position="pre", residual="hyperconn"),
  "hyperconn_dynamic": dict(norm_position="pre", residual="hyperconn", hyperconn_dynamic=True),
  "ngpt": dict(residual="ngpt", norm_position="none", position="rope", ffn_activation="swiglu"),
}


def _count_eqns(jaxpr) -> int:
  """Equations of a jaxpr, sub-jaxprs (scan, remat, jit) included."""
  count = 0
  for eqn in jaxpr.eqns:
    count += 1
    for value in eqn.params.values():
      for sub in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(sub, jax.extend.core.ClosedJaxpr):
          count += _count_eqns(sub.jaxpr)
        elif isinstance(sub, jax.extend.core.Jaxpr):
          count += _count_eqns(sub)
  return count


def _forward_eqns(n: int, **model) -> int:
  """The forward's traced size at n layers, from abstract weights (nothing allocated)."""
  cfg = _cfg(num_layers=n, **model)
  abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  graphdef, state = nnx.split(abstract)
  fn = lambda st: nnx.merge(graphdef, st)(TOKENS)[0]
  return _count_eqns(jax.make_jaxpr(fn)(state).jaxpr)


@pytest.mark.parametrize("name", sorted(NEW))
def test_traced_forward_is_the_same_size_at_6_and_1000_layers(name):
  # A Python loop over layers would grow the program 166-fold; the scan keeps it equal.
  assert _forward_eqns(6, **NEW[name]) == _forward_eqns(1000, **NEW[name])
