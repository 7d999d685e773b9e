"""Parameter-holding leaves shared by attention, MLP and model: Dense and Embed.

Leaf names matter: the optimizer decays exactly the leaves called `kernel` and `embedding`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model.initializers import InitRule


def matmul(x: jax.Array, w_KxN: jax.Array) -> jax.Array:
  """x[..., K] @ w[K, N] as one 2-D matmul over the flattened leading axes.

  The same product as `x @ w`, but with a [B, T, K] input the weight gradient of `x @ w`
  contracts two axes (B and T), and XLA:CPU lays it out by transposing the incoming
  gradient inside its producer fusion: a strided loop that took a fifth of the step.
  """
  y = x.reshape(-1, x.shape[-1]) @ w_KxN
  return y.reshape(*x.shape[:-1], w_KxN.shape[-1])


class Dense(nnx.Module):
  """x @ kernel (no bias); kernel [fan_in, fan_out] drawn by the init rule for `role`."""

  def __init__(self, key: jax.Array, rule: InitRule, role: str, shape, axes):
    self.kernel = nnx.Param(rule.kernel(key, role, tuple(shape)), out_sharding=tuple(axes))

  def __call__(self, x: jax.Array) -> jax.Array:
    return matmul(x, self.kernel[...].astype(x.dtype))


class Embed(nnx.Module):
  """A [rows, D] table with normal(std) init."""

  def __init__(self, key: jax.Array, rows: int, dim: int, std: float, axes):
    table = std * jax.random.normal(key, (rows, dim), jnp.float32)
    self.embedding = nnx.Param(table, out_sharding=tuple(axes))

  def __call__(self, ids: jax.Array) -> jax.Array:
    return jnp.take(self.embedding[...], ids, axis=0)

  def attend(self, x_BxTxD: jax.Array) -> jax.Array:
    """Tied head: x @ table^T."""
    return matmul(x_BxTxD, self.embedding[...].astype(x_BxTxD.dtype).T)
