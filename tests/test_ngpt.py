"""nGPT (Loshchilov 2024, arXiv 2410.01131) against NumPy: a layer's formula, the model's input
and logits, the paper's init constants, the weight projection as an optax transformation, and
the property the paper relies on: after an optimizer step every normalized weight matrix has
unit-norm vectors along its embedding axis and the hidden states stay unit norm.

Causality and finiteness are in test_variants.py, the flat traced size at 6 and 1000 layers
in test_later_variants.py.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from configs import base
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.attention import rope_tables
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.model.variants import ngpt
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer

NGPT = dict(residual="ngpt", norm_position="none", position="rope", ffn_activation="swiglu")
TINY = dict(vocab_size=16, num_layers=3, d_model=8, num_heads=2, d_ff=12, max_seq_len=8)
TOKENS = jnp.array([[3, 7, 1, 6, 15], [0, 5, 5, 2, 9]], jnp.int32)
# The normalized matrices and their embedding axis in the parameter tree (layer-stacked
# kernels have the layer axis first): written out here, not derived from the code's names.
UNIT_AXES = {
  ("embed", "embedding"): 1,  # [V, D]
  ("head", "kernel"): 0,  # [D, V]
  ("layers", "attn", "q", "kernel"): 1,  # [L, D, H*K]
  ("layers", "attn", "k", "kernel"): 1,
  ("layers", "attn", "v", "kernel"): 1,
  ("layers", "attn", "out", "kernel"): 2,  # [L, H*K, D]
  ("layers", "mlp", "ffn_in", "kernel"): 1,  # [L, D, F]
  ("layers", "mlp", "ffn_gate", "kernel"): 1,
  ("layers", "mlp", "ffn_out", "kernel"): 2,  # [L, F, D]
}


def _config(**model):
  c = base.get_config()
  c.model.update(TINY)
  c.model.update(NGPT)
  c.model.tie_embeddings = False
  c.model.update(model)
  return c


def _build(**model) -> Transformer:
  return Transformer(model_config_from(_config(**model)), rngs=nnx.Rngs(params=0))


def _layer(model: Transformer, i: int):
  graphdef, state = nnx.split(model.layers)
  return nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))


def _np(a) -> np.ndarray:
  return np.asarray(a, np.float64)


def _unit(x, axis=-1):
  return x / np.linalg.norm(x, axis=axis, keepdims=True)


def _get(tree, path):
  for key in path:
    tree = tree[key]
  return tree


def _set_effective(scale: ngpt.Scale, value: np.ndarray) -> None:
  """Stores `value` as the factor's effective value (stored = value / restore)."""
  scale.s[...] = jnp.asarray(value / scale.restore, jnp.float32)


# --- the layer and the model against NumPy ---------------------------------------------------


def _np_rope(x, t):
  sin, cos = (_np(a)[None, :, None, :] for a in rope_tables(t, x.shape[-1]))
  x1, x2 = np.split(x, 2, axis=-1)
  return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _np_layer(
  layer, h, *, heads=2, softmax_scale=None, outer_norm=True, inner_norm=True, sv_d=True
):
  """One nGPT layer in NumPy; the keyword switches give the wrong formulas the test must reject."""
  a, m = layer.attn, layer.mlp
  w = {n: _np(getattr(a, n).kernel[...]) for n in ("q", "k", "v", "out")}
  b, t, d = h.shape
  kd = d // heads
  split = lambda y: y.reshape(b, t, heads, kd)
  q, k, v = (split(h @ w[n]) for n in ("q", "k", "v"))
  q, k = _np_rope(q, t), _np_rope(k, t)
  s_qk = _np(a.ngpt.s_qk()).reshape(heads, kd)
  q, k = _unit(q) * s_qk, _unit(k) * s_qk
  scale = math.sqrt(kd) if softmax_scale is None else softmax_scale
  s = np.einsum("bthk,bshk->bhts", q, k) * scale
  s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  attn = np.einsum("bhts,bshk->bthk", p, v).reshape(b, t, d) @ w["out"]

  def update(h, f, alpha):
    y = h + alpha * ((_unit(f) if inner_norm else f) - h)
    return _unit(y) if outer_norm else y

  h = update(h, attn, _np(layer.residuals["attn"].alpha()))
  u = (h @ _np(m.ffn_in.kernel[...])) * _np(m.ngpt.s_u())
  g = (h @ _np(m.ffn_gate.kernel[...])) * _np(m.ngpt.s_v()) * (math.sqrt(d) if sv_d else 1.0)
  f = (u * g / (1 + np.exp(-g))) @ _np(m.ffn_out.kernel[...])
  return update(h, f, _np(layer.residuals["ffn"].alpha()))


def test_ngpt_layer_matches_numpy():
  model = _build()
  layer = _layer(model, 1)
  rng = np.random.default_rng(0)
  # Every learnable factor away from its init, so a formula that drops one fails.
  _set_effective(layer.residuals["attn"].alpha, rng.uniform(0.2, 0.9, 8))
  _set_effective(layer.residuals["ffn"].alpha, rng.uniform(0.2, 0.9, 8))
  _set_effective(layer.attn.ngpt.s_qk, rng.uniform(0.5, 2.0, 8))
  _set_effective(layer.mlp.ngpt.s_u, rng.uniform(0.5, 2.0, 12))
  _set_effective(layer.mlp.ngpt.s_v, rng.uniform(0.5, 2.0, 12))
  x = _unit(rng.normal(size=(2, 5, 8))).astype(np.float32)  # the stream is on the sphere
  rope = rope_tables(5, 4)
  with jax.disable_jit():
    y = _np(layer(jnp.asarray(x), rope, jnp.int32(1))[0])
  expected = _np_layer(layer, _np(x))
  np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0, atol=1e-6)
  wrong = {
    "no outer Norm": dict(outer_norm=False),
    "no Norm of the branch": dict(inner_norm=False),
    "GPT's 1/sqrt(d_k)": dict(softmax_scale=0.5),
    "s_v without sqrt(d)": dict(sv_d=False),
  }
  for name, switch in wrong.items():
    assert np.abs(y - _np_layer(layer, _np(x), **switch)).max() > 1e-3, name


def test_ngpt_model_input_is_the_embedding_row_and_logits_are_scaled_by_s_z():
  model = _build(num_layers=2)
  rng = np.random.default_rng(1)
  s_z = rng.uniform(0.5, 3.0, 16)
  _set_effective(model.logit_scale.s_z, s_z)
  table = _np(model.embed.embedding[...])
  with jax.disable_jit():
    x0 = _np(model.embed_tokens(TOKENS))
    h, _ = model.run_stack(jnp.asarray(x0, jnp.float32), rope_tables(5, 4))
    logits = _np(model(TOKENS)[0])
  np.testing.assert_allclose(x0, table[np.asarray(TOKENS)], rtol=1e-6)  # no sqrt(d) factor
  np.testing.assert_allclose(np.linalg.norm(x0, axis=-1), 1.0, atol=1e-6)
  expected = (_np(h) @ _np(model.head.kernel[...])) * s_z  # no final norm: h is unit norm
  np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)
  assert model.final_norm is None


# --- init constants ---------------------------------------------------------------------------


def test_ngpt_init_constants_are_the_papers():
  model = _build(d_model=16, num_heads=4, d_ff=24)
  d = 16
  stored = {
    "alpha_A": (model.layers.residuals["attn"].alpha, 0.05, d**-0.5),
    "alpha_M": (model.layers.residuals["ffn"].alpha, 0.05, d**-0.5),
    "s_qk": (model.layers.attn.ngpt.s_qk, 1.0, d**-0.5),
    "s_u": (model.layers.mlp.ngpt.s_u, 1.0, 1.0),
    "s_v": (model.layers.mlp.ngpt.s_v, 1.0, 1.0),
    "s_z": (model.logit_scale.s_z, 1.0, d**-0.5),
  }
  for name, (scale, init, s_scale) in stored.items():
    np.testing.assert_allclose(_np(scale.s[...]), s_scale, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(_np(scale()), init, rtol=1e-6, err_msg=name)
  assert model.layers.attn.softmax_scale == pytest.approx(2.0)  # sqrt(d_k), d_k = 4
  assert model.embed_scale == 1.0
  params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  for path, axis in UNIT_AXES.items():
    norms = np.linalg.norm(_np(_get(params, path)), axis=axis)
    np.testing.assert_allclose(norms, 1.0, atol=1e-6, err_msg=str(path))
  custom = _build(ngpt_alpha_init=0.2)
  np.testing.assert_allclose(_np(custom.layers.residuals["ffn"].alpha()), 0.2, rtol=1e-6)


def test_ngpt_unit_norm_axes_are_the_embedding_axes():
  model_def = mdl.make_model_def(model_config_from(_config()))
  expected = {
    jax.tree_util.keystr(tuple(jax.tree_util.DictKey(k) for k in p)): a
    for p, a in UNIT_AXES.items()
  }
  assert ngpt.unit_norm_axes(model_def.param_specs) == expected


@pytest.mark.parametrize(
  "key, value",
  [
    ("norm_position", "pre"),
    ("position", "learned"),
    ("ffn_activation", "gelu"),
    ("qk_norm", True),
    ("block", "parallel"),
    ("final_norm", "true"),
    ("ngpt_alpha_init", 0.0),
  ],
)
def test_ngpt_refuses_what_it_is_not_defined_with(key, value):
  with pytest.raises(ValueError, match=f"model.{key}="):
    model_config_from(_config(**{key: value}))


# --- the weight projection: an optax transformation --------------------------------------------


def _toy():
  rng = np.random.default_rng(2)
  params = {
    "w": rng.normal(size=(3, 4)),
    "bias": rng.normal(size=(4,)),
    "sub": {"m": rng.normal(size=(2, 5))},
  }
  updates = jax.tree.map(lambda p: 0.3 * rng.normal(size=p.shape), params)
  as32 = lambda t: jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), t)
  return params, updates, as32(params), as32(updates)


def test_hypersphere_projection_on_a_toy_tree():
  params, updates, p32, u32 = _toy()
  tx = ngpt.hypersphere_projection({"['w']": 0, "['sub']['m']": 1})
  state = tx.init(p32)
  new_u, _ = tx.update(u32, state, p32)
  new_p = optax.apply_updates(p32, new_u)
  np.testing.assert_allclose(_np(new_p["w"]), _unit(params["w"] + updates["w"], 0), atol=1e-6)
  np.testing.assert_allclose(
    _np(new_p["sub"]["m"]), _unit(params["sub"]["m"] + updates["sub"]["m"], 1), atol=1e-6
  )
  np.testing.assert_array_equal(np.asarray(new_u["bias"]), np.asarray(u32["bias"]))  # untouched
  np.testing.assert_allclose(np.linalg.norm(_np(new_p["w"]), axis=0), 1.0, atol=1e-6)
  with pytest.raises(ValueError, match="params"):
    tx.update(u32, state)


def test_hypersphere_projection_chained_jitted_and_sharded():
  """After adam in one chain, under jit, with the normalized axis sharded over 8 devices."""
  params, updates, p32, u32 = _toy()
  params = {"w": np.tile(params["w"], (1, 2)), "bias": params["bias"]}  # [3, 8]
  p32 = {"w": jnp.asarray(params["w"], jnp.float32), "bias": p32["bias"]}
  grads = {"w": jnp.ones((3, 8)), "bias": jnp.ones((4,))}
  tx = optax.chain(optax.adam(0.5), ngpt.hypersphere_projection({"['w']": 1}))
  mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
  sharded = jax.device_put(p32["w"], jax.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "x")))
  p_sh = {"w": sharded, "bias": p32["bias"]}

  @jax.jit
  def step(p):
    u, _ = tx.update(grads, tx.init(p), p)
    return optax.apply_updates(p, u)

  got = step(p_sh)
  assert len(got["w"].sharding.device_set) == 8
  # adam's first step moves every entry by -lr * sign(grad) (up to eps).
  np.testing.assert_allclose(_np(got["w"]), _unit(params["w"] - 0.5, 1), atol=1e-5)
  np.testing.assert_allclose(_np(got["bias"]), params["bias"] - 0.5, atol=1e-5)


# --- the property the paper relies on: on the sphere after a step ------------------------------


@pytest.mark.parametrize(
  "opt",
  [
    dict(),  # the other two: the same property under more optimizer settings, in the long tier
    pytest.param(
      dict(name="adamw", weight_decay=0.1, clip_norm=1.0, schedule="cosine", warmup_steps=2),
      marks=pytest.mark.long,
    ),
    pytest.param(dict(freeze="embed,attn"), marks=pytest.mark.long),
  ],
  ids=["adam", "adamw-clip-cosine-warmup", "freeze"],
)
@pytest.mark.slow  # trains steps
def test_ngpt_step_keeps_weights_and_hidden_states_on_the_sphere(opt):
  config = _config()
  config.opt.lr = 3e-2  # a large step, so that weights visibly leave the sphere unprojected
  config.opt.update(opt)
  model_def = mdl.make_model_def(model_config_from(config))
  tokens = jax.random.randint(jax.random.key(3), (4, 9), 0, 16)
  batch = (tokens[:, :-1], tokens[:, 1:])

  def one_step(optimizer):
    params, model_state = mdl.init_model(model_def.cfg, 0)  # init_state refuses no projection
    state = ts.TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params), model_state)
    new, metrics = jax.jit(lambda s: ts.train_step(model_def, optimizer, s, batch))(state)
    assert np.isfinite(float(metrics["loss"]))
    return state.params, new.params

  before, after = one_step(make_optimizer(config.opt, 10, model_def))
  # The same step unprojected (one setting: a second compile each is slow on 2 cores).
  unprojected = one_step(make_optimizer(config.opt, 10))[1] if not opt else None
  frozen = {"embed", "attn"} if opt.get("freeze") else set()
  for path, axis in UNIT_AXES.items():
    w0, w1 = _np(_get(before, path)), _np(_get(after, path))
    np.testing.assert_allclose(np.linalg.norm(w1, axis=axis), 1.0, atol=1e-5, err_msg=str(path))
    is_frozen = path[0] in frozen or (len(path) > 1 and path[1] in frozen)
    if is_frozen:
      np.testing.assert_array_equal(w1, w0, err_msg=str(path))  # frozen means still
    else:
      assert np.abs(w1 - w0).max() > 1e-3, path  # it moved...
      if unprojected is not None:  # ...and would be off the sphere without the projection
        raw = _np(_get(unprojected, path))
        assert np.abs(np.linalg.norm(raw, axis=axis) - 1).max() > 1e-3, path
  # Hidden states after every layer, with the stepped weights: unit norm per token.
  model = nnx.merge(model_def.eval_graph, after, {})
  x = model.embed_tokens(tokens)
  rope = rope_tables(tokens.shape[1], 4)
  with jax.disable_jit():
    for i in range(model.cfg.num_layers):
      x, stats = _layer(model, i)(x, rope, jnp.int32(i))
      np.testing.assert_allclose(np.linalg.norm(_np(x), axis=-1), 1.0, atol=1e-5, err_msg=f"{i}")
      assert float(stats["stream_rms"]) == pytest.approx(8**-0.5, rel=1e-5)


def test_ngpt_state_refuses_an_optimizer_without_the_projection():
  config = _config()
  model_def = mdl.make_model_def(model_config_from(config))
  with pytest.raises(ValueError, match="make_optimizer"):
    jax.eval_shape(lambda: ts.init_state(model_def, make_optimizer(config.opt, 10), 0))
  jax.eval_shape(lambda: ts.init_state(model_def, make_optimizer(config.opt, 10, model_def), 0))


@pytest.mark.slow  # a 1000-layer model
def test_ngpt_1000_layers_finite_and_on_the_sphere_at_init():
  model = _build(num_layers=1000)
  logits, stats = model(TOKENS)
  assert np.all(np.isfinite(np.asarray(logits)))
  np.testing.assert_allclose(np.asarray(stats["layers"]["stream_rms"]), 8**-0.5, rtol=1e-5)
