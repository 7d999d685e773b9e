"""Parameter groups by path, and opt.freeze: frozen groups never move, the rest do."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import base
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.train import param_groups
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer


def _params(position: str, residual: str):
  c = base.get_config()
  c.model.num_layers, c.model.norm_position, c.model.residual = 2, position, residual
  params, _ = jax.eval_shape(lambda: mdl.init_model(model_config_from(c), 0))
  return params


def _members(params, group: str) -> set[str]:
  m = param_groups.mask(params, [group])
  return {
    jax.tree_util.keystr(path) for path, flag in jax.tree_util.tree_leaves_with_path(m) if flag
  }


def test_norm_groups_cover_every_norm_of_the_sandwich_placement():
  params = _params("peri", "add")
  assert _members(params, "norm_bias") == {
    "['final_norm']['bias']",
    "['layers']['norms']['attn']['bias']",
    "['layers']['norms']['ffn']['bias']",
    "['layers']['out_norms']['attn']['bias']",
    "['layers']['out_norms']['ffn']['bias']",
  }
  assert _members(params, "norm") == _members(params, "norm_bias") | _members(params, "norm_scale")
  assert len(_members(params, "norm_scale")) == 5
  assert _members(params, "embed") == {"['embed']['embedding']", "['pos_embed']['embedding']"}


def test_residual_group_holds_the_residual_weights():
  assert _members(_params("pre", "rezero"), "residual") == {
    "['layers']['residuals']['attn']['rezero']",
    "['layers']['residuals']['ffn']['rezero']",
  }
  gated = _members(_params("post", "gated"), "residual")
  assert len(gated) == 4 and all("gate" in k for k in gated)
  assert not _members(_params("post", "add"), "residual")


@pytest.mark.slow  # trains steps
def test_freeze_keeps_the_frozen_groups_at_init_and_moves_the_rest():
  c = base.get_config()
  c.model.num_layers, c.model.d_model, c.model.num_heads, c.model.d_ff = 2, 32, 2, 64
  c.opt.freeze = "norm, embed"
  cfg = model_config_from(c)
  model_def = mdl.make_model_def(cfg)
  optimizer = make_optimizer(c.opt, 10)
  state = ts.init_state(model_def, optimizer, 0)
  params0 = state.params
  rng = np.random.default_rng(0)
  batch = tuple(jnp.asarray(rng.integers(0, 256, (4, 16)), jnp.int32) for _ in range(2))
  step = jax.jit(lambda s, b: ts.train_step(model_def, optimizer, s, b, per_layer=False))
  for _ in range(3):
    state, _ = step(state, batch)
  frozen = param_groups.mask(params0, ["norm", "embed"])
  leaves = jax.tree_util.tree_leaves_with_path(params0)
  for (path, p0), p1, f in zip(
    leaves, jax.tree.leaves(state.params), jax.tree.leaves(frozen), strict=True
  ):
    moved = not np.array_equal(np.asarray(p0), np.asarray(p1))
    assert moved != f, (jax.tree_util.keystr(path), f)


def test_unknown_freeze_group_is_refused_with_the_valid_ones():
  c = base.get_config()
  c.opt.freeze = "norm,embeds"
  with pytest.raises(ValueError, match="'embeds'.*norm_bias, norm_scale, norm, residual, embed"):
    make_optimizer(c.opt, 10)
