"""How the skip path and the branch combine: add, deepnorm, scaled, rezero, layerscale, gated,
none (the variants with modules of their own live in resnorm_jax/model/variants/).

N is the number of decoder layers (each has two residual sub-layers, so 2N residuals in a
sequential block).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model.layers import matmul

RESIDUALS = (
  "add",
  "deepnorm",
  "scaled",
  "rezero",
  "layerscale",
  "gated",
  "none",
)


def deepnorm_alpha(num_layers: int) -> float:
  """DeepNet decoder-only alpha = (2N)^(1/4)."""
  return (2 * num_layers) ** 0.25


def deepnorm_beta(num_layers: int) -> float:
  """DeepNet decoder-only init gain beta = (8N)^(-1/4)."""
  return (8 * num_layers) ** -0.25


def default_branch_scale(num_layers: int) -> float:
  """Depth-muP style branch scale 1/sqrt(2N)."""
  return 1.0 / math.sqrt(2 * num_layers)


class Residual(nnx.Module):
  """combine(skip, branch) for one sub-layer; `kind` is one of RESIDUALS."""

  def __init__(
    self,
    kind: str,
    dim: int,
    *,
    alpha: float = 1.0,
    scale: float = 1.0,
    rezero_init: float = 0.0,
    layerscale_init: float = 1e-4,
    gate_std: float = 0.02,
    rngs: nnx.Rngs | None = None,
  ):
    if kind not in RESIDUALS:
      raise ValueError(f"model.residual={kind!r} is unknown; valid: {', '.join(RESIDUALS)}")
    self.kind = kind
    self.alpha = alpha
    self.scale = scale
    if kind == "rezero":
      self.rezero = nnx.Param(jnp.full((), rezero_init, jnp.float32), out_sharding=())
    elif kind == "layerscale":
      self.layerscale = nnx.Param(
        jnp.full((dim,), layerscale_init, jnp.float32), out_sharding=("embed",)
      )
    elif kind == "gated":
      # Small random W_g (std 0.02; x m_d^-1/2 under muP), b_g = 0: the gate starts near 0.5.
      w = gate_std * jax.random.normal(rngs.params(), (dim, dim), jnp.float32)
      self.gate = nnx.Param(w, out_sharding=("embed", "mlp"))
      self.gate_bias = nnx.Param(jnp.zeros((dim,), jnp.float32), out_sharding=("mlp",))

  def __call__(self, skip: jax.Array, branch: jax.Array) -> jax.Array:
    k = self.kind
    if k == "add":
      return skip + branch
    if k == "deepnorm":
      return self.alpha * skip + branch
    if k == "scaled":
      return skip + self.scale * branch
    if k == "rezero":
      return skip + self.rezero[...].astype(branch.dtype) * branch
    if k == "layerscale":
      return skip + self.layerscale[...].astype(branch.dtype) * branch
    if k == "gated":
      g = matmul(skip, self.gate[...].astype(skip.dtype)) + self.gate_bias[...].astype(skip.dtype)
      return skip + jax.nn.sigmoid(g.astype(jnp.float32)).astype(branch.dtype) * branch
    return branch  # none: no skip path
