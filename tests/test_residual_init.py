"""Tests for resnorm_jax.model.residual and resnorm_jax.model.initializers: formulas, constants,
overrides.

Model-level checks build tiny Transformers from the base config schema, so the depth
constants are resolved exactly as in a run (model_config_from).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config, tiny_model
from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.model.transformer import Transformer

TOKENS = jnp.array([[3, 7, 1, 6], [0, 5, 5, 2]], jnp.int32)

# DeepNet's decoder-only constants (README's "Named experiments" table), to 3 decimals:
# N -> (alpha = (2N)^(1/4), beta = (8N)^(-1/4)).
DEEPNORM_TABLE = {
  6: (1.861, 0.380),
  12: (2.213, 0.319),  # 96^(-1/4) = 0.31947: 0.319, not 0.320
  24: (2.632, 0.269),
  48: (3.130, 0.226),
  96: (3.722, 0.190),
  100: (3.761, 0.188),
  200: (4.472, 0.158),
  500: (5.623, 0.126),
  1000: (6.687, 0.106),
}


@pytest.fixture(autouse=True)
def _no_mesh_needed():
  """Residual params carry logical axes; outside a model, build them mesh-free."""
  with nnx.use_eager_sharding(False):
    yield


def _logits(model: Transformer, tokens=TOKENS) -> np.ndarray:
  with jax.disable_jit():  # eager: tiny models, and no per-model compile of the scan
    return np.asarray(model(tokens)[0])


def _stack(model: Transformer, x_BxTxD: np.ndarray) -> np.ndarray:
  with jax.disable_jit():
    return np.asarray(model.run_stack(jnp.asarray(x_BxTxD, jnp.float32), None)[0])


def _xf(shape=(2, 3, 8)):
  rng = np.random.default_rng(0)
  return rng.normal(size=shape).astype(np.float32), rng.normal(size=shape).astype(np.float32)


def _std(a) -> float:
  return float(np.std(np.asarray(a, np.float64)))


def _embed_input(model: Transformer, tokens) -> np.ndarray:
  """The stack's input in NumPy: token rows times sqrt(d) (xavier rule) plus positions."""
  table = np.asarray(model.embed.embedding[...], np.float64)
  pos = np.asarray(model.pos_embed.embedding[...], np.float64)
  t = tokens.shape[1]
  return table[np.asarray(tokens)] * math.sqrt(table.shape[1]) + pos[:t][None]


def _zero_branches(model: Transformer) -> None:
  """Zero the output projections: every branch F is then exactly 0."""
  model.layers.attn.out.kernel[...] = jnp.zeros_like(model.layers.attn.out.kernel[...])
  model.layers.mlp.ffn_out.kernel[...] = jnp.zeros_like(model.layers.mlp.ffn_out.kernel[...])


# DeepNorm constants


@pytest.mark.parametrize("n", sorted(DEEPNORM_TABLE))
def test_deepnorm_alpha_beta_table(n):
  alpha, beta = DEEPNORM_TABLE[n]
  assert round(residual_lib.deepnorm_alpha(n), 3) == alpha
  assert round(residual_lib.deepnorm_beta(n), 3) == beta


@pytest.mark.parametrize("n", [6, 96, 1000])
def test_config_resolves_deepnorm_constants_from_depth(n):
  cfg = tiny_config(num_layers=n, residual="deepnorm", init="deepnorm")
  alpha, beta = DEEPNORM_TABLE[n]
  assert round(cfg.residual_alpha, 3) == alpha
  assert round(cfg.init_beta, 3) == beta


def test_config_overrides_alpha_beta_and_branch_scale():
  cfg = tiny_config(
    num_layers=96, residual="deepnorm", residual_alpha=2.5, init_beta=0.3, branch_scale=0.7
  )
  assert (cfg.residual_alpha, cfg.init_beta, cfg.branch_scale) == (2.5, 0.3, 0.7)


@pytest.mark.parametrize("n", [1, 6, 96])
def test_default_branch_scale_is_one_over_sqrt_2n(n):
  np.testing.assert_allclose(residual_lib.default_branch_scale(n), (2 * n) ** -0.5, rtol=1e-12)
  np.testing.assert_allclose(tiny_config(num_layers=n).branch_scale, (2 * n) ** -0.5, rtol=1e-12)


# Residual formulas


@pytest.mark.parametrize(
  "kind, kwargs, expected",
  [
    ("add", {}, lambda x, f: x + f),
    ("deepnorm", {"alpha": 3.722}, lambda x, f: 3.722 * x + f),
    ("scaled", {"scale": 0.125}, lambda x, f: x + 0.125 * f),
    ("rezero", {}, lambda x, f: x),
    ("rezero", {"rezero_init": 0.3}, lambda x, f: x + 0.3 * f),
    ("layerscale", {}, lambda x, f: x + 1e-4 * f),
    ("layerscale", {"layerscale_init": 0.05}, lambda x, f: x + 0.05 * f),
    ("none", {}, lambda x, f: f),
  ],
)
def test_residual_formula(kind, kwargs, expected):
  x, f = _xf()
  y = residual_lib.Residual(kind, 8, **kwargs)(jnp.asarray(x), jnp.asarray(f))
  np.testing.assert_allclose(np.asarray(y), expected(x, f), rtol=1e-6, atol=1e-7)


def test_gated_residual_formula():
  x, f = _xf()
  res = residual_lib.Residual("gated", 8, rngs=nnx.Rngs(params=0))
  # At init: W_g small (std 0.02), b_g = 0, so the gate is near 0.5.
  assert _std(res.gate[...]) == pytest.approx(0.02, rel=0.3)
  np.testing.assert_array_equal(np.asarray(res.gate_bias[...]), np.zeros(8))
  rng = np.random.default_rng(1)
  w, b = rng.normal(size=(8, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32)
  res.gate[...], res.gate_bias[...] = jnp.asarray(w), jnp.asarray(b)
  y = res(jnp.asarray(x), jnp.asarray(f))
  gate = 1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ w + b)))
  np.testing.assert_allclose(np.asarray(y), x + gate * f, rtol=1e-5, atol=1e-6)


def test_unknown_residual_raises():
  with pytest.raises(ValueError, match="highway.*add.*deepnorm.*scaled.*rezero.*gated.*none"):
    residual_lib.Residual("highway", 8)


# Residuals inside the model


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_rezero_model_is_identity_at_init(block):
  model = tiny_model(norm="none", norm_position="none", residual="rezero", block=block)
  assert model.final_norm is None  # auto: off for position none
  x0 = _embed_input(model, TOKENS)
  np.testing.assert_array_equal(_stack(model, x0), x0.astype(np.float32))
  table = np.asarray(model.embed.embedding[...], np.float64)
  np.testing.assert_allclose(_logits(model), x0 @ table.T, rtol=1e-5, atol=1e-5)
  # Not the identity once the scalars move (so the check above can fail).
  model.layers.residuals["attn" if block == "sequential" else "block"].rezero[...] += 0.1
  assert np.abs(_stack(model, x0) - x0).max() > 1e-3


@pytest.mark.parametrize(
  "residual, override, scale",
  [
    ("scaled", {}, 0.5),  # 1/sqrt(2N) at N=2
    ("scaled", {"branch_scale": 0.3}, 0.3),
    ("layerscale", {"layerscale_init": 0.2}, 0.2),
    ("rezero", {"rezero_init": 0.4}, 0.4),
  ],
)
def test_branch_multiplier_equals_add_with_scaled_output_projections(residual, override, scale):
  # Both branches end in a linear projection (attn out, ffn_out): x + s*F(x) is exactly the
  # `add` model with those two kernels multiplied by s.
  common = dict(norm="layernorm", norm_position="pre")
  model = tiny_model(residual=residual, **common, **override)
  ref = tiny_model(residual="add", **common)
  np.testing.assert_array_equal(
    np.asarray(model.layers.attn.q.kernel[...]), np.asarray(ref.layers.attn.q.kernel[...])
  )
  ref.layers.attn.out.kernel[...] *= scale
  ref.layers.mlp.ffn_out.kernel[...] *= scale
  logits = _logits(model)
  np.testing.assert_allclose(logits, _logits(ref), rtol=1e-5, atol=1e-5)
  ref.layers.mlp.ffn_out.kernel[...] *= 2.0  # a different multiplier is visible
  assert np.abs(logits - _logits(ref)).max() > 1e-4


@pytest.mark.parametrize(
  "block, override, alpha",
  [
    ("sequential", {}, 4**0.25),  # (2N)^(1/4) at N=2
    ("sequential", {"residual_alpha": 1.5}, 1.5),
    ("parallel", {"residual_alpha": 1.5}, 1.5),
  ],
)
def test_deepnorm_residual_multiplies_skip_by_alpha_in_model(block, override, alpha):
  # No norm and zero branches: each residual sub-layer multiplies the stream by alpha.
  model = tiny_model(
    norm="none", norm_position="none", residual="deepnorm", block=block, **override
  )
  _zero_branches(model)
  subs = 2 * 2 if block == "sequential" else 2
  x0 = _embed_input(model, TOKENS)
  table = np.asarray(model.embed.embedding[...], np.float64)
  np.testing.assert_allclose(_logits(model), alpha**subs * x0 @ table.T, rtol=1e-5, atol=1e-5)


def test_no_residual_has_no_skip_path():
  tiny = dict(norm="none", norm_position="none")
  model = tiny_model(residual="none", **tiny)
  _zero_branches(model)
  np.testing.assert_array_equal(_stack(model, _embed_input(model, TOKENS)), 0.0)
  # The same zeroed branches with a skip path keep the input.
  model = tiny_model(residual="add", **tiny)
  _zero_branches(model)
  x0 = _embed_input(model, TOKENS)
  np.testing.assert_allclose(_stack(model, x0), x0, rtol=1e-6)


# Init rules


def _xavier(fan_in, fan_out):
  return math.sqrt(2.0 / (fan_in + fan_out))


@pytest.mark.parametrize("role", ["q", "k", "v", "attn_out", "ffn_in", "ffn_gate", "ffn_out"])
def test_init_rule_kernel_std(role):
  n, d, f = 96, 64, 256
  fan = {"ffn_in": (d, f), "ffn_gate": (d, f), "ffn_out": (f, d)}.get(role, (d, d))
  beta = (8 * n) ** -0.25
  rule = lambda name: InitRule(name, n, d, std=0.02, beta=beta)
  deep = beta if role in ("v", "attn_out", "ffn_in", "ffn_out") else 1.0
  gpt2 = 0.02 / math.sqrt(2 * n) if role in ("attn_out", "ffn_out") else 0.02
  assert rule("xavier").kernel_std(role, *fan) == pytest.approx(_xavier(*fan), rel=1e-12)
  assert rule("deepnorm").kernel_std(role, *fan) == pytest.approx(deep * _xavier(*fan))
  assert rule("normal").kernel_std(role, *fan) == pytest.approx(0.02, rel=1e-12)
  assert rule("gpt2").kernel_std(role, *fan) == pytest.approx(gpt2, rel=1e-12)


def test_unknown_init_rule_raises():
  with pytest.raises(ValueError, match="'kaiming'.*xavier.*normal.*gpt2.*deepnorm"):
    InitRule("kaiming", 6, 64)


WEIGHTS = {  # role -> path in the built model
  "q": ("layers", "attn", "q", "kernel"),
  "k": ("layers", "attn", "k", "kernel"),
  "v": ("layers", "attn", "v", "kernel"),
  "attn_out": ("layers", "attn", "out", "kernel"),
  "ffn_in": ("layers", "mlp", "ffn_in", "kernel"),
  "ffn_gate": ("layers", "mlp", "ffn_gate", "kernel"),
  "ffn_out": ("layers", "mlp", "ffn_out", "kernel"),
  "embed": ("embed", "embedding"),
  "pos": ("pos_embed", "embedding"),
  "head": ("head", "kernel"),
}


def _measured_stds(cfg_overrides) -> dict[str, float]:
  model = tiny_model(**cfg_overrides)
  state = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  out = {}
  for role, path in WEIGHTS.items():
    leaf = state
    for key in path:
      leaf = leaf[key]
    out[role] = _std(leaf)
  return out


# One shape set for every init-statistics model, the same as test_model.py's 1000-layer
# models: each new weight shape costs seconds of initializer compiles on this CPU. Kernels
# have >= 256k entries (std to ~0.2%); the [16, 16] tables only 256 (std to ~5%).
DEEP_CFG = dict(
  vocab_size=16,
  num_layers=1000,
  d_model=16,
  num_heads=2,
  d_ff=32,
  max_seq_len=16,
  ffn_activation="swiglu",
  tie_embeddings=False,
)
KERNELS = ("q", "k", "v", "attn_out", "ffn_in", "ffn_gate", "ffn_out")
TABLES = ("embed", "pos", "head")


def test_deepnorm_beta_on_exactly_v_out_ffn_in_ffn_out():
  n, d, f, v = 1000, 16, 32, 16
  beta = (8 * n) ** -0.25
  deep = _measured_stds(dict(DEEP_CFG, init="deepnorm"))
  xav = _measured_stds(dict(DEEP_CFG, init="xavier"))
  fans = {"ffn_in": (d, f), "ffn_gate": (d, f), "ffn_out": (f, d)}
  for role in KERNELS:
    gain = beta if role in ("v", "attn_out", "ffn_in", "ffn_out") else 1.0
    assert deep[role] == pytest.approx(gain * _xavier(*fans.get(role, (d, d))), rel=0.02), role
    assert deep[role] / xav[role] == pytest.approx(gain, rel=0.02), role
  # Embeddings and the head are untouched by beta (and the same in both rules).
  assert deep["embed"] == pytest.approx(d**-0.5, rel=0.15)
  assert deep["head"] == pytest.approx(_xavier(d, v), rel=0.15)
  assert deep["pos"] == pytest.approx(0.02, rel=0.15)
  for role in TABLES:
    assert deep[role] == pytest.approx(xav[role], rel=1e-6), role


def test_init_beta_override_takes_effect():
  deep = _measured_stds(dict(DEEP_CFG, init="deepnorm", init_beta=0.5))
  xav = _measured_stds(dict(DEEP_CFG, init="xavier"))
  for role in ("v", "attn_out", "ffn_in", "ffn_out"):
    assert deep[role] / xav[role] == pytest.approx(0.5, rel=0.02), role
  for role in ("q", "k", "ffn_gate"):
    assert deep[role] / xav[role] == pytest.approx(1.0, rel=0.02), role


@pytest.mark.parametrize("std", [0.02, 0.05])
def test_gpt2_rule_scales_output_projections(std):
  n = DEEP_CFG["num_layers"]
  got = _measured_stds(dict(DEEP_CFG, init="gpt2", init_std=std))
  for role in ("q", "k", "v", "ffn_in", "ffn_gate"):
    assert got[role] == pytest.approx(std, rel=0.02), role
  for role in ("attn_out", "ffn_out"):
    assert got[role] == pytest.approx(std / math.sqrt(2 * n), rel=0.02), role
  for role in ("embed", "head"):
    assert got[role] == pytest.approx(std, rel=0.15), role


def test_normal_rule_is_flat():
  got = _measured_stds(dict(DEEP_CFG, init="normal", init_std=0.03))
  for role in KERNELS:
    assert got[role] == pytest.approx(0.03, rel=0.02), role
  for role in ("embed", "head"):
    assert got[role] == pytest.approx(0.03, rel=0.15), role
