"""Hyper-connections (Zhu et al. 2024, arXiv 2409.19606): a residual stream of n copies.

Legend: B batch, T time, N copies (the expansion rate n), D hidden, M = N + 1.

The stream is H [B, T, N, D]. Each residual sub-layer k (attention and FFN are separate
layers; one per parallel block) holds the hyper-connection matrix

  HC = [[0,   beta  ],      beta  [N]     : depth weights, the branch output into each copy
        [A_m, A_r   ]]      A_m   [N]     : width weights, the copies into the branch input
                            A_r   [N, N]  : width weights, copy to copy

  h_in = A_m^T H                 (the branch input, one [B, T, D] stream)
  H'   = beta ⊗ F(h_in) + A_r^T H

alpha = [A_m | A_r] is stored as one [N, M] matrix, as in the paper's pseudocode. The paper's
initialization (its eq. 14) makes the model Pre-Norm at init: A_m = e_(k mod n),
A_r = I_n, beta = 1. Every copy then starts equal to the Pre-LN stream, and layer k reads
copy k mod n of it. The model's input is the embedding copied n times and its output the
sum of the n copies (before the final norm).

Dynamic hyper-connections (DHC, the paper's eq. 9-11, optional): with H_bar = norm(H),
  alpha(H) = s_alpha * tanh(H_bar W_alpha) + alpha,   W_alpha [D, M]
  beta(H)  = s_beta  * tanh(H_bar W_beta)  + beta,    W_beta  [D]
per token; W_alpha, W_beta start at 0 and the learnable scalars s_alpha, s_beta at 0.01
(the paper's pseudocode), so DHC also starts as Pre-Norm.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.config.keys import positive_int
from resnorm_jax.model.variants.hooks import Key, Residual

DYNAMIC_SCALE_INIT = 0.01  # the paper's s_alpha, s_beta at init


def static_alpha_init(layer_index: jax.Array, rate: int) -> jax.Array:
  """[N, M] = [e_(k mod n) | I_n]: Pre-Norm at init (the paper's eq. 14)."""
  a_m = jax.nn.one_hot(layer_index % rate, rate, dtype=jnp.float32)
  return jnp.concatenate([a_m[:, None], jnp.eye(rate, dtype=jnp.float32)], axis=1)


class HyperConnection(nnx.Module):
  """One sub-layer's hyper-connection: width mix in, depth add out."""

  def __init__(
    self,
    rate: int,
    dim: int,
    layer_index: jax.Array,
    *,
    dynamic: bool,
    norm: Callable[[], nnx.Module] | None = None,
  ):
    self.rate = rate
    self.dynamic = dynamic
    self.alpha = nnx.Param(static_alpha_init(layer_index, rate), out_sharding=(None, None))
    self.beta = nnx.Param(jnp.ones((rate,), jnp.float32), out_sharding=(None,))
    if dynamic:
      self.norm = norm()
      self.alpha_fn = nnx.Param(
        jnp.zeros((dim, rate + 1), jnp.float32), out_sharding=("embed", None)
      )
      self.beta_fn = nnx.Param(jnp.zeros((dim,), jnp.float32), out_sharding=("embed",))
      self.alpha_scale = nnx.Param(jnp.full((), DYNAMIC_SCALE_INIT, jnp.float32), out_sharding=())
      self.beta_scale = nnx.Param(jnp.full((), DYNAMIC_SCALE_INIT, jnp.float32), out_sharding=())

  def weights(self, h_BxTxNxD: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(alpha [.., N, M], beta [.., N]): static, or per token [B, T, N, M] when dynamic."""
    alpha, beta = self.alpha[...], self.beta[...]
    if not self.dynamic:
      return alpha, beta
    hbar = self.norm(h_BxTxNxD).astype(jnp.float32)
    a = jnp.tanh(hbar @ self.alpha_fn[...]) * self.alpha_scale[...]
    b = jnp.tanh(hbar @ self.beta_fn[...]) * self.beta_scale[...]
    return a + alpha, b + beta

  def __call__(self, h_BxTxNxD: jax.Array, branch_fn: Callable[[jax.Array], jax.Array]):
    """H' = beta ⊗ F(A_m^T H) + A_r^T H."""
    alpha, beta = self.weights(h_BxTxNxD)
    dtype = h_BxTxNxD.dtype
    # mix [B, T, M, D]: row 0 the branch input, rows 1.. the width-mixed copies.
    spec = "btnm,btnd->btmd" if self.dynamic else "nm,btnd->btmd"
    mix_BxTxMxD = jnp.einsum(spec, alpha.astype(dtype), h_BxTxNxD)
    f_BxTxD = branch_fn(mix_BxTxMxD[:, :, 0])
    depth = beta.astype(dtype)[..., None] * f_BxTxD[:, :, None, :]
    return depth + mix_BxTxMxD[:, :, 1:]


def expand(x_BxTxD: jax.Array, rate: int) -> jax.Array:
  """The model's input: the embedding copied n times, [B, T, N, D]."""
  return jnp.broadcast_to(x_BxTxD[:, :, None, :], (*x_BxTxD.shape[:2], rate, x_BxTxD.shape[-1]))


def collapse(h_BxTxNxD: jax.Array) -> jax.Array:
  """The model's output: the sum of the n copies (the paper's), [B, T, D]."""
  return h_BxTxNxD.sum(axis=2)


def make(cfg, *, slot: int, num_slots: int, layer_index, norm, **_) -> HyperConnection:
  """Sub-layer k = num_slots * l + slot: attention and FFN are separate hyper-layers."""
  k = num_slots * jnp.asarray(0 if layer_index is None else layer_index, jnp.int32)
  return HyperConnection(
    cfg.hyperconn_rate, cfg.d_model, k + slot, dynamic=cfg.hyperconn_dynamic, norm=norm
  )


VARIANTS = (
  Residual(
    "hyperconn",
    "hyper-connections: n copies of the stream, learned width and depth mixing",
    keys={
      "hyperconn_rate": Key(4, "n copies of the residual stream (expansion rate)", positive_int),
      "hyperconn_dynamic": Key(False, "add the input-dependent (dynamic) weights"),
    },
    multi_stream=True,
    make=make,
    wraps_branch=True,
    stream_in=lambda x, cfg: expand(x, cfg.hyperconn_rate),
    stream_out=collapse,
  ),
)
