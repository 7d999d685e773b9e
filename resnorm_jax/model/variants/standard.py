"""The original axes' values: Post-LN, Pre-LN, sandwich (peri) and no norm; the residual
rules of residual.py; the built-in norms of norms.py.

post: x = N(res(x, F(x)))          pre: x = res(x, F(N(x)))
peri: x = res(x, N'(F(N(x))))      none: x = res(x, F(x))
"""

from __future__ import annotations

from resnorm_jax.model import norms, width_param
from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model.norms import rms
from resnorm_jax.model.variants.hooks import Norm, Placement, Residual


def normalize_input(block, slot: str, x, stats: dict, index):
  """N(x) in front of the branch (pre, peri and the placements built on Pre-LN)."""
  stats[f"{slot}_norm_in_rms"] = rms(x)
  return block.norms[slot](x)


def normalize_output(block, slot: str, f, stats: dict):
  """N'(F) on the branch output (peri)."""
  stats[f"{slot}_out_norm_in_rms"] = rms(f)
  return block.out_norms[slot](f)


def normalize_stream(block, slot: str, x, y, stats: dict, index):
  """N(x + F) after the residual (post)."""
  stats[f"{slot}_norm_in_rms"] = rms(y)
  return block.norms[slot](y)


VARIANTS = (
  Placement(
    "post",
    "Post-LN: x = N(res(x, F(x)))",
    stream_output=normalize_stream,
    normalizes_stream=True,
  ),
  Placement("pre", "Pre-LN: x = res(x, F(N(x)))", pre_like=True, branch_input=normalize_input),
  Placement(
    "peri",
    "sandwich: x = res(x, N'(F(N(x))))",
    pre_like=True,
    out_norms=True,
    branch_input=normalize_input,
    branch_output=normalize_output,
  ),
  Placement("none", "no norm in the layers: x = res(x, F(x))", norms=False),
)


def combine(cfg, *, rngs, **_) -> residual_lib.Residual:
  """residual.Residual of cfg.residual with its resolved constants."""
  return residual_lib.Residual(
    cfg.residual,
    cfg.d_model,
    alpha=cfg.residual_alpha,
    scale=cfg.branch_scale,
    rezero_init=cfg.rezero_init,
    layerscale_init=cfg.layerscale_init,
    gate_std=0.02 * width_param.hidden_init_factor(cfg),
    rngs=rngs,
  )


def _no_matmuls(cfg) -> int:
  return 0


VARIANTS += tuple(
  Residual(name, summary, make=combine, matmul_params=matmuls)
  for name, summary, matmuls in (
    ("add", "x + F", _no_matmuls),
    ("deepnorm", "DeepNorm: alpha x + F, alpha = model.residual_alpha or (2N)^(1/4)", _no_matmuls),
    ("scaled", "x + s F, s = model.branch_scale or 1/sqrt(2N)", _no_matmuls),
    ("rezero", "ReZero: x + a F, a learnable scalar from model.rezero_init", _no_matmuls),
    (
      "layerscale",
      "LayerScale: x + lambda * F, per channel, from model.layerscale_init",
      _no_matmuls,
    ),
    ("gated", "x + sigmoid(W_g x + b_g) * F, a learnable gate", lambda cfg: cfg.d_model**2),
    ("none", "F alone: no skip path", _no_matmuls),
  )
)

# The built-in values of model.norm, in the order every "not valid" message lists them.
VARIANTS += (
  Norm("layernorm", "LayerNorm", make=lambda c, dim, axis: norms.LayerNorm(dim, c.norm_eps, axis)),
  Norm(
    "rmsnorm",
    "RMSNorm: no centering, no bias",
    make=lambda c, dim, axis: norms.RMSNorm(dim, c.norm_eps, axis),
  ),
  Norm(
    "batchnorm",
    "BatchNorm over batch and time (leaks later tokens in training)",
    make=lambda c, dim, axis: norms.BatchNorm(dim, c.norm_eps, c.batchnorm_momentum),
  ),
  Norm(
    "dyt",
    "DyT: gamma tanh(alpha x) + beta, no statistics",
    make=lambda c, dim, axis: norms.DyT(dim, c.dyt_alpha_init),
  ),
  Norm("none", "no norm: the identity", make=lambda c, dim, axis: norms.Identity()),
)
