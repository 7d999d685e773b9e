"""The learning rate per step: a linear warmup to the peak, then the schedule opt.schedule names
(checks.SCHEDULES: constant, inverse_sqrt, cosine, linear)."""

from typing import Any

import jax
import jax.numpy as jnp
import optax

from resnorm_jax.train.optimizers import checks


def make_schedule(
  opt_cfg: Any, total_steps: int, lr: float | jax.Array | None = None
) -> optax.Schedule:
  """Learning rate per step: linear warmup to `opt.lr`, then the named schedule.

  `lr` (default `opt.lr`) replaces the peak and may be a traced scalar: the schedule's shape
  stays the config's, so one program can train several peak lrs at once (jax.vmap over lr).
  """
  checks.validate(opt_cfg)
  lr = float(opt_cfg.lr) if lr is None else lr
  warmup = int(opt_cfg.warmup_steps)
  name = opt_cfg.schedule
  if name in ("cosine", "linear"):
    checks.require(
      total_steps > warmup,
      "train.steps",
      total_steps,
      f"> opt.warmup_steps={warmup} for the {name} schedule",
    )
  # The decay schedules below count t from the end of warmup: absolute step s = t + warmup.
  if name == "constant":
    decay = optax.constant_schedule(lr)
  elif name == "inverse_sqrt":
    # Vaswani 2017 / Xiong 2020: lr * sqrt(W / (s + 1)); without warmup W = 1.
    w = max(warmup, 1)
    decay = lambda t: lr * jnp.sqrt(w / (jnp.asarray(t, jnp.float32) + warmup + 1.0))
  elif name == "cosine":
    decay = optax.cosine_decay_schedule(lr, total_steps - warmup, alpha=opt_cfg.min_lr_ratio)
  else:
    decay = optax.linear_schedule(lr, lr * opt_cfg.min_lr_ratio, total_steps - warmup)
  if warmup == 0:
    return decay
  # lr * (s + 1) / W: step 0 already trains at lr / W, never at 0 (optax's warmup schedules
  # start at init_value=0, which wastes the first step: nanoGPT's issue #443); lr at s = W - 1.
  ramp = optax.linear_schedule(lr / warmup, lr, warmup - 1)
  return optax.join_schedules([ramp, decay], [warmup])
