"""Derf, dynamic erf (Chen et al. 2025, arXiv 2512.10938; code zlab-princeton/Derf): the norm
replaced by gamma * erf(alpha * x + s) + beta, a successor of DyT (norms.py). alpha and s are
learnable scalars, gamma and beta per channel; model.norm=derf puts it wherever the placement
puts a norm.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model.variants.hooks import Norm

# The learnable scalars at init: the official code's defaults (zlab-princeton/Derf,
# dynamic_erf.py: alpha_init_value=0.5, shift_init_value=0.0).
ALPHA_INIT = 0.5
SHIFT_INIT = 0.0


class Derf(nnx.Module):
  """gamma * erf(alpha * x + s) + beta over the last axis, in float32 (the input's dtype out);
  alpha and s scalars (0.5 and 0 at init), gamma and beta per channel (1 and 0)."""

  def __init__(
    self,
    dim: int,
    alpha_init: float = ALPHA_INIT,
    shift_init: float = SHIFT_INIT,
    axis: str | None = "embed",
  ):
    self.alpha = nnx.Param(jnp.full((), alpha_init, jnp.float32), out_sharding=())
    self.shift = nnx.Param(jnp.full((), shift_init, jnp.float32), out_sharding=())
    self.scale = nnx.Param(jnp.ones((dim,), jnp.float32), out_sharding=(axis,))
    self.bias = nnx.Param(jnp.zeros((dim,), jnp.float32), out_sharding=(axis,))

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    x = x_BxTxD.astype(jnp.float32)
    y = jax.scipy.special.erf(self.alpha[...] * x + self.shift[...]) * self.scale[...]
    return (y + self.bias[...]).astype(x_BxTxD.dtype)


VARIANTS = (
  Norm(
    "derf",
    "dynamic erf in place of the norm, gamma * erf(alpha x + s) + beta (Chen et al. 2025)",
    make=lambda c, dim, axis: Derf(dim, axis=axis),
  ),
)
