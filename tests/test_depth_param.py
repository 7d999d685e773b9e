"""Depth parametrizations (resnorm_jax/model/depth_param.py): the branch multiplier, the
per-group Adam lr and eps and the init against formulas written out here, sp's run unchanged
at L == base_depth, the refused combinations, and the coordinate check's effect."""

import math
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from numpy_adam import np_adam

from configs import base
from conftest import ROOT, tiny_config, tiny_model
from resnorm_jax.model import depth_param
from resnorm_jax.model import model_def as mdl
from resnorm_jax.probes import coord_check
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer
from resnorm_jax.train.optimizers.group_table import format_group_table, group_table
from resnorm_jax.train.optimizers.masks import decay_mask

ALPHA = {"sp": 0.0, "depth_mup": 0.5, "completep": 1.0}  # the papers' exponents
DEPTHS = [(4, 2), (12, 3)]  # (L, L_base): m_L = 2 and 4
X = np.random.default_rng(0).normal(0.5, 2.0, (2, 4, 8)).astype(np.float32)


@pytest.mark.parametrize("name", list(ALPHA))
@pytest.mark.parametrize("depth, base_depth", DEPTHS)
def test_multiplier_lr_and_eps_factors_are_the_formulas(name, depth, base_depth):
  cfg = tiny_config(num_layers=depth, base_depth=base_depth, depth_param=name)
  m, a = depth / base_depth, ALPHA[name]
  # sp is the parametrization off (no factor at all), not alpha = 0 of the table, which
  # would still scale the hidden lr by 1/m_L.
  lr = 1.0 if name == "sp" else m ** (a - 1)
  assert depth_param.branch_multiplier(cfg) == pytest.approx(m**-a, rel=1e-12)
  assert depth_param.hidden_lr_factor(cfg) == pytest.approx(lr, rel=1e-12)
  assert depth_param.hidden_eps_factor(cfg) == pytest.approx(m**-a, rel=1e-12)
  at_base = tiny_config(num_layers=base_depth, base_depth=base_depth, depth_param=name)
  assert depth_param.branch_multiplier(at_base) == 1.0
  assert depth_param.hidden_lr_factor(at_base) == 1.0
  assert not depth_param.active(at_base)


def _ln(x, eps=1e-5):
  x = np.asarray(x, np.float64)
  mu = x.mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _reference_block(position, parallel, skip, m, gate, attn, ffn, x):
  """The placements with a branch multiplier m and a gate g on F, NumPy LayerNorm at init:
  post N(a x + m g F(x)), pre a x + m g F(N(x)), peri a x + m g N(F(N(x))), none a x + m g F(x)."""

  def sub(x, f):
    if position == "post":
      return _ln(skip * x + m * gate * f(x))
    if position == "pre":
      return skip * x + m * gate * f(_ln(x))
    if position == "peri":
      return skip * x + m * gate * _ln(f(_ln(x)))
    return skip * x + m * gate * f(x)

  if parallel:
    return sub(x, lambda h: attn(h) + ffn(h))
  return sub(sub(x, attn), ffn)


@pytest.mark.parametrize(
  "position, block, residual, name",
  [
    ("pre", "sequential", "add", "completep"),
    ("pre", "parallel", "add", "depth_mup"),
    ("post", "sequential", "add", "completep"),
    ("peri", "sequential", "add", "depth_mup"),
    ("none", "sequential", "add", "completep"),
    ("post", "sequential", "deepnorm", "completep"),
    ("pre", "sequential", "scaled", "depth_mup"),
    ("pre", "sequential", "layerscale", "completep"),
  ],
)
def test_every_placement_multiplies_its_branches(position, block, residual, name):
  depth, base_depth = 8, 2  # m_L = 4
  model = tiny_model(
    norm_position=position,
    block=block,
    residual=residual,
    num_layers=depth,
    base_depth=base_depth,
    depth_param=name,
    layerscale_init=0.3,
  )
  cfg = model.cfg
  graphdef, state = nnx.split(model.layers)
  layer = nnx.merge(graphdef, jax.tree.map(lambda a: a[1], state))
  m = (depth / base_depth) ** -ALPHA[name]
  # DeepNorm's skip weight and the scaled residual's s are taken at the base depth.
  skip = (2 * base_depth) ** 0.25 if residual == "deepnorm" else 1.0
  gate = {"scaled": 1 / math.sqrt(2 * base_depth), "layerscale": 0.3}.get(residual, 1.0)
  with jax.disable_jit():
    y = np.asarray(layer(jnp.asarray(X), None, jnp.int32(1))[0])
    attn = lambda h: np.asarray(layer.attn(jnp.asarray(h, jnp.float32)), np.float64)
    ffn = lambda h: np.asarray(layer.mlp(jnp.asarray(h, jnp.float32)), np.float64)
    expected = _reference_block(position, block == "parallel", skip, m, gate, attn, ffn, X)
    without = _reference_block(position, block == "parallel", skip, 1.0, gate, attn, ffn, X)
  assert cfg.residual_alpha == pytest.approx(skip) or residual != "deepnorm"
  np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
  assert np.abs(y - without).max() > 1e-2  # the multiplier is visible


@pytest.mark.parametrize("depth", [4, 16])
def test_depth_constants_are_the_base_depths_under_a_parametrization(depth):
  base_depth = 2
  for name in ("depth_mup", "completep"):
    cfg = tiny_config(num_layers=depth, base_depth=base_depth, depth_param=name)
    assert cfg.residual_alpha == pytest.approx((2 * base_depth) ** 0.25)
    assert cfg.init_beta == pytest.approx((8 * base_depth) ** -0.25)
    assert cfg.branch_scale == pytest.approx(1 / math.sqrt(2 * base_depth))
    magneto = tiny_config(num_layers=depth, base_depth=base_depth, depth_param=name, init="magneto")
    assert magneto.init_beta == pytest.approx(math.sqrt(math.log(2 * base_depth)))
  sp = tiny_config(num_layers=depth, base_depth=base_depth)
  assert sp.residual_alpha == pytest.approx((2 * depth) ** 0.25)
  assert sp.init_beta == pytest.approx((8 * depth) ** -0.25)


def test_gpt2_init_std_has_no_depth_factor_beyond_the_base_depth():
  shape = dict(vocab_size=16, num_layers=16, d_model=32, num_heads=2, d_ff=32, max_seq_len=16)
  base_depth = 2
  for name, n in (("sp", 16), ("completep", base_depth), ("depth_mup", base_depth)):
    cfg = tiny_config(shape, init="gpt2", base_depth=base_depth, depth_param=name)
    params, _ = mdl.init_model(cfg, 0)
    out = np.asarray(params["layers"]["attn"]["out"]["kernel"])
    q = np.asarray(params["layers"]["attn"]["q"]["kernel"])
    assert out.std() == pytest.approx(0.02 / math.sqrt(2 * n), rel=0.03), name
    assert q.std() == pytest.approx(0.02, rel=0.03), name


def _model_def(name, depth, base_depth, **model):
  cfg = tiny_config(num_layers=depth, base_depth=base_depth, depth_param=name, **model)
  return mdl.make_model_def(cfg), cfg


def _opt(**overrides):
  cfg = base.get_config().opt
  for key, value in overrides.items():
    setattr(cfg, key, value)
  return cfg


@pytest.mark.parametrize("name", ["depth_mup", "completep"])
@pytest.mark.parametrize("depth, base_depth", DEPTHS)
@pytest.mark.parametrize("opt_name, wd", [("adam", 0.0), ("adamw", 0.1), ("adam", 0.01)])
def test_per_group_lr_and_eps_match_numpy_adam(name, depth, base_depth, opt_name, wd):
  model_def, cfg = _model_def(name, depth, base_depth)
  # eps near the gradients' size, so a wrong eps factor moves the update visibly.
  opt_cfg = _opt(name=opt_name, lr=0.01, eps=3e-3, weight_decay=wd)
  optimizer = make_optimizer(opt_cfg, 10, model_def)
  params, _ = mdl.init_model(cfg, 0)
  rng = np.random.default_rng(1)
  grads = [jax.tree.map(lambda p: rng.normal(0, 3e-3, p.shape).astype(np.float32), params)]
  grads.append(jax.tree.map(lambda p: rng.normal(0, 3e-3, p.shape).astype(np.float32), params))
  state, current = optimizer.init(params), params
  for g in grads:
    updates, state = optimizer.update(g, state, current)
    current = optax.apply_updates(current, updates)
  m, a = depth / base_depth, ALPHA[name]
  decayed = decay_mask(params)
  flat = jax.tree_util.tree_leaves_with_path(params)
  for (path, p0), p1, dec, *gs in zip(
    flat,
    jax.tree.leaves(current),
    jax.tree.leaves(decayed),
    *[jax.tree.leaves(g) for g in grads],
    strict=True,
  ):
    hidden = jax.tree_util.keystr(path).startswith("['layers']")
    lr = 0.01 * (m ** (a - 1) if hidden else 1.0)
    eps = 3e-3 * (m**-a if hidden else 1.0)
    expected = np_adam(
      gs, np.asarray(p0), lr, eps, 0.9, 0.98, wd if dec else 0.0, opt_name == "adamw"
    )
    got = np.asarray(p1, np.float64) - np.asarray(p0, np.float64)
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=1e-7, err_msg=str(path))


def test_group_table_lists_each_leafs_lr_eps_decay_and_init():
  model_def, cfg = _model_def("completep", 8, 2)
  opt_cfg = _opt(name="adamw", lr=0.01, eps=1e-8, weight_decay=0.1)
  params, _ = mdl.init_model(cfg, 0)
  rows = {r["param"]: r for r in group_table(opt_cfg, cfg, params)}
  q = rows["layers.attn.q.kernel"]
  assert (q["group"], q["branch_multiplier"]) == ("hidden", 0.25)
  assert q["lr"] == pytest.approx(0.01) and q["eps"] == pytest.approx(0.25e-8)
  assert q["weight_decay"] == 0.1
  assert q["init_std"] == pytest.approx(np.asarray(params["layers"]["attn"]["q"]["kernel"]).std())
  gain = rows["layers.norms.attn.scale"]
  assert gain["weight_decay"] == 0.0 and gain["init_mean"] == 1.0 and gain["init_std"] == 0.0
  emb = rows["embed.embedding"]
  assert (emb["group"], emb["lr"], emb["eps"]) == ("outside", 0.01, 1e-8)
  text = format_group_table(cfg, list(rows.values()))
  assert "depth_param=completep (alpha 1)" in text and "m_L 4" in text
  assert len(text.splitlines()) == len(rows) + 2


@pytest.mark.slow  # compiles for seconds: out of the fast tier
@pytest.mark.parametrize("name", ["depth_mup", "completep"])
def test_at_the_base_depth_the_run_is_sps_bit_for_bit(name):
  batch = (jnp.arange(16, dtype=jnp.int32).reshape(2, 8) % 8,) * 2
  out = {}
  for param in ("sp", name):
    model_def, cfg = _model_def(param, 4, 4, norm_position="pre")
    optimizer = make_optimizer(_opt(eps=1e-3), 10, model_def)
    state = ts.init_state(model_def, optimizer, 0)
    step = jax.jit(lambda s, b, md=model_def, o=optimizer: ts.train_step(md, o, s, b))
    for _ in range(2):
      state, metrics = step(state, batch)
    out[param] = (state.params, float(metrics["loss"]))
  jax.tree.map(np.testing.assert_array_equal, out["sp"][0], out[name][0])
  assert out["sp"][1] == out[name][1]


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_sp_ignores_base_depth():
  a = tiny_model(num_layers=4, base_depth=2, norm_position="pre", init="gpt2")
  b = tiny_model(num_layers=4, base_depth=6, norm_position="pre", init="gpt2")
  tokens = jnp.arange(8, dtype=jnp.int32)[None]
  with jax.disable_jit():
    np.testing.assert_array_equal(np.asarray(a(tokens)[0]), np.asarray(b(tokens)[0]))


@pytest.mark.parametrize(
  "model, why",
  [
    (dict(residual="none"), "no skip path"),
    (dict(residual="hyperconn", norm_position="pre"), "learns the skip path"),
    (dict(residual="admin"), "init stage"),
  ],
)
def test_refused_combinations_name_the_value_and_the_choices(model, why):
  tiny_config(depth_param="sp", **model)  # fine under sp
  with pytest.raises(ValueError, match=why) as err:
    tiny_config(depth_param="completep", **model)
  assert f"model.residual={model['residual']!r}" in str(err.value)
  assert "model.depth_param='completep'" in str(err.value)


def test_unknown_name_bad_base_depth_and_sgd_are_refused():
  with pytest.raises(ValueError, match=r"model\.depth_param='mup'.*sp, depth_mup, completep"):
    tiny_config(depth_param="mup")
  with pytest.raises(ValueError, match=r"model\.base_depth=0"):
    tiny_config(base_depth=0)
  model_def, _ = _model_def("completep", 4, 2)
  with pytest.raises(ValueError, match=r"opt\.name='sgd'.*Adam"):
    make_optimizer(_opt(name="sgd"), 10, model_def)
  make_optimizer(_opt(name="sgd"), 10, _model_def("completep", 2, 2)[0])  # m_L = 1


@pytest.mark.slow  # a process of its own
def test_train_refuses_a_bad_combination_with_one_line_and_exit_2():
  cmd = [sys.executable, "-m", "experiments.train", "--config=configs/smoke.py"]
  cmd += ["--config.model.residual=none", "--config.model.depth_param=completep"]
  cmd += ["--workdir=/nonexistent/never-written"]
  r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert r.returncode == 2, r.stderr
  lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
  assert len(lines) == 1 and "model.depth_param='completep'" in lines[0], r.stderr


def test_spread_is_the_largest_over_the_smallest_across_depths():
  rows = [
    dict(depth_param="sp", depth=d, seed=s, step=1, role="stream", layer=layer, rms=v, update=u)
    for d, s, layer, v, u in [
      (2, 0, 0, 1.0, 0.1),
      (2, 0, 1, 3.0, 0.3),  # layer means at L=2: rms 2, update 0.2; last layer 3, 0.3
      (2, 1, 0, 1.0, 0.1),
      (2, 1, 1, 3.0, 0.3),
      (4, 0, 0, 2.0, 0.5),
      (4, 0, 3, 6.0, 0.9),  # at L=4: rms 4, update 0.7; last layer 6, 0.9
    ]
  ]
  summary = {(r["depth"], r["role"]): r for r in coord_check.summarize(rows)}
  assert summary[(2, "stream")]["rms"] == pytest.approx(2.0)
  assert summary[(4, "stream_last")]["update"] == pytest.approx(0.9)
  table = {(r["role"], r["quantity"]): r for r in coord_check.spread(list(summary.values()), 1)}
  assert table[("stream", "update")]["spread"] == pytest.approx(0.7 / 0.2)
  assert table[("stream_last", "rms")]["spread"] == pytest.approx(2.0)
  assert table[("stream_last", "update")]["L2"] == pytest.approx(0.3)


@pytest.mark.slow  # trains 4 small models a few steps (about 45 CPU-seconds)
@pytest.mark.long  # a coord check over depths
def test_coord_check_stream_update_flat_in_depth_under_completep_growing_under_sp():
  from configs import smoke

  c = smoke.get_config()
  c.model.norm_position, c.model.base_depth = "pre", 2
  rows = coord_check.experiment(c, ["sp", "completep"], [2, 8], [0], 3)
  table = coord_check.spread(coord_check.summarize(rows), 3)
  spread = {(r["depth_param"], r["role"]): r["spread"] for r in table if r["quantity"] == "update"}
  # Measured: sp 6.5 (stream) and 3.3 (logits), completep 1.31 and 1.05.
  assert spread[("sp", "stream_last")] > 3.0 and spread[("sp", "logits")] > 2.0
  assert spread[("completep", "stream_last")] < 1.6 and spread[("completep", "logits")] < 1.3


def test_the_recorded_group_table_is_not_config():
  """config.json's depth_param_table (written by the loop for depth_mup / completep runs) is a
  record of the run: a resume or a sweep compares the config without it."""
  from configs import base
  from resnorm_jax.config import same_experiment as se

  c = base.get_config().to_dict()
  recorded = {**c, "depth_param_table": [{"param": "layers.attn.q.kernel", "lr": 1e-3}]}
  for policy in (se.SWEEP, se.WORKDIR):
    assert se.changed_keys(recorded, c, policy) == []
