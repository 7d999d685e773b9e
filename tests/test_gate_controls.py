"""The controls of gated attention (docs/stabilizers): model.attn_out_scale (the attention
branch times a fixed factor), model.attn_gate_bias (the gate's learned bias from a value) and
model.attn_gate_frozen (the gate never moves), each against a NumPy oracle or a train step."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import base
from conftest import TINY, tiny_config, tiny_model
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.model.variants import attngate
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer

SHAPE = dict(TINY, num_layers=2)
X = np.random.default_rng(0).normal(0.5, 2.0, (2, 5, 8)).astype(np.float32)
TOKENS = jnp.array([[3, 7, 1, 6, 2, 0], [0, 5, 5, 2, 4, 1]], jnp.int32)


def _np(a) -> np.ndarray:
  return np.asarray(a, np.float64)


def _layer(model, i: int):
  graphdef, state = nnx.split(model.layers)
  return nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))


def _np_attention(attn, h, *, gate=None, bias=None, scale=1.0, heads=2):
  """Causal MHA in NumPy; the heads' output times sigmoid(h W_g + b) (gate, bias); the
  projected output times `scale`."""
  w = {n: _np(getattr(attn, n).kernel[...]) for n in ("q", "k", "v", "out")}
  b, t, d = h.shape
  kd = d // heads
  q, k, v = ((_np(h) @ w[n]).reshape(b, t, heads, kd) for n in ("q", "k", "v"))
  logits = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(kd)
  logits = np.where(np.tril(np.ones((t, t), bool)), logits, -np.inf)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  ctx = np.einsum("bhts,bshk->bthk", p / p.sum(-1, keepdims=True), v)
  if gate is not None:
    scores = _np(h) @ _np(gate) + (0.0 if bias is None else _np(bias))
    ctx = ctx * (1 / (1 + np.exp(-scores))).reshape(b, t, heads, -1)
  return scale * (ctx.reshape(b, t, d) @ w["out"])


def _attn(layer, x):
  with jax.disable_jit():
    return _np(layer.attn(jnp.asarray(x)))


@pytest.mark.parametrize("attention", ["dense", "xla"])
def test_attn_out_scale_multiplies_the_branch_as_numpy_does(attention):
  model = tiny_model(SHAPE, norm_position="post", attn_out_scale=0.5, attention=attention)
  layer = _layer(model, 1)
  expected = _np_attention(layer.attn, X, scale=0.5)
  np.testing.assert_allclose(_attn(layer, X), expected, rtol=1e-4, atol=1e-5)
  # The same weights at 1.0 give twice the branch: the factor is the only change.
  plain = tiny_model(SHAPE, norm_position="post", attention=attention)
  nnx.update(plain, nnx.state(model))
  np.testing.assert_allclose(_attn(_layer(plain, 1), X), 2 * expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind, width", [("elementwise", 8), ("headwise", 2)])
def test_gate_bias_is_learned_from_its_value_and_matches_numpy(kind, width):
  model = tiny_model(SHAPE, norm_position="pre", attn_gate=kind, attn_gate_bias=3.0)
  layer = _layer(model, 1)
  gate = layer.attn.gate
  np.testing.assert_array_equal(np.asarray(gate.bias[...]), np.full(width, 3.0, np.float32))
  gate.bias[...] = jnp.asarray(np.random.default_rng(2).normal(3.0, 0.5, width), jnp.float32)
  expected = _np_attention(layer.attn, X, gate=gate.proj.kernel[...], bias=gate.bias[...])
  np.testing.assert_allclose(_attn(layer, X), expected, rtol=1e-4, atol=1e-5)
  # The bias acts: without it the oracle differs.
  no_bias = _np_attention(layer.attn, X, gate=gate.proj.kernel[...])
  assert np.abs(expected - no_bias).max() > 1e-2


def test_gate_bias_zero_is_the_reference_gate_with_no_bias_parameter():
  model = tiny_model(SHAPE, norm_position="pre", attn_gate="elementwise")
  assert _layer(model, 1).attn.gate.bias is None


def _trained(freeze_gate: bool, steps: int = 3):
  c = base.get_config()
  c.model.num_layers, c.model.d_model, c.model.num_heads, c.model.d_ff = 2, 32, 2, 64
  c.model.attn_gate, c.model.attn_gate_bias = "elementwise", 3.0
  c.model.attn_gate_frozen = freeze_gate
  model_def = mdl.make_model_def(model_config_from(c))
  optimizer = make_optimizer(c.opt, 10, model_def)
  state = ts.init_state(model_def, optimizer, 0)
  params0 = state.params
  rng = np.random.default_rng(0)
  batch = tuple(jnp.asarray(rng.integers(0, 256, (4, 16)), jnp.int32) for _ in range(2))
  step = jax.jit(lambda s, b: ts.train_step(model_def, optimizer, s, b, per_layer=False))
  for _ in range(steps):
    state, _ = step(state, batch)
  gate = jax.tree_util.tree_map_with_path(
    lambda path, _: attngate.is_gate(jax.tree_util.keystr(path)), params0
  )
  moved = {
    jax.tree_util.keystr(path): (not np.array_equal(np.asarray(p0), np.asarray(p1)), bool(g))
    for (path, p0), p1, g in zip(
      jax.tree_util.tree_leaves_with_path(params0),
      jax.tree.leaves(state.params),
      jax.tree.leaves(gate),
      strict=True,
    )
  }
  return moved


@pytest.mark.slow  # trains steps
def test_a_frozen_gate_keeps_its_init_and_everything_else_moves():
  frozen = _trained(True)
  gate_paths = {p for p, (_, g) in frozen.items() if g}
  assert gate_paths == {
    "['layers']['attn']['gate']['bias']",
    "['layers']['attn']['gate']['proj']['kernel']",
  }
  for path, (moved, is_gate) in frozen.items():
    assert moved != is_gate, path
  # Not frozen, the same gate moves: the freeze is the only difference.
  learned = _trained(False)
  assert all(moved for p, (moved, g) in learned.items() if g)


@pytest.mark.parametrize(
  "keys, message",
  [
    (
      dict(attn_gate_bias=3.0),
      r"model\.attn_gate_bias=3\.0 acts on the attention gate, which "
      r"is off .*elementwise, headwise",
    ),
    (dict(attn_gate_frozen=True), r"model\.attn_gate_frozen=True acts on the attention gate"),
    (
      dict(attn_gate="elementwise", attn_gate_bias=float("nan")),
      r"model\.attn_gate_bias=nan must be a finite number",
    ),
    (dict(attn_out_scale=0.0), r"model\.attn_out_scale=0\.0 must be > 0"),
    (dict(attn_out_scale=-0.5), r"model\.attn_out_scale=-0\.5 must be > 0"),
  ],
)
def test_the_controls_refuse_bad_values_naming_them(keys, message):
  with pytest.raises(ValueError, match=message):
    tiny_config(SHAPE, **keys)


def test_the_defaults_build_the_same_model_as_before():
  """attn_out_scale=1.0 and no gate bias trace nothing: the plain model's logits bit for bit."""
  plain = tiny_model(SHAPE, norm_position="post")
  same = tiny_model(SHAPE, norm_position="post", attn_out_scale=1.0, attn_gate_bias=0.0)
  with jax.disable_jit():
    np.testing.assert_array_equal(np.asarray(plain(TOKENS)[0]), np.asarray(same(TOKENS)[0]))


def test_attention_shape_is_entropy_and_first_token_mass_as_numpy():
  from resnorm_jax.model.attention import attention_shape

  t = 5
  causal = np.tril(np.ones((t, t)))
  uniform = causal / causal.sum(-1, keepdims=True)  # query i spreads over its i + 1 keys
  got = attention_shape(jnp.asarray(uniform[None, None], jnp.float32))
  np.testing.assert_allclose(float(got["attn_entropy"]), np.mean(np.log(np.arange(1, t + 1))), 1e-6)
  np.testing.assert_allclose(float(got["attn_sink_mass"]), np.mean(1 / np.arange(1, t + 1)), 1e-6)
  sink = np.zeros((t, t))
  sink[:, 0] = 1.0  # every query on the first token
  got = attention_shape(jnp.asarray(sink[None, None], jnp.float32))
  assert float(got["attn_entropy"]) == 0.0 and float(got["attn_sink_mass"]) == 1.0


def test_layer_stats_hold_the_gate_and_stream_extremes_as_numpy():
  model = tiny_model(SHAPE, norm_position="pre", attn_gate="elementwise", attn_gate_bias=1.0)
  layer = _layer(model, 1)
  stats = {}
  with jax.disable_jit():
    layer.attn(jnp.asarray(X), stats=stats)
  gate = layer.attn.gate
  g = 1 / (1 + np.exp(-(_np(X) @ _np(gate.proj.kernel[...]) + _np(gate.bias[...]))))
  np.testing.assert_allclose(float(stats["attn_gate_mean"]), g.mean(), rtol=1e-5)
  np.testing.assert_allclose(float(stats["attn_gate_std"]), g.std(), rtol=1e-4)
  with jax.disable_jit():
    y, st = layer(jnp.asarray(X), None, jnp.int32(1))
  np.testing.assert_allclose(float(st["stream_max"]), np.abs(np.asarray(y)).max(), rtol=1e-6)


@pytest.mark.parametrize(
  "key, value, message",
  [
    ("attn_sinks", 1, r"model\.attn_sinks=1 must be true or false"),
    ("attn_gate_frozen", "yes", r"model\.attn_gate_frozen='yes' must be true or false"),
    ("attn_gate_bias", True, r"model\.attn_gate_bias=True must be a finite number"),
    ("attn_gate_bias", float("inf"), r"model\.attn_gate_bias=inf must be a finite number"),
    ("attn_gate", 3, r"model\.attn_gate=3 must be a str"),
  ],
)
def test_a_variant_key_checks_its_type_from_its_default(key, value, message):
  """Key knew its type from its default and did not check it (four copies of a bool check):
  a value read back from a config.json, or a ModelConfig built in code, is checked too."""
  from resnorm_jax.model import variants

  with pytest.raises(ValueError, match=message):
    variants.keys()[key].validate(key, value)
  variants.keys()[key].validate(key, variants.keys()[key].default)  # its default passes
