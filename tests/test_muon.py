"""opt.name=muon and opt.name=adam_atan2 against NumPy references of their updates on the tiny
model's parameters: Muon's Nesterov momentum orthogonalized per layer matrix by the quintic
Newton-Schulz iteration with its shape factor (Moonlight's and KellerJordan's), Adam on every
other leaf; Adam-atan2's a atan2(m_hat, b sqrt(v_hat)). How each composes with the depth and
width parametrizations, or is refused in one line.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from numpy_adam import np_adam

from configs import base
from conftest import tiny_config
from resnorm_jax.model import depth_param
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.train.optimizers.adam_atan2 import ATAN2_A
from resnorm_jax.train.optimizers.build import make_optimizer
from resnorm_jax.train.optimizers.masks import decay_mask, hidden_matrix_mask

NS = (3.4445, -4.7750, 2.0315)  # KellerJordan/Muon's quintic coefficients
SHAPE = dict(vocab_size=8, num_layers=2, d_model=8, num_heads=2, d_ff=16, max_seq_len=8)


def _opt(**overrides):
  cfg = base.get_config().opt
  for key, value in overrides.items():
    setattr(cfg, key, value)
  return cfg


def _params(**model):
  cfg = tiny_config(SHAPE, **model)
  return nnx.state(Transformer(cfg, rngs=nnx.Rngs(params=0)), nnx.Param), cfg


def _leaves(tree) -> dict[str, np.ndarray]:
  flat = jax.tree_util.tree_leaves_with_path(tree)
  return {jax.tree_util.keystr(p): np.asarray(x, np.float64) for p, x in flat}


def _grads(params, seed: int):
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda p: jnp.asarray(rng.normal(0, 1, p.shape), jnp.float32), params)


def _np_orthogonalize(m: np.ndarray, steps: int = 5) -> np.ndarray:
  """KellerJordan/Muon's zeropower_via_newtonschulz5 in float64: X / ||X||_F, the wide side
  last, then X <- a X + (b A + c A^2) X with A = X X^T."""
  x = m.T if m.shape[0] > m.shape[1] else m
  x = x / (np.linalg.norm(x) + 1e-8)
  a, b, c = NS
  for _ in range(steps):
    gram = x @ x.T
    x = a * x + (b * gram + c * gram @ gram) @ x
  return x.T if m.shape[0] > m.shape[1] else x


def _np_muon(grads, lr, beta, scale, wd, p0):
  """Muon (optax's momentum: Nesterov with bias correction) on one stacked [L, in, out] leaf
  over len(grads) steps, each layer's matrix on its own; returns the summed updates."""
  mu, p = np.zeros_like(p0), p0.copy()
  for t, g in enumerate(grads, start=1):
    mu = beta * mu + (1 - beta) * g
    nesterov = beta * mu / (1 - beta ** (t + 1)) + (1 - beta) * g / (1 - beta**t)
    _, fan_in, fan_out = g.shape
    if scale == "moonlight":
      factor = 0.2 * math.sqrt(max(fan_in, fan_out))
    else:
      factor = math.sqrt(max(1.0, fan_out / fan_in))
    step = np.stack([_np_orthogonalize(m) for m in nesterov]) * factor
    p = p - lr * (step + wd * p)
  return p - p0


def _run(tx, params, grads_list):
  state, total = tx.init(params), jax.tree.map(jnp.zeros_like, params)
  for grads in grads_list:
    updates, state = tx.update(grads, state, params)
    params = optax_apply(params, updates)
    total = jax.tree.map(jnp.add, total, updates)
  return _leaves(total)


def optax_apply(params, updates):
  return jax.tree.map(jnp.add, params, updates)


@pytest.mark.parametrize("scale, wd", [("moonlight", 0.0), ("kellerjordan", 0.1)])
def test_muon_two_steps_match_numpy_muon_on_matrices_and_adam_elsewhere(scale, wd):
  params, _ = _params(norm_position="pre")
  cfg = _opt(name="muon", lr=0.01, muon_scale=scale, weight_decay=wd, eps=1e-8)
  grads = [_grads(params, 1), _grads(params, 2)]
  got = _run(make_optimizer(cfg, 10), params, grads)
  p0, gs = _leaves(params), [_leaves(g) for g in grads]
  hidden = _leaves(hidden_matrix_mask(params))
  decayed = _leaves(decay_mask(params))
  assert {k for k, h in hidden.items() if h} == {
    f"['layers']['{m}']['{n}']['kernel'].value"
    for m, n in [("attn", "q"), ("attn", "k"), ("attn", "v"), ("attn", "out")]
    + [("mlp", "ffn_in"), ("mlp", "ffn_out")]
  }
  for key, p in p0.items():
    series = [g[key] for g in gs]
    w = wd if decayed[key] else 0.0
    if hidden[key]:
      want = _np_muon(series, 0.01, 0.95, scale, w, p)
    else:  # Adam with the decoupled decay (adamw's form)
      want = np_adam(series, p, 0.01, 1e-8, 0.9, 0.98, w, True)
    np.testing.assert_allclose(got[key], want, rtol=2e-4, atol=2e-6, err_msg=key)


def test_muon_update_of_a_layer_matrix_is_orthogonal_up_to_its_scale():
  params, _ = _params(norm_position="pre")
  tx = make_optimizer(_opt(name="muon", lr=1.0, muon_scale="kellerjordan"), 10)
  updates, _ = tx.update(_grads(params, 3), tx.init(params), params)
  q = -np.asarray(updates["layers"]["attn"]["q"]["kernel"][...], np.float64)  # [L, 8, 8]
  ffn_in = -np.asarray(updates["layers"]["mlp"]["ffn_in"]["kernel"][...], np.float64)  # 8x16
  for layer in range(2):  # singular values near 1 (the quintic's band, 0.5 to 1.5 or so)
    s = np.linalg.svd(q[layer], compute_uv=False)
    assert 0.3 < s.min() and s.max() < 1.5, s
    s = np.linalg.svd(ffn_in[layer], compute_uv=False) / math.sqrt(16 / 8)
    assert 0.3 < s.min() and s.max() < 1.5, s
  # Each layer is orthogonalized on its own: not the stacked [16, 8] matrix's factors.
  stacked = _np_orthogonalize(np.concatenate([*q], 0))
  assert np.abs(stacked[:8] - q[0]).max() > 1e-2


def test_muon_adam_lr_ratio_scales_only_the_adam_group():
  params, _ = _params(norm_position="pre")
  grads = _grads(params, 4)
  one = _run(make_optimizer(_opt(name="muon"), 10), params, [grads])
  ratio = _run(make_optimizer(_opt(name="muon", muon_adam_lr_ratio=0.1), 10), params, [grads])
  hidden = _leaves(hidden_matrix_mask(params))
  for key in one:
    np.testing.assert_allclose(ratio[key], one[key] * (1.0 if hidden[key] else 0.1), rtol=1e-5)


def test_muon_composes_with_depth_parametrizations_and_refuses_mup():
  params, cfg = _params(norm_position="pre", depth_param="depth_mup", base_depth=1)
  model_def = mdl.make_model_def(cfg)
  grads = _grads(params, 5)
  muon = _opt(name="muon")
  with_rule = _run(make_optimizer(muon, 10, model_def), params, [grads])
  plain_params, plain_cfg = _params(norm_position="pre")
  plain = _run(make_optimizer(muon, 10, mdl.make_model_def(plain_cfg)), params, [grads])
  factor = depth_param.hidden_lr_factor(cfg)  # m_L^-1/2 at 2 layers against 1
  assert factor == pytest.approx(2**-0.5)
  key = "['layers']['attn']['q']['kernel'].value"
  np.testing.assert_allclose(with_rule[key], plain[key] * factor, rtol=1e-4)
  _, wide = _params(norm_position="pre", width_param="mup", base_width=4)
  with pytest.raises(
    ValueError, match=r"opt\.name='muon' with model\.width_param='mup'.*adam_atan2"
  ):
    make_optimizer(muon, 10, mdl.make_model_def(wide))
  make_optimizer(_opt(name="adam_atan2"), 10, mdl.make_model_def(wide))  # composes


@pytest.mark.parametrize(
  "overrides, pattern",
  [
    ({"muon_scale": "spectral"}, r"opt\.muon_scale='spectral'.*moonlight, kellerjordan"),
    ({"muon_momentum": 1.0}, r"opt\.muon_momentum=1\.0"),
    ({"muon_ns_steps": 0}, r"opt\.muon_ns_steps=0"),
    ({"muon_adam_lr_ratio": 0.0}, r"opt\.muon_adam_lr_ratio=0\.0"),
  ],
)
def test_muon_bad_values_are_refused(overrides, pattern):
  with pytest.raises(ValueError, match=pattern):
    make_optimizer(_opt(name="muon", **overrides), 10)


def _np_adam_atan2(grads, p0, lr, b1, b2, wd):
  m = v = np.zeros_like(p0)
  p = p0.copy()
  for t, g in enumerate(grads, start=1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    p = p - lr * (1.2732395 * np.arctan2(m_hat, np.sqrt(v_hat)) + wd * p)
  return p - p0


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_atan2_matches_numpy(wd):
  params, _ = _params(norm_position="pre")
  grads = [_grads(params, 6), _grads(params, 7)]
  grads[1] = jax.tree.map(lambda g: g * 1e-3, grads[1])  # a small second step: atan2 matters
  got = _run(make_optimizer(_opt(name="adam_atan2", lr=0.01, weight_decay=wd), 10), params, grads)
  decayed = _leaves(decay_mask(params))
  for key, p in _leaves(params).items():
    series = [_leaves(g)[key] for g in grads]
    want = _np_adam_atan2(series, p, 0.01, 0.9, 0.98, wd if decayed[key] else 0.0)
    np.testing.assert_allclose(got[key], want, rtol=1e-5, atol=1e-7, err_msg=key)
  assert ATAN2_A == pytest.approx(1.2732395)


def test_adam_atan2_step_ignores_the_gradients_scale():
  params, _ = _params(norm_position="pre")
  grads = _grads(params, 8)
  tx = make_optimizer(_opt(name="adam_atan2"), 10)
  a, _ = tx.update(grads, tx.init(params), params)
  b, _ = tx.update(jax.tree.map(lambda g: g * 1e-12, grads), tx.init(params), params)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5)
