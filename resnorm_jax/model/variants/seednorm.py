"""SeeDNorm, self-rescaled dynamic normalization (Cai, Zhu, Liu and Min 2025, arXiv 2510.22777,
ICLR 2026): RMSNorm whose per-channel scale depends on the input itself,

  SeeDNorm(x) = [sigma(x . beta^T) * alpha + gamma] (.) x / RMS(x),
  RMS(x) = sqrt(mean_i x_i^2 + eps)

over the last axis (the paper's eq. for x in R^(N x D)): x . beta^T is one scalar per token
(beta in R^(1 x D)), sigma = tanh (the paper's choice), alpha, beta, gamma in R^D learnable;
gamma is RMSNorm's static scale, alpha and beta the self-rescaling. Source: the paper's
formula (arXiv 2510.22777, its method section); no official code is public, so the init is ours:
gamma = 1, alpha = 1, beta = 0 (ALPHA_INIT, BETA_INIT), which makes it RMSNorm at init (tanh
0 = 0) with a nonzero gradient on beta. eps is model.norm_eps. The paper's multi-head variant
(beta's dot product per group of channels) is not implemented. model.norm=seednorm puts it
wherever the placement puts a norm (the q/k norms of model.qk_norm stay RMSNorm).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model.variants.hooks import Norm

ALPHA_INIT = 1.0
BETA_INIT = 0.0


class SeeDNorm(nnx.Module):
  """[tanh(x . beta) alpha + gamma] * x / sqrt(mean(x^2) + eps) over the last axis, in float32
  (the input's dtype out)."""

  def __init__(self, dim: int, eps: float, axis: str | None = "embed"):
    self.eps = eps
    self.scale = nnx.Param(jnp.ones((dim,), jnp.float32), out_sharding=(axis,))  # gamma
    self.alpha = nnx.Param(jnp.full((dim,), ALPHA_INIT, jnp.float32), out_sharding=(axis,))
    self.beta = nnx.Param(jnp.full((dim,), BETA_INIT, jnp.float32), out_sharding=(axis,))

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    x = x_BxTxD.astype(jnp.float32)
    rescale = jnp.tanh(jnp.sum(x * self.beta[...], -1, keepdims=True))  # one per token
    gain = rescale * self.alpha[...] + self.scale[...]
    y = gain * x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + self.eps)
    return y.astype(x_BxTxD.dtype)


VARIANTS = (
  Norm(
    "seednorm",
    "SeeDNorm: RMSNorm with the scale [tanh(x . beta) alpha + gamma] (Cai et al. 2025)",
    make=lambda c, dim, axis: SeeDNorm(dim, c.norm_eps, axis=axis),
  ),
)
