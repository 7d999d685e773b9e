"""Tests for the assembled model: placements, scan vs loop, remat, features, dtypes, errors.

The branches alone (attention, RoPE, MLP) against NumPy are tests/test_branches.py.

Tiny models share one set of shapes (TINY, tests/conftest.py) and the depth tests another
(DEEP, 1000 layers): every new weight shape costs seconds of compiles of the random
initializers on this CPU.
"""

import dataclasses
import functools
import math
import time

import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from configs import base
from conftest import TINY, tiny_config, tiny_model
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.train import train_step as ts

# The 1000-layer shapes, shared with test_residual_init.py's init-statistics models.
DEEP = dict(vocab_size=16, num_layers=1000, d_model=16, num_heads=2, d_ff=32, max_seq_len=16)
TOKENS = jnp.array([[3, 7, 1, 6], [0, 5, 5, 2]], jnp.int32)


def _jit_forward(model: Transformer, tokens):
  logits, stats = nnx.jit(lambda m, t: m(t))(model, tokens)
  return np.asarray(logits), jax.tree.map(np.asarray, stats)


def _eager(model: Transformer, tokens=TOKENS, **kwargs):
  with jax.disable_jit():  # tiny models: op by op beats compiling each one
    logits, stats = model(tokens, **kwargs)
  return np.asarray(logits), jax.tree.map(np.asarray, stats)


def _np_layernorm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
  x = x.astype(np.float64)
  mean = x.mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _layer(model: Transformer, i: int):
  """Layer i as its own Block, from a slice of the stacked weights."""
  graphdef, state = nnx.split(model.layers)
  return nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))


def _layer_outputs(model: Transformer, x_BxTxD: jax.Array) -> list[np.ndarray]:
  """The stream after each layer."""
  outs = []
  with jax.disable_jit():
    for i in range(model.cfg.num_layers):
      x_BxTxD, _ = _layer(model, i)(x_BxTxD)
      outs.append(np.asarray(x_BxTxD))
  return outs


def _embed_input(model: Transformer, tokens=TOKENS) -> jax.Array:
  x = model.embed(tokens) * model.embed_scale
  return x + model.pos_embed.embedding[: tokens.shape[1]][None]


def _eqns(jaxpr) -> list:
  """Every equation of a jaxpr, sub-jaxprs (scan, remat, jit) included."""
  out = []
  for eqn in jaxpr.eqns:
    out.append(eqn)
    for value in eqn.params.values():
      for sub in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(sub, jex.core.ClosedJaxpr):
          out += _eqns(sub.jaxpr)
        elif isinstance(sub, jex.core.Jaxpr):
          out += _eqns(sub)
  return out


# Placements


@pytest.mark.parametrize("residual", ["add", "deepnorm"])
def test_post_ln_stream_has_unit_per_token_variance(residual):
  model = tiny_model(norm="layernorm", norm_position="post", residual=residual)
  for out in _layer_outputs(model, _embed_input(model)):
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.var(-1), 1.0, atol=1e-3)
  _, stats = _eager(model)
  np.testing.assert_allclose(stats["layers"]["stream_rms"], 1.0, atol=1e-3)


def test_pre_ln_stream_grows_with_depth_post_ln_is_reset():
  tokens = jnp.tile(jnp.arange(16, dtype=jnp.int32)[None], (2, 1))
  pre = _jit_forward(tiny_model(DEEP, norm_position="pre"), tokens)[1]["layers"]
  post = _jit_forward(tiny_model(DEEP, norm_position="post"), tokens)[1]["layers"]
  assert pre["stream_rms"].shape == post["stream_rms"].shape == (1000,)
  # Pre-LN: every layer adds to an unnormalized stream (about 1.3 -> 35 at 1000 layers).
  grows = pre["stream_rms"][[0, 9, 99, 999]]
  assert np.all(np.diff(grows) > 0) and grows[-1] > 10 * grows[0], grows
  # Post-LN: renormalized after every sub-layer, whatever came into the norm.
  np.testing.assert_allclose(post["stream_rms"], 1.0, atol=1e-3)
  assert post["attn_norm_in_rms"].mean() > 1.1 and post["ffn_norm_in_rms"].mean() > 1.1


@pytest.mark.parametrize(
  "position, setting, expected",
  [
    ("pre", "auto", True),
    ("peri", "auto", True),
    ("post", "auto", False),
    ("none", "auto", False),
    ("post", "true", True),
    ("none", "true", True),
    ("pre", "false", False),
    ("peri", "false", False),
  ],
)
def test_final_norm_auto_and_override(position, setting, expected):
  model = tiny_model(norm_position=position, final_norm=setting)
  assert model.cfg.final_norm is expected
  assert (model.final_norm is not None) is expected
  assert ("final_norm_in_rms" in _eager(model)[1]) is expected


def test_final_norm_is_applied_before_the_tied_head():
  model = tiny_model(norm="layernorm", norm_position="pre")
  with jax.disable_jit():
    x, _ = model.run_stack(_embed_input(model), None)
  table = np.asarray(model.embed.embedding[...], np.float64)
  expected = _np_layernorm(np.asarray(x)) @ table.T
  np.testing.assert_allclose(_eager(model)[0], expected, rtol=1e-4, atol=1e-5)


def _reference_block(position: str, parallel: bool, alpha: float, attn, ffn, x):
  """The placements of README's "Named experiments" table (Post-LN LN(ax + F(x)), Pre-LN
  ax + F(LN(x)), Peri-LN ax + LN(F(LN(x))), none ax + F(x); the parallel block sums the two
  branches of one input; a is DeepNorm's alpha, else 1) written out, with NumPy LayerNorm
  (gamma 1, beta 0 at init)."""
  n = _np_layernorm

  def sub(x, f):
    if position == "post":
      return n(alpha * x + f(x))
    if position == "pre":
      return alpha * x + f(n(x))
    if position == "peri":
      return alpha * x + n(f(n(x)))
    return alpha * x + f(x)

  if parallel:
    return sub(x, lambda h: attn(h) + ffn(h))
  return sub(sub(x, attn), ffn)


@pytest.mark.parametrize(
  "position, block, residual",
  [
    (position, block, "add")
    for position in ("post", "pre", "peri", "none")
    for block in ("sequential", "parallel")
  ]
  + [("post", "sequential", "deepnorm"), ("post", "parallel", "deepnorm")],
)
def test_block_placement_formulas(position, block, residual):
  model = tiny_model(norm="layernorm", norm_position=position, block=block, residual=residual)
  layer = _layer(model, 1)
  x = np.random.default_rng(0).normal(1.0, 2.0, (2, 4, 8)).astype(np.float32)
  with jax.disable_jit():
    y = np.asarray(layer(jnp.asarray(x))[0])
    # The branches themselves are checked against NumPy in test_branches.py.
    attn = lambda h: np.asarray(layer.attn(jnp.asarray(h, jnp.float32)), np.float64)
    ffn = lambda h: np.asarray(layer.mlp(jnp.asarray(h, jnp.float32)), np.float64)
    alpha = model.cfg.residual_alpha if residual == "deepnorm" else 1.0
    expected = _reference_block(position, block == "parallel", alpha, attn, ffn, x)
  np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_model_def_apply_train_updates_batchnorm_state_eval_keeps_it():
  cfg = tiny_config(norm="batchnorm", norm_position="pre")
  model_def = mdl.make_model_def(cfg)
  params, state = mdl.init_model(cfg, 0)
  with jax.disable_jit():
    _, _, after_train = model_def.apply(params, state, TOKENS, train=True)
    _, _, after_eval = model_def.apply(params, state, TOKENS, train=False)
  moved = jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - b).max()), after_train, state)
  assert min(jax.tree.leaves(moved)) > 0
  jax.tree.map(np.testing.assert_array_equal, after_eval, state)


# Scan, loop and remat


@pytest.mark.parametrize(
  "block, position, norm",
  [("sequential", "post", "layernorm"), ("parallel", "pre", "rmsnorm")],
)
def test_scan_equals_python_loop(block, position, norm):
  model = tiny_model(block=block, norm_position=position, norm=norm, qk_norm=True)
  logits_scan, stats_scan = nnx.jit(lambda m, t: m(t))(model, TOKENS)
  logits_loop, stats_loop = _eager(model, TOKENS, scan=False)
  np.testing.assert_allclose(logits_scan, logits_loop, rtol=1e-5, atol=1e-5)
  assert stats_scan["layers"].keys() == stats_loop["layers"].keys()
  for name, value in stats_scan["layers"].items():
    assert value.shape == (2,), name
    np.testing.assert_allclose(value, stats_loop["layers"][name], rtol=1e-5, err_msg=name)


def test_scan_equals_loop_batchnorm_train_mode_updates():
  models = [tiny_model(norm="batchnorm", norm_position="pre") for _ in range(2)]
  init = nnx.to_pure_dict(nnx.state(models[0], nnx.BatchStat))
  logits_scan, _ = nnx.jit(lambda m, t: m(t))(models[0], TOKENS)
  logits_loop, _ = _eager(models[1], TOKENS, scan=False)
  np.testing.assert_allclose(logits_scan, logits_loop, rtol=1e-5, atol=1e-5)
  after = [nnx.to_pure_dict(nnx.state(m, nnx.BatchStat)) for m in models]
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), *after)
  # Every layer's running averages (and the final norm's) moved: the loop wrote them back.
  moved = jax.tree.map(lambda a, b: np.abs(np.asarray(a) - b).max(-1), after[1], init)
  assert all(np.all(m > 0) for m in jax.tree.leaves(moved))


REMAT_POLICIES = {
  "full": None,
  "dots": jax.checkpoint_policies.checkpoint_dots,
  "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


REMAT_TOKENS = jnp.array([[3, 7, 1, 6, 4], [0, 5, 5, 2, 1]], jnp.int32)
REMAT_MODEL = dict(norm="rmsnorm", norm_position="pre", block="sequential", qk_norm=True)


@functools.cache
def _loss_and_grads(remat: str):
  """(params, ((loss, model state), grads), jaxpr equations) of one train-mode gradient."""
  cfg = tiny_config(remat=remat, **REMAT_MODEL)
  model_def = mdl.make_model_def(cfg)
  params, model_state = mdl.init_model(cfg, 0)

  def loss_fn(p):
    logits, _, new_state = model_def.apply(p, model_state, REMAT_TOKENS[:, :-1], train=True)
    return ts.cross_entropy(logits, REMAT_TOKENS[:, 1:]), new_state

  traced = jax.jit(jax.value_and_grad(loss_fn, has_aux=True)).trace(params)
  return params, traced.lower().compile()(params), _eqns(traced.jaxpr.jaxpr)


@pytest.mark.slow  # compiles for seconds: out of the fast tier
@pytest.mark.parametrize("policy", ["full", "dots", "dots_no_batch"])
def test_remat_equals_no_remat_values_and_gradients(policy):
  plain, remat = tiny_config(**REMAT_MODEL), tiny_config(remat=policy, **REMAT_MODEL)
  assert remat != plain and dataclasses.replace(remat, remat="none") == plain
  params_p, ((loss_p, _), grads_p), eqns_p = _loss_and_grads("none")
  params_r, ((loss_r, _), grads_r), eqns_r = _loss_and_grads(policy)
  # The two computations really differ: only one rematerializes, with the named policy.
  remats = [e for e in eqns_r if e.primitive.name in ("remat2", "checkpoint")]
  assert remats and all(e.params["policy"] == REMAT_POLICIES[policy] for e in remats)
  assert not [e for e in eqns_p if e.primitive.name in ("remat2", "checkpoint")]
  jax.tree.map(np.testing.assert_array_equal, params_p, params_r)
  np.testing.assert_allclose(loss_r, loss_p, rtol=1e-6)
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  jax.tree.map(close, grads_r, grads_p)
  assert max(float(np.abs(g).max()) for g in jax.tree.leaves(grads_p)) > 0


# Features: each builds, is finite and causal


def _causal(model: Transformer, t: int = 5) -> None:
  base_tokens = np.array([3, 7, 1, 6, 0, 2][:t], np.int32)
  rows = [base_tokens] + [
    np.where(np.arange(t) == p, (base_tokens + 5) % 8, base_tokens) for p in range(1, t)
  ]
  logits, _ = _eager(model, jnp.asarray(np.stack(rows)))
  assert np.all(np.isfinite(logits))
  for p in range(1, t):
    np.testing.assert_allclose(logits[p, :p], logits[0, :p], rtol=0, atol=1e-5, err_msg=f"{p}")
    assert np.abs(logits[p, p] - logits[0, p]).max() > 1e-4


@pytest.mark.parametrize(
  "feature",
  [
    {"position": "rope"},
    {"position": "learned"},
    {"qk_norm": True},
    {"ffn_activation": "swiglu"},
    {"ffn_activation": "relu"},
    {"ffn_activation": "gelu"},
    {"tie_embeddings": False},
    {"position": "rope", "qk_norm": True, "ffn_activation": "swiglu", "tie_embeddings": False},
  ],
)
def test_feature_builds_and_is_causal(feature):
  model = tiny_model(norm_position="pre", **feature)
  model.eval()
  _causal(model)
  assert (model.pos_embed is None) == (feature.get("position") == "rope")
  assert (model.layers.attn.q_norm is not None) == feature.get("qk_norm", False)
  assert (model.layers.mlp.ffn_gate is not None) == (feature.get("ffn_activation") == "swiglu")
  assert (model.head is None) == feature.get("tie_embeddings", True)


def test_untied_head_is_used():
  model = tiny_model(tie_embeddings=False)
  before, _ = _eager(model)
  model.head.kernel[...] *= 2.0  # post-LN, no final norm: logits are linear in the head
  np.testing.assert_allclose(_eager(model)[0], 2 * before, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "batchnorm", "dyt"])
def test_bfloat16_compute_close_to_float32_with_f32_softmax_and_norms(norm):
  model = dict(norm=norm, norm_position="peri", qk_norm=True, ffn_activation="relu")
  logits = {}
  for dtype in ("float32", "bfloat16"):
    m = tiny_model(dtype=dtype, **model)  # the same seed: the same float32 weights
    m.eval()
    logits[dtype] = _eager(m)[0]
  graphdef, state = nnx.split(m)
  eqns = _eqns(jax.make_jaxpr(lambda s: nnx.merge(graphdef, s)(TOKENS)[0])(state).jaxpr)
  assert logits["bfloat16"].dtype == np.float32
  assert np.all(np.isfinite(logits["bfloat16"]))
  diff = np.abs(logits["bfloat16"] - logits["float32"]).max()
  assert 0 < diff < 0.05 * np.abs(logits["float32"]).max() + 0.05
  # The bfloat16 model's program: matmuls in bfloat16, and the softmax's exp and the norms'
  # rsqrt (tanh for DyT) in float32.
  dtypes = lambda name: {
    str(v.aval.dtype) for e in eqns if e.primitive.name == name for v in e.invars
  }
  assert "bfloat16" in dtypes("dot_general")
  assert dtypes("exp") == {"float32"}
  assert dtypes("tanh" if norm == "dyt" else "rsqrt") == {"float32"}


# Structure, depth, errors, training


def test_each_layer_has_its_own_random_weights():
  model = tiny_model(residual="gated", ffn_activation="swiglu")
  state = nnx.to_pure_dict(nnx.state(model.layers, nnx.Param))
  random_leaves = {
    "/".join(map(str, path)): np.asarray(leaf)
    for path, leaf in jax.tree_util.tree_leaves_with_path(state)
    if path[-1].key in ("kernel", "gate")
  }
  assert len(random_leaves) == 9  # q k v out, in gate out, attn and ffn gates
  for name, leaf in random_leaves.items():
    assert leaf.shape[0] == 2, name
    assert np.abs(leaf[0] - leaf[1]).min() > 0, name


def test_1000_layer_model_builds_and_runs_jitted():
  start = time.perf_counter()
  model = tiny_model(DEEP, residual="deepnorm", init="deepnorm")
  built = time.perf_counter()
  logits, stats = _jit_forward(model, jnp.arange(8, dtype=jnp.int32)[None])
  ran = time.perf_counter()
  print(f"1000 layers: build {built - start:.1f} s, jit + forward {ran - built:.1f} s")
  assert logits.shape == (1, 8, 16) and np.all(np.isfinite(logits))
  # DeepNorm is Post-LN: the stream is renormalized at every one of the 1000 layers.
  np.testing.assert_allclose(stats["layers"]["stream_rms"], 1.0, atol=1e-3)


AXES = [  # (section, key, valid values as configs/base.py's comments list them)
  ("model", "norm", ("layernorm", "rmsnorm", "batchnorm", "dyt", "none")),
  ("model", "norm_position", ("post", "pre", "peri", "none")),
  ("model", "residual", ("add", "deepnorm", "scaled", "rezero", "layerscale", "gated", "none")),
  ("model", "block", ("sequential", "parallel")),
  ("model", "init", ("xavier", "normal", "gpt2", "deepnorm")),
  ("model", "final_norm", ("auto", "true", "false")),
  ("model", "ffn_activation", ("gelu", "relu", "swiglu")),
  ("model", "position", ("learned", "rope")),
  ("model", "attention", ("dense", "fused", "xla")),  # cudnn, splash: refused on CPU (own tests)
  ("model", "remat", ("none", "full", "dots", "dots_no_batch")),
  ("model", "dtype", ("float32", "bfloat16")),
]


def _config_with(section: str, key: str, value):
  c = base.get_config()
  c.model.update(TINY)
  setattr(c[section], key, value)
  return c


@pytest.mark.parametrize("section, key, valid", AXES, ids=[a[1] for a in AXES])
def test_unknown_axis_value_raises_naming_key_value_and_valid(section, key, valid):
  for value in valid:
    model_config_from(_config_with(section, key, value))
  with pytest.raises(ValueError) as err:
    model_config_from(_config_with(section, key, "bogus"))
  msg = str(err.value)
  assert f"{section}.{key}" in msg and "'bogus'" in msg
  for value in valid:
    assert value in msg, value


def test_num_heads_must_divide_d_model():
  c = _config_with("model", "num_heads", 3)
  with pytest.raises(ValueError, match=r"num_heads=3.*d_model=8"):
    model_config_from(c)


@pytest.mark.parametrize("n", [0, -2])
def test_num_layers_must_be_positive(n):
  with pytest.raises(ValueError, match=rf"model.num_layers={n}"):
    model_config_from(_config_with("model", "num_layers", n))


def test_learned_positions_refuse_sequences_past_max_seq_len():
  with pytest.raises(ValueError, match="max_seq_len=8"):
    tiny_model()(jnp.zeros((1, 9), jnp.int32))


@pytest.mark.slow  # trains
def test_tiny_model_overfits_one_batch():
  cfg = tiny_config(norm_position="pre")
  model_def = mdl.make_model_def(cfg)
  optimizer = optax.adam(1e-2)
  state = ts.init_state(model_def, optimizer, seed=0)
  tokens = jax.random.randint(jax.random.key(1), (4, 9), 0, cfg.vocab_size)
  batch = (tokens[:, :-1], tokens[:, 1:])
  step = jax.jit(lambda s, b: ts.train_step(model_def, optimizer, s, b, per_layer=False))
  step = step.lower(state, batch).compile()
  losses = []
  for _ in range(100):
    state, metrics = step(state, batch)
    losses.append(float(metrics["loss"]))
  assert losses[0] > 0.9 * math.log(cfg.vocab_size)  # about chance at init
  assert losses[-1] < 0.25 * losses[0]
  assert int(state.step) == 100
