"""make_optimizer: the chain of transformations the opt section names. Clipping, weight decay
on matrices only, the step (adam, adamw, sgd, muon, adam_atan2) at the schedule's lr, the depth
and width parametrizations' per-group factors around it, the residual variant's own
transformation and the freeze mask last."""

from typing import Any

import jax
import optax

from resnorm_jax.model import variants
from resnorm_jax.train import param_groups
from resnorm_jax.train.optimizers import adam_atan2, masks, muon, scaling
from resnorm_jax.train.optimizers.schedules import make_schedule


def _core(opt_cfg: Any, schedule: optax.Schedule, wd: float, factor: float) -> list:
  """muon and adam_atan2: the step, the decoupled decay, the lr (muon: the Adam group's times
  opt.muon_adam_lr_ratio, its decay with it)."""
  if opt_cfg.name == "adam_atan2":
    step = adam_atan2.scale_by_adam_atan2(opt_cfg.b1, opt_cfg.b2)
  else:
    step = muon.muon_with_adam(opt_cfg)
  parts = [step, *(scaling.weight_decay(wd, factor) if wd > 0 else [])]
  if opt_cfg.name == "muon" and opt_cfg.muon_adam_lr_ratio != 1.0:
    parts.append(optax.masked(optax.scale(float(opt_cfg.muon_adam_lr_ratio)), masks.adam_group))
  return [*parts, optax.scale_by_learning_rate(schedule)]


def make_optimizer(
  opt_cfg: Any,
  total_steps: int,
  model_def: Any = None,
  lr: float | jax.Array | None = None,
  schedule: optax.Schedule | None = None,
) -> optax.GradientTransformation:
  """Clip (optional) -> weight decay on matrices -> adam | adamw | sgd | muon | adam_atan2 at
  the schedule's lr.

  `model_def` (model_def.ModelDef): the residual variant's transformation is chained after
  the step (nGPT: the weights put back on the unit sphere); such a model needs it passed.
  `lr`: the peak lr instead of `opt.lr`, possibly traced (`make_schedule`). The optimizer's
  state does not depend on it, so states made with any lr fit. `schedule`: make_schedule's,
  when the caller has made it already (run_setup.build, once per run).
  A depth parametrization (model_def.cfg.depth_param) scales the hidden group's eps and lr
  around Adam (`scaling.depth_scaling`), muP (model_def.cfg.width_param) every eps, the
  hidden matrices' lr and their weight decay (`scaling.width_scaling`); they need
  `model_def` passed.
  """
  if schedule is None:
    schedule = make_schedule(opt_cfg, total_steps, lr)  # validates opt_cfg
  wd = float(opt_cfg.weight_decay)
  depth_pre, depth_post = scaling.depth_scaling(opt_cfg, model_def)
  width_pre, width_post, decay_factor = scaling.width_scaling(opt_cfg, model_def)
  pre = [t for t in (depth_pre, width_pre) if t is not None]
  parts = []
  if opt_cfg.clip_norm > 0:
    parts.append(optax.clip_by_global_norm(float(opt_cfg.clip_norm)))
  if opt_cfg.name == "adamw":
    parts += pre
    # Decoupled (Loshchilov & Hutter): optax scales the decay by the scheduled lr.
    if decay_factor == 1.0:
      adamw = optax.adamw(
        schedule,
        b1=opt_cfg.b1,
        b2=opt_cfg.b2,
        eps=opt_cfg.eps,
        weight_decay=wd,
        mask=masks.decay_mask,
      )
    else:  # optax.adamw's chain with muP's decay wd * m_d on the hidden matrices
      adamw = optax.chain(
        optax.scale_by_adam(b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps),
        *scaling.weight_decay(wd, decay_factor),
        optax.scale_by_learning_rate(schedule),
      )
    parts.append(adamw)
  elif opt_cfg.name in ("muon", "adam_atan2"):
    parts += pre
    parts += _core(opt_cfg, schedule, wd, decay_factor)
  else:
    if wd > 0:
      # Coupled L2: the decay joins the gradient and goes through Adam's normalization.
      parts += scaling.weight_decay(wd, decay_factor)
    if opt_cfg.name == "adam":
      parts += pre
      parts.append(optax.adam(schedule, b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps))
    else:
      parts.append(optax.sgd(schedule))  # plain SGD: b1, b2, eps are Adam's
  parts += [t for t in (depth_post, width_post) if t is not None]
  extra = None if model_def is None else variants.residual(model_def.cfg.residual)
  extra = None if extra is None else extra.optimizer_transform(model_def)
  if extra is not None:
    # Before the freeze mask: a frozen matrix (unit norm since init) then stays exactly still.
    parts.append(extra)
  frozen = param_groups.parse(getattr(opt_cfg, "freeze", "") or "")
  # The features' own frozen parameters (a gate held at its init: variants.Feature.frozen).
  held = () if model_def is None else variants.frozen_paths(model_def.cfg)
  if frozen or held:
    # Last in the chain: the frozen leaves' updates are zero whatever came before (their
    # gradients still count in the clipping norm, as they would for an unfrozen run).
    def mask(params: Any) -> Any:
      groups = param_groups.mask(params, frozen)  # [] marks nothing
      return jax.tree_util.tree_map_with_path(
        lambda path, f: f or any(held_by(jax.tree_util.keystr(path)) for held_by in held), groups
      )

    parts.append(optax.masked(optax.set_to_zero(), mask))
  return optax.chain(*parts)
