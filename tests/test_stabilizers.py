"""The stabilizers practitioners reach for, against NumPy at a tiny shape: logit softcapping
(Gemma 2), gated attention (Qiu et al. 2025), learned attention sinks (gpt-oss) and SeeDNorm
(Cai et al. 2025); the combinations each refuses, in one line naming the value and the
choices, before anything is built.

Attention is written out in NumPy (learned positions: no RoPE) with each feature's change;
the FFN is called as a black box.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import TINY, tiny_config, tiny_model
from resnorm_jax.model import variants
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.model.variants import make_norm
from resnorm_jax.model.variants.seednorm import SeeDNorm

SHAPE = dict(TINY, num_layers=2)
TOKENS = jnp.array([[3, 7, 1, 6, 2, 0], [0, 5, 5, 2, 4, 1]], jnp.int32)
X = np.random.default_rng(0).normal(0.5, 2.0, (2, 5, 8)).astype(np.float32)
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


def _sigmoid(x):
  return 1 / (1 + np.exp(-x))


def _ln(x, module):
  x = _np(x)
  y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  return y * _np(module.scale[...]) + _np(module.bias[...])


def _np_attention(attn, h, *, cap=0.0, sink=None, gate=None, heads=2):
  """Causal MHA in NumPy: logits capped c tanh(l / c) before the mask (cap > 0); a column of
  the sink's logit per head in the softmax, its probability dropped (gpt-oss's sdpa); the
  heads' output times sigmoid(h W_g) per head and channel or per head (gate)."""
  w = {n: _np(getattr(attn, n).kernel[...]) for n in ("q", "k", "v", "out")}
  b, t, d = h.shape
  kd = d // heads
  q, k, v = ((_np(h) @ w[n]).reshape(b, t, heads, kd) for n in ("q", "k", "v"))
  logits = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(kd)
  if cap:
    logits = cap * np.tanh(logits / cap)
  logits = np.where(np.tril(np.ones((t, t), bool)), logits, -np.inf)
  if sink is not None:
    column = np.broadcast_to(_np(sink)[None, :, None, None], (b, heads, t, 1))
    logits = np.concatenate([logits, column], -1)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p = (p / p.sum(-1, keepdims=True))[..., :t]
  ctx = np.einsum("bhts,bshk->bthk", p, v)
  if gate is not None:
    g = _sigmoid(_np(h) @ _np(gate))
    ctx = ctx * g.reshape(b, t, heads, -1)
  return ctx.reshape(b, t, d) @ w["out"]


def _np_prenorm_layer(layer, x, **attn):
  y = x + _np_attention(layer.attn, _ln(x, layer.norms["attn"]), **attn)
  return y + _np(layer.mlp(jnp.asarray(_ln(y, layer.norms["ffn"]), jnp.float32)))


def _run_layer(layer, x, i=1):
  with jax.disable_jit():
    return _np(layer(jnp.asarray(x), None, jnp.int32(i))[0])


# Logit softcapping


def test_softcap_layer_matches_numpy_and_caps_the_output_logits():
  model = _build(norm_position="pre", attn_softcap=1.5, final_softcap=2.0)
  layer = _layer(model, 1)
  with jax.disable_jit():
    stats = {}
    layer.attn(jnp.asarray(X), stats=stats)
  expected = _np_prenorm_layer(layer, _np(X), cap=1.5)
  np.testing.assert_allclose(_run_layer(layer, X), expected, rtol=1e-4, atol=1e-4)
  # The cap bites: without it the same layer differs, and the logged max is under c.
  assert np.abs(expected - _np_prenorm_layer(layer, _np(X))).max() > 1e-3
  assert float(stats["attn_logit_max"]) <= 1.5
  # Output logits: c tanh(z / c) of the uncapped model's, bounded by c.
  plain = _build(norm_position="pre", attn_softcap=1.5)
  with jax.disable_jit():
    capped, raw = _np(model(TOKENS)[0]), _np(plain(TOKENS)[0])
  np.testing.assert_allclose(capped, 2.0 * np.tanh(raw / 2.0), rtol=1e-5, atol=1e-5)
  assert np.abs(capped).max() < 2.0


@pytest.mark.parametrize("placement", ["post", "peri", "subln", "hybridnorm"])
def test_softcap_off_is_the_plain_model_and_on_changes_it_on_every_placement(placement):
  plain, same = _build(norm_position=placement), _build(norm_position=placement, final_softcap=0.0)
  capped = _build(norm_position=placement, attn_softcap=0.3, final_softcap=0.5)
  with jax.disable_jit():
    p, s, c = (_np(m(TOKENS)[0]) for m in (plain, same, capped))
  np.testing.assert_array_equal(s, p)
  assert np.abs(c).max() < 0.5 and np.abs(c - p).max() > 1e-2


def test_softcap_refusals_name_the_value_and_the_choices():
  with pytest.raises(
    ValueError,
    match=r"model\.attention='xla' does not apply the attn_cap hook that softcap turns on "
    r"\(model\.attn_softcap=50\.0\); valid values: dense, splash$",
  ):
    _cfg(attn_softcap=50.0, attention="xla")
  _cfg(final_softcap=30.0, attention="xla")  # the output cap holds on every path
  with pytest.raises(ValueError, match=r"model\.final_softcap=-1\.0 must be a number >= 0"):
    _cfg(final_softcap=-1.0)


# Gated attention


@pytest.mark.parametrize("kind, width", [("elementwise", 8), ("headwise", 2)])
def test_gated_attention_layer_matches_numpy(kind, width):
  model = _build(norm_position="pre", attn_gate=kind)
  layer = _layer(model, 1)
  gate = layer.attn.gate.proj.kernel
  assert gate.shape == (8, width)
  gate[...] = jnp.asarray(np.random.default_rng(1).normal(0, 0.8, (8, width)), jnp.float32)
  expected = _np_prenorm_layer(layer, _np(X), gate=gate[...])
  np.testing.assert_allclose(_run_layer(layer, X), expected, rtol=1e-4, atol=1e-4)
  assert np.abs(expected - _np_prenorm_layer(layer, _np(X))).max() > 1e-3


def test_gated_attention_is_the_same_on_the_xla_path_and_refuses_another_choice():
  dense = _build(norm_position="pre", attn_gate="elementwise")
  xla = _build(norm_position="pre", attn_gate="elementwise", attention="xla")
  with jax.disable_jit():
    a, b = _np(dense(TOKENS)[0]), _np(xla(TOKENS)[0])
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
  with pytest.raises(
    ValueError,
    match=r"model\.attn_gate='on' is not valid; valid values: off, elementwise, headwise",
  ):
    _cfg(attn_gate="on")


# Attention sinks


@pytest.mark.parametrize("attention", ["dense", "xla"])
def test_attention_sinks_layer_matches_numpy(attention):
  model = _build(norm_position="pre", attn_sinks=True, attention=attention)
  layer = _layer(model, 1)
  np.testing.assert_array_equal(_np(layer.attn.sink.logits[...]), 0.0)
  sink = jnp.asarray([1.5, -0.7], jnp.float32)
  layer.attn.sink.logits[...] = sink
  expected = _np_prenorm_layer(layer, _np(X), sink=sink)
  np.testing.assert_allclose(_run_layer(layer, X), expected, rtol=1e-4, atol=1e-4)
  assert np.abs(expected - _np_prenorm_layer(layer, _np(X))).max() > 1e-3


@pytest.mark.slow  # compiles both attention paths
def test_attention_sinks_get_the_same_gradient_on_both_paths_and_refuse_cudnn():
  grads = []
  for attention in ("dense", "xla"):
    model = _build(norm_position="pre", attn_sinks=True, attention=attention)
    model.layers.attn.sink.logits[...] = jnp.asarray([[0.5, -1.0], [2.0, 0.3]], jnp.float32)
    g = nnx.grad(lambda m: jnp.sum(m(TOKENS)[0] ** 2))(model)
    grads.append(_np(g.layers.attn.sink.logits[...]))
  assert np.abs(grads[0]).min() > 0
  np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-6)
  from configs import base
  from resnorm_jax.model.config_types import model_config_from

  c = base.get_config()
  c.model.update(SHAPE, d_model=16, attn_sinks=True, attention="cudnn", dtype="bfloat16")
  with pytest.raises(
    ValueError,
    match=r"model\.attention='cudnn' does not apply the attn_sink hook that sinks turns on "
    r"\(model\.attn_sinks=True\); valid values: dense, xla, splash$",
  ):
    model_config_from(c, platform="gpu")


# SeeDNorm


def _np_seednorm(x, gamma, alpha, beta, eps=1e-5):
  x = _np(x)
  s = np.tanh((x * beta).sum(-1, keepdims=True))
  return (s * alpha + gamma) * x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def test_seednorm_matches_numpy_and_starts_as_rmsnorm():
  assert "seednorm" in variants.names("norm")
  with nnx.use_eager_sharding(False):
    norm = make_norm("seednorm", 8, eps=1e-5)
  assert isinstance(norm, SeeDNorm)
  ones, zeros = np.ones(8), np.zeros(8)
  np.testing.assert_allclose(
    _np(norm(jnp.asarray(X))), _np_seednorm(X, ones, ones, zeros), rtol=1e-5, atol=1e-5
  )
  rng = np.random.default_rng(2)
  gamma, alpha, beta = rng.normal(1, 0.3, 8), rng.normal(0, 0.5, 8), rng.normal(0, 0.3, 8)
  for p, value in (("scale", gamma), ("alpha", alpha), ("beta", beta)):
    getattr(norm, p)[...] = jnp.asarray(value, jnp.float32)
  expected = _np_seednorm(X, gamma, alpha, beta)
  np.testing.assert_allclose(_np(norm(jnp.asarray(X))), expected, rtol=1e-5, atol=1e-5)
  # The per-token rescale is not RMSNorm's static gamma: it depends on the input's norm.
  assert np.abs(expected - _np_seednorm(X, gamma, zeros, zeros)).max() > 1e-2


def test_seednorm_prenorm_block_matches_numpy():
  model = _build(norm="seednorm", norm_position="pre")
  assert model.cfg.final_norm and isinstance(model.final_norm, SeeDNorm)
  layer = _layer(model, 1)
  rng = np.random.default_rng(3)
  for slot in ("attn", "ffn"):
    for p in ("scale", "alpha", "beta"):
      getattr(layer.norms[slot], p)[...] = jnp.asarray(rng.normal(0.5, 0.3, 8), jnp.float32)
  norm = lambda slot, h: _np_seednorm(
    h, *(_np(getattr(layer.norms[slot], p)[...]) for p in ("scale", "alpha", "beta"))
  )
  x = _np(X) + _np_attention(layer.attn, norm("attn", _np(X)))
  x = x + _np(layer.mlp(jnp.asarray(norm("ffn", x), jnp.float32)))
  np.testing.assert_allclose(_run_layer(layer, X), x, rtol=1e-4, atol=1e-4)


def test_each_feature_is_registered_with_its_keys_and_off_by_default():
  feats = {v.name: v for v in variants.every() if v.axis == variants.FEATURE}
  assert {"softcap", "attngate", "sinks"} <= set(feats)
  assert variants.features(_cfg()) == ()
  on = variants.features(_cfg(attn_softcap=50.0, attn_gate="headwise", attn_sinks=True))
  assert {f.name for f in on} == {"softcap", "attngate", "sinks"}
