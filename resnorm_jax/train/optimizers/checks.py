"""The opt section's checks, run before anything is built: the optimizer and schedule names it
accepts and the range of each key, a ValueError naming the key and its value otherwise."""

from typing import Any

from resnorm_jax.train import param_groups
from resnorm_jax.train.optimizers import muon

OPTIMIZERS = ("adam", "adamw", "sgd", "muon", "adam_atan2")
SCHEDULES = ("constant", "inverse_sqrt", "cosine", "linear")


def require(ok: bool, key: str, value: Any, expected: str) -> None:
  """Raises ValueError naming the config key and its value when `ok` is false."""
  if not ok:
    raise ValueError(f"{key}={value!r}: expected {expected}")


def validate(opt_cfg: Any) -> None:
  """Checks every opt.* key before anything is built."""
  require(opt_cfg.name in OPTIMIZERS, "opt.name", opt_cfg.name, f"one of {', '.join(OPTIMIZERS)}")
  require(
    opt_cfg.schedule in SCHEDULES,
    "opt.schedule",
    opt_cfg.schedule,
    f"one of {', '.join(SCHEDULES)}",
  )
  require(opt_cfg.lr > 0, "opt.lr", opt_cfg.lr, "> 0")
  require(
    int(opt_cfg.warmup_steps) == opt_cfg.warmup_steps and opt_cfg.warmup_steps >= 0,
    "opt.warmup_steps",
    opt_cfg.warmup_steps,
    "an integer >= 0",
  )
  require(0 <= opt_cfg.min_lr_ratio <= 1, "opt.min_lr_ratio", opt_cfg.min_lr_ratio, "in [0, 1]")
  require(opt_cfg.clip_norm >= 0, "opt.clip_norm", opt_cfg.clip_norm, ">= 0 (0: off)")
  require(opt_cfg.weight_decay >= 0, "opt.weight_decay", opt_cfg.weight_decay, ">= 0")
  require(0 <= opt_cfg.b1 < 1, "opt.b1", opt_cfg.b1, "in [0, 1)")
  require(0 <= opt_cfg.b2 < 1, "opt.b2", opt_cfg.b2, "in [0, 1)")
  require(opt_cfg.eps >= 0, "opt.eps", opt_cfg.eps, ">= 0")
  if opt_cfg.name == "muon":
    require(
      opt_cfg.muon_scale in muon.MUON_SCALES,
      "opt.muon_scale",
      opt_cfg.muon_scale,
      f"one of {', '.join(muon.MUON_SCALES)}",
    )
    require(0 <= opt_cfg.muon_momentum < 1, "opt.muon_momentum", opt_cfg.muon_momentum, "in [0, 1)")
    steps = opt_cfg.muon_ns_steps
    ok = isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1
    require(ok, "opt.muon_ns_steps", steps, "an integer >= 1")
    ratio = opt_cfg.muon_adam_lr_ratio
    require(ratio > 0, "opt.muon_adam_lr_ratio", ratio, "> 0")
  param_groups.parse(getattr(opt_cfg, "freeze", "") or "")
