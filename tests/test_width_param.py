"""muP's width rules (resnorm_jax/model/width_param.py) beside the depth parametrization: the
per-parameter table's lr, eps and weight decay and the measured init std against formulas
written out here, the optimizer against NumPy Adam, the logits' 1/m_d, the 1/d_head
attention, mup at m_d = 1 against sp, the refused values and combinations, and a training
run from the command line."""

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from numpy_adam import np_adam

from configs import base
from conftest import tiny_config
from resnorm_jax.config import same_experiment as se
from resnorm_jax.model import attention as attention_lib
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model import width_param
from resnorm_jax.model.transformer import Transformer, init_rule
from resnorm_jax.train.optimizers.build import make_optimizer
from resnorm_jax.train.optimizers.group_table import format_group_table, group_table
from resnorm_jax.train.resume_policy import CHECKPOINT

ALPHA = {"sp": 0.0, "depth_mup": 0.5, "completep": 1.0}
DEPTHS = [(4, 2), (8, 2)]  # (L, L_base): m_L = 2 and 4
BASE_WIDTH = 32
WIDTHS = [32, 64]  # m_d = 1 and 2


def _shape(d_model, num_layers=2, d_ff=None):
  d_ff = d_model if d_ff is None else d_ff
  return dict(
    vocab_size=16,
    num_layers=num_layers,
    d_model=d_model,
    num_heads=2,
    d_ff=d_ff,
    max_seq_len=16,
  )


def _opt(**overrides):
  cfg = base.get_config().opt
  for key, value in overrides.items():
    setattr(cfg, key, value)
  return cfg


def _expected(name, depth, base_depth, d_model):
  """(lr, eps, decay) factors of (hidden matrix, hidden vector, outside) from the formulas."""
  m_l, a, m_d = depth / base_depth, ALPHA[name], d_model / BASE_WIDTH
  depth_lr = 1.0 if name == "sp" else m_l ** (a - 1)  # sp: no factor at all (depth_param.py)
  depth_eps = m_l**-a
  return {
    "matrix": (depth_lr / m_d, depth_eps / m_d, m_d),
    "vector": (depth_lr, depth_eps / m_d, 1.0),
    "outside": (1.0, 1.0 / m_d, 1.0),
  }


@pytest.mark.parametrize("name", list(ALPHA))
@pytest.mark.parametrize("depth, base_depth", DEPTHS)
@pytest.mark.parametrize("d_model", WIDTHS)
def test_table_lr_eps_decay_and_init_std_are_the_formulas(name, depth, base_depth, d_model):
  cfg = tiny_config(
    _shape(d_model, depth),
    init="normal",
    norm_position="pre",
    depth_param=name,
    base_depth=base_depth,
    width_param="mup",
    base_width=BASE_WIDTH,
  )
  opt_cfg = _opt(name="adamw", lr=0.01, eps=1e-8, weight_decay=0.1)
  params, _ = mdl.init_model(cfg, 0)
  rows = group_table(opt_cfg, cfg, params)
  factors = _expected(name, depth, base_depth, d_model)
  m_d = d_model / BASE_WIDTH
  decayed = {"embed.embedding", "pos_embed.embedding"}
  kinds = set()
  for r in rows:
    kind = r["kind"]
    kinds.add(kind)
    kernel = r["param"].startswith("layers.") and r["param"].endswith(".kernel")
    assert (kind == "matrix") == kernel, r["param"]
    assert (kind == "outside") == (not r["param"].startswith("layers.")), r["param"]
    lr, eps, decay = factors[kind]
    assert r["lr"] == pytest.approx(0.01 * lr, rel=1e-12), r["param"]
    assert r["eps"] == pytest.approx(1e-8 * eps, rel=1e-12), r["param"]
    wd = 0.1 * decay if kind == "matrix" or r["param"] in decayed else 0.0
    assert r["weight_decay"] == pytest.approx(wd, rel=1e-12), r["param"]
    if kind == "matrix":  # normal init: sigma / sqrt(m_d)
      assert r["init_std"] == pytest.approx(0.02 / math.sqrt(m_d), rel=0.05), r["param"]
  assert kinds == {"matrix", "vector", "outside"}
  stds = {r["param"]: r["init_std"] for r in rows}
  q = np.asarray(params["layers"]["attn"]["q"]["kernel"])
  assert stds["layers.attn.q.kernel"] == pytest.approx(float(q.std()), rel=1e-5)
  assert stds["embed.embedding"] == pytest.approx(0.02, rel=0.05)  # embeddings: unchanged
  text = format_group_table(cfg, rows)
  assert (
    f"width_param=mup, d_model {d_model} against base_width={BASE_WIDTH} (m_d {m_d:g})"
    in (text.splitlines()[0])
  )
  assert len(text.splitlines()) == len(rows) + 2


def test_fan_in_rules_take_their_base_width_std_over_sqrt_m_d():
  d_model, m_d = 64, 2.0
  cfg = tiny_config(
    _shape(d_model, 4, d_ff=4 * d_model),
    init="deepnorm",
    residual="deepnorm",
    tie_embeddings=False,
    width_param="mup",
    base_width=BASE_WIDTH,
  )
  params, _ = mdl.init_model(cfg, 0)
  beta = cfg.init_beta
  layers = params["layers"]
  std = lambda a: float(np.asarray(a).std())
  xavier_base = lambda fi, fo: math.sqrt(2 / (fi / m_d + fo / m_d))
  # sigma at the base width, then m_d^-1/2: xavier at the real width; beta still multiplies.
  assert std(layers["attn"]["q"]["kernel"]) == pytest.approx(
    xavier_base(64, 64) / math.sqrt(m_d), rel=0.03
  )
  assert std(layers["attn"]["v"]["kernel"]) == pytest.approx(
    beta * xavier_base(64, 64) / math.sqrt(m_d), rel=0.03
  )
  assert std(layers["mlp"]["ffn_in"]["kernel"]) == pytest.approx(
    beta * math.sqrt(2 / (64 + 256)), rel=0.03
  )
  # The untied head and the embeddings: their base-width std (fans and d at base_width).
  assert std(params["head"]["kernel"]) == pytest.approx(math.sqrt(2 / (32 + 16)), rel=0.1)
  assert std(params["embed"]["embedding"]) == pytest.approx(BASE_WIDTH**-0.5, rel=0.1)
  rule = init_rule(cfg)
  assert rule.embed_scale() == pytest.approx(math.sqrt(BASE_WIDTH))


def test_the_gated_residuals_gate_is_a_hidden_matrix():
  cfg = tiny_config(
    _shape(64, 2), residual="gated", norm_position="pre", width_param="mup", base_width=16
  )
  params, _ = mdl.init_model(cfg, 0)
  rows = {r["param"]: r for r in group_table(_opt(lr=0.01), cfg, params)}
  gate = rows["layers.residuals.attn.gate"]
  assert gate["kind"] == "matrix" and gate["lr"] == pytest.approx(0.01 / 4)
  assert gate["init_std"] == pytest.approx(0.02 / 2, rel=0.05)
  assert rows["layers.residuals.attn.gate_bias"]["kind"] == "vector"


@pytest.mark.parametrize("name", ["sp", "completep"])
@pytest.mark.parametrize("opt_name, wd", [("adamw", 0.1), ("adam", 0.01)])
def test_optimizer_matches_numpy_adam_with_the_tables_lr_eps_and_decay(name, opt_name, wd):
  cfg = tiny_config(
    _shape(64, 4),
    norm_position="pre",
    depth_param=name,
    base_depth=2,
    width_param="mup",
    base_width=BASE_WIDTH,
  )
  model_def = mdl.make_model_def(cfg)
  # eps near the gradients' size, so a wrong eps factor moves the update visibly.
  opt_cfg = _opt(name=opt_name, lr=0.01, eps=3e-3, weight_decay=wd)
  optimizer = make_optimizer(opt_cfg, 10, model_def)
  params, _ = mdl.init_model(cfg, 0)
  rows = group_table(opt_cfg, cfg, params)
  rng = np.random.default_rng(1)
  grads = [
    jax.tree.map(lambda p: rng.normal(0, 3e-3, p.shape).astype(np.float32), params)
    for _ in range(2)
  ]
  state, current = optimizer.init(params), params
  for g in grads:
    updates, state = optimizer.update(g, state, current)
    current = optax.apply_updates(current, updates)
  flat = jax.tree_util.tree_leaves_with_path(params)
  trees = [jax.tree.leaves(current), rows, *[jax.tree.leaves(g) for g in grads]]
  leaves = zip(flat, *trees, strict=True)
  for (path, p0), p1, row, *gs in leaves:
    assert row["param"] in jax.tree_util.keystr(path).replace("']['", ".")
    expected = np_adam(
      gs, np.asarray(p0), row["lr"], row["eps"], 0.9, 0.98, row["weight_decay"], opt_name == "adamw"
    )
    got = np.asarray(p1, np.float64) - np.asarray(p0, np.float64)
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=1e-7, err_msg=str(path))


def _model(cfg, seed=0):
  return Transformer(cfg, rngs=nnx.Rngs(params=seed))


def test_logits_carry_one_over_m_d():
  kw = dict(init="normal", norm_position="pre", width_param="mup")
  wide = _model(tiny_config(_shape(32), base_width=8, **kw))  # m_d = 4
  at_base = _model(tiny_config(_shape(32), base_width=32, **kw))  # m_d = 1, same shapes
  nnx.update(at_base, nnx.state(wide))  # the same weights: only the multiplier differs
  tokens = jnp.arange(16, dtype=jnp.int32)[None] % 16
  with jax.disable_jit():
    got = np.asarray(wide(tokens)[0])
    without = np.asarray(at_base(tokens)[0])
  np.testing.assert_allclose(got, without / 4, rtol=1e-6, atol=1e-7)
  assert np.abs(without).max() > 0.1


def _np_attention(x, wq, wk, wv, wo, heads, scale):
  b, t, d = x.shape
  k_dim = d // heads
  split = lambda y: y.reshape(b, t, heads, k_dim).transpose(0, 2, 1, 3)
  q, k, v = (split(x @ w) for w in (wq, wk, wv))
  s = np.einsum("bhtk,bhsk->bhts", q, k) * scale
  s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  p = p / p.sum(-1, keepdims=True)
  ctx = np.einsum("bhts,bhsk->bhtk", p, v).transpose(0, 2, 1, 3).reshape(b, t, d)
  return ctx @ wo


@pytest.mark.parametrize("attention", ["dense", "xla"])
@pytest.mark.parametrize("base_width", [8, 16])  # m_d = 2 and 1: 1/d_head at both
def test_attention_scores_take_one_over_d_head(attention, base_width):
  cfg = tiny_config(_shape(16), attention=attention, width_param="mup", base_width=base_width)
  with nnx.use_eager_sharding(False):
    attn = attention_lib.Attention(cfg, init_rule(cfg), nnx.Rngs(params=0))
  assert attn.softmax_scale == 1 / cfg.head_dim
  x = np.random.default_rng(0).normal(0, 3, (2, 5, 16)).astype(np.float32)
  w = [np.asarray(m.kernel[...], np.float64) for m in (attn.q, attn.k, attn.v, attn.out)]
  got = np.asarray(attn(jnp.asarray(x)))
  expected = _np_attention(x.astype(np.float64), *w, cfg.num_heads, 1 / cfg.head_dim)
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
  sp = _np_attention(x.astype(np.float64), *w, cfg.num_heads, cfg.head_dim**-0.5)
  assert np.abs(expected - sp).max() > 0.05 * np.abs(expected).max()  # the scale is visible


@pytest.mark.slow  # builds and steps two parametrizations
@pytest.mark.long  # two models compiled and stepped
def test_mup_at_m_d_one_differs_from_sp_only_by_the_attention_scale():
  shape = _shape(16)
  sp_cfg = tiny_config(shape, norm_position="pre")
  mup_cfg = tiny_config(shape, norm_position="pre", width_param="mup", base_width=16)
  assert not width_param.active(mup_cfg)
  sp, mup = _model(sp_cfg), _model(mup_cfg)
  jax.tree.map(np.testing.assert_array_equal, nnx.state(sp), nnx.state(mup))
  opt_cfg = _opt(name="adamw", lr=0.01, eps=1e-3, weight_decay=0.1)
  params = nnx.state(sp, nnx.Param)
  sp_rows = group_table(opt_cfg, sp_cfg, params)
  mup_rows = group_table(opt_cfg, mup_cfg, params)
  assert sp_rows == mup_rows
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  updates = []
  for cfg in (sp_cfg, mup_cfg):
    optimizer = make_optimizer(opt_cfg, 10, mdl.make_model_def(cfg))
    updates.append(optimizer.update(grads, optimizer.init(params), params)[0])
  jax.tree.map(np.testing.assert_array_equal, *updates)
  tokens = jnp.arange(16, dtype=jnp.int32)[None]
  with jax.disable_jit():
    before = np.asarray(sp(tokens)[0])
    sp.layers.attn.softmax_scale = 1 / sp_cfg.head_dim  # sp with muP's attention scale
    np.testing.assert_array_equal(np.asarray(sp(tokens)[0]), np.asarray(mup(tokens)[0]))
  assert np.abs(before - np.asarray(mup(tokens)[0])).max() > 1e-6


def test_bad_values_and_refused_combinations_name_the_keys_and_choices():
  with pytest.raises(ValueError, match=r"model\.width_param='x' is not valid.*sp, mup"):
    tiny_config(width_param="x")
  with pytest.raises(ValueError, match=r"model\.base_width=0 must be a positive integer"):
    tiny_config(base_width=0)
  with pytest.raises(ValueError, match=r"model\.base_width=0"):
    tiny_config(width_param="mup", base_width=0)
  ngpt = dict(
    residual="ngpt",
    norm_position="none",
    norm="none",
    position="rope",
    ffn_activation="swiglu",
    tie_embeddings=False,
  )
  for model, why in (
    (dict(residual="hyperconn", norm_position="pre"), "mixes streams"),
    (ngpt, "own scales"),
  ):
    tiny_config(**model)  # fine under sp
    with pytest.raises(ValueError, match=why) as err:
      tiny_config(width_param="mup", base_width=8, **model)
    line = str(err.value)
    assert "\n" not in line and "model.width_param='mup'" in line
    assert f"model.residual={model['residual']!r}" in line and "use model.width_param='sp'" in line
  wide = mdl.make_model_def(tiny_config(width_param="mup", base_width=4))  # m_d = 2
  with pytest.raises(ValueError, match=r"opt\.name='sgd' with model\.width_param='mup'.*adam"):
    make_optimizer(_opt(name="sgd"), 10, wide)
  make_optimizer(
    _opt(name="sgd"), 10, mdl.make_model_def(tiny_config(width_param="mup", base_width=8))
  )


def test_sp_ignores_base_width_and_old_checkpoints_read_the_new_keys_as_sp():
  a = _model(tiny_config(base_width=4))
  b = _model(tiny_config(base_width=64))
  tokens = jnp.arange(8, dtype=jnp.int32)[None]
  with jax.disable_jit():
    np.testing.assert_array_equal(np.asarray(a(tokens)[0]), np.asarray(b(tokens)[0]))
  config = base.get_config().to_dict()
  old = {**config, "model": {k: v for k, v in config["model"].items() if "width" not in k}}
  assert {"model.width_param", "model.base_width"} <= set(se.CHECKPOINT_ADDED)
  for policy in (CHECKPOINT, se.WORKDIR, se.SWEEP):
    assert se.changed_keys(old, config, policy) == []
  mup = {**config, "model": {**config["model"], "width_param": "mup"}}
  assert se.changed_keys(old, mup, CHECKPOINT) == ["model.width_param"]


@pytest.mark.slow  # a process of its own
@pytest.mark.long  # a run in a process
def test_train_runs_under_mup_from_the_command_line(run_script, tmp_path):
  from configs import smoke

  half = smoke.get_config().model.d_model // 2
  r = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/smoke.py",
      "--config.model.width_param=mup",
      f"--config.model.base_width={half}",
      "--config.train.steps=3",
      f"--workdir={tmp_path / 'run'}",
    ],
    timeout=300,
  )
  assert r.returncode == 0, r.stderr[-3000:]
  assert f"width_param=mup, d_model {2 * half} against base_width={half} (m_d 2)" in r.stdout


def test_coord_check_spreads_across_widths_at_each_depth():
  from resnorm_jax.probes import coord_check

  rows = [
    dict(
      depth_param="completep",
      width=w,
      depth=d,
      seed=0,
      step=1,
      role="logits",
      layer=0,
      rms=v,
      update=u,
    )
    for w, d, v, u in [(32, 2, 1.0, 0.2), (64, 2, 1.5, 0.3), (32, 4, 2.0, 0.4), (64, 4, 2.0, 0.8)]
  ]
  summary = coord_check.summarize(rows)
  by_width = {(r["depth"], r["quantity"]): r for r in coord_check.spread(summary, 1, over="width")}
  assert by_width[(2, "update")]["d32"] == pytest.approx(0.2)
  assert by_width[(2, "update")]["spread"] == pytest.approx(1.5)
  assert by_width[(4, "update")]["spread"] == pytest.approx(2.0)
  by_depth = {(r["width"], r["quantity"]): r for r in coord_check.spread(summary, 1)}
  assert by_depth[(64, "rms")]["L4"] == 2.0 and by_depth[(64, "rms")]["spread"] == pytest.approx(
    4 / 3
  )
  from configs import smoke

  c = coord_check.at_width(smoke.get_config(), 64)
  ratio = smoke.get_config().model.d_ff / smoke.get_config().model.d_model
  assert (c.model.width_param, c.model.d_model, c.model.d_ff) == ("mup", 64, round(64 * ratio))
  assert coord_check.at_width(smoke.get_config(), 64, "sp").model.width_param == "sp"
  with pytest.raises(ValueError, match="--widths"):
    coord_check.at_width(smoke.get_config(), 63)


@pytest.mark.slow  # trains 4 small models 2 steps
@pytest.mark.long  # a coord check over widths
def test_coord_check_runs_over_widths_under_mup(tmp_path):
  from configs import smoke
  from resnorm_jax.probes import coord_check

  c = smoke.get_config()
  c.model.norm_position, c.model.base_width = "pre", 16
  rows = coord_check.experiment(c, ["sp"], [2], [0], 2, widths=[16, 32])
  assert {r["width"] for r in rows} == {16, 32}
  paths = coord_check.write(rows, str(tmp_path), "test")
  assert any(p.endswith("spread_width.csv") for p in paths)
  table = coord_check.spread(coord_check.summarize(rows), 2, over="width")
  logits = next(r for r in table if r["role"] == "logits" and r["quantity"] == "update")
  assert {"d16", "d32", "spread"} <= set(logits) and np.isfinite(logits["spread"])


@pytest.mark.slow  # compiles for seconds: out of the fast tier
@pytest.mark.parametrize("residual", ["admin", "denseformer", "valueres", "rezero", "none"])
def test_other_residuals_take_the_width_rules(residual):
  cfg = tiny_config(_shape(16), residual=residual, width_param="mup", base_width=8, init="normal")
  model = _model(cfg)
  params = nnx.state(model, nnx.Param)
  rows = group_table(_opt(lr=0.01), cfg, params)
  for r in rows:  # their own weights are vectors inside the stack: lr eta, no decay
    if r["param"].startswith("layers.residuals"):
      assert (r["kind"], r["lr"], r["weight_decay"]) == ("vector", 0.01, 0.0), r["param"]
  tokens = jnp.arange(16, dtype=jnp.int32)[None]
  with jax.disable_jit():
    assert np.all(np.isfinite(np.asarray(model(tokens)[0])))


def test_qk_norm_keeps_one_over_d_head():
  model = _model(tiny_config(qk_norm=True, width_param="mup", base_width=4))
  assert model.layers.attn.softmax_scale == 1 / model.cfg.head_dim
