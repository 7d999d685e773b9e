"""The depth and width parametrizations around the optimizer's step: a depth parametrization's
hidden-group eps and lr (resnorm_jax/model/depth_param.py), muP's eps, hidden-matrix lr and
weight decay (resnorm_jax/model/width_param.py), and the weight decay that takes muP's factor."""

from typing import Any

import jax
import optax

from resnorm_jax.model import depth_param, width_param
from resnorm_jax.train import param_groups
from resnorm_jax.train.optimizers import masks


def scale_hidden(factor: float) -> optax.GradientTransformation:
  """Multiplies the updates of the parameters inside the layer stack by `factor`."""
  return optax.masked(optax.scale(factor), lambda p: param_groups.mask(p, ["hidden"]))


def weight_decay(wd: float, factor: float) -> list[optax.GradientTransformation]:
  """Weight decay wd on the decayed leaves, wd * factor on the decayed hidden matrices."""
  if factor == 1.0:
    return [optax.add_decayed_weights(wd, mask=masks.decay_mask)]
  rest = lambda p: jax.tree.map(
    lambda a, b: a and not b, masks.decay_mask(p), masks.hidden_decayed_mask(p)
  )
  return [
    optax.add_decayed_weights(wd, mask=rest),
    optax.add_decayed_weights(wd * factor, mask=masks.hidden_decayed_mask),
  ]


def width_scaling(
  opt_cfg: Any, model_def: Any
) -> tuple[optax.GradientTransformation | None, optax.GradientTransformation | None, float]:
  """(before Adam, after Adam, decay factor): muP's eps m_d^-1 on every group (the gradients
  times m_d before Adam, as depth_scaling does for m_L^-alpha), the hidden matrices' lr
  m_d^-1 after Adam, and their weight decay factor m_d. (None, None, 1.0) under sp, at
  d_model == base_width or without a model_def."""
  if model_def is None:
    return None, None, 1.0
  cfg = model_def.cfg
  width_param.check_optimizer(opt_cfg.name, cfg)
  if not width_param.active(cfg):
    return None, None, 1.0
  pre = optax.scale(1.0 / width_param.eps_factor(cfg))
  post = optax.masked(
    optax.scale(width_param.hidden_matrix_lr_factor(cfg)), masks.hidden_matrix_mask
  )
  return pre, post, width_param.hidden_matrix_decay_factor(cfg)


def depth_scaling(
  opt_cfg: Any, model_def: Any
) -> tuple[optax.GradientTransformation | None, optax.GradientTransformation | None]:
  """(before Adam, after Adam): the depth parametrization's hidden-group eps and lr.

  Adam's step m / (sqrt(v) + eps) on gradients multiplied by c equals the step with eps / c
  on the gradients themselves, so eps * m_L^-alpha is Adam with eps on the hidden gradients
  times m_L^alpha (one optimizer state, the same structure as sp's); the lr factor
  m_L^(alpha-1) scales Adam's output (with AdamW's decay: lr * lambda per group, as a
  per-group lr does). (None, None) under sp, at L == base_depth or without a model_def.
  The same two transformations serve muon and adam_atan2: their steps (Muon's orthogonalized
  momentum, atan2(m, sqrt(v))) are invariant to the gradients' scale, the property the lr
  rule's derivation takes from Adam, so the hidden lr factor applies as it is and the eps
  factor reaches Muon's Adam group only.
  """
  if model_def is None or not depth_param.active(model_def.cfg):
    return None, None
  cfg = model_def.cfg
  if opt_cfg.name not in ("adam", "adamw", "muon", "adam_atan2"):
    raise ValueError(
      f"opt.name={opt_cfg.name!r} with model.depth_param={cfg.depth_param!r}: the depth "
      "parametrization's per-group rules are Adam's; use opt.name=adam, adamw, muon or adam_atan2"
    )
  pre = scale_hidden(1.0 / depth_param.hidden_eps_factor(cfg))
  return pre, scale_hidden(depth_param.hidden_lr_factor(cfg))
