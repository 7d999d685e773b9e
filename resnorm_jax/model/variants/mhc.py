"""Manifold-constrained hyper-connections (mHC; Xie et al. 2025, arXiv 2512.24880).

Legend: B batch, T time, N copies (the expansion rate n), D hidden, P = 2N + N^2 (the
coefficients of one sub-layer).

Hyper-connections (hyperconn.py) with the residual mixing matrix kept doubly stochastic. The
stream is x [B, T, N, D] (n copies, as in hyperconn.py: the embedding copied n times in,
the sum of the copies out); each residual sub-layer k computes

  x' = H_res x + H_post^T F(H_pre x)          H_pre, H_post [N], H_res [N, N]

with the paper's constraints (its eq. 8): H_pre = sigmoid(H~_pre), H_post = 2 sigmoid(H~_post)
and H_res = Sinkhorn-Knopp(H~_res): exp(H~_res), then rows and columns rescaled to sum 1 in
turn, `model.mhc_sinkhorn_iters` times (the paper's t_max = 20), in the log domain. A doubly
stochastic H_res has row and column sums 1, so the product of every layer's H_res (the
signal's gain along the skip paths) stays doubly stochastic at any depth, where HC's
unconstrained A_r compounds.

The unnormalized coefficients (the paper's eq. 7) are dynamic, per token, from the whole
widened stream flattened to nD channels and RMS-normalized:

  x~ = RMSNorm(vec(x))                                           [B, T, N D]
  H~_pre = a_pre * (x~ phi_pre) + b_pre,  H~_post = a_post * (x~ phi_post) + b_post,
  H~_res = a_res * mat(x~ phi_res) + b_res

phi [N D, P] starts at 0 and the gates a at 0.01 (as hyperconn.py's dynamic scales);
`model.mhc_dynamic=false` keeps the static biases b alone.

Init (not stated in the paper; ours, from HC's Pre-Norm init and lucidrains/hyper-connections):
b_pre = e_(k mod n) (H_pre = sigmoid: 0.73 on copy k, 0.5 on the others: asymmetric, so the
copies can come apart), b_post = 0 (H_post = 1) and b_res = I_n (H_res = Sinkhorn(exp(I))).
Every copy starts equal to the embedding and H_res (rows sum to 1) keeps equal copies equal,
so the model at init is Pre-LN: each copy is the Pre-LN stream (the branch input is a
multiple of it, which the pre-norm removes).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from resnorm_jax.config.keys import positive_int
from resnorm_jax.model.norms import RMSNorm
from resnorm_jax.model.variants.hooks import Key, Residual
from resnorm_jax.model.variants.hyperconn import DYNAMIC_SCALE_INIT, collapse, expand


def sinkhorn(logits: jax.Array, iters: int) -> jax.Array:
  """Sinkhorn-Knopp: exp(logits) [.., N, N] rescaled `iters` times to unit row, then column
  sums, computed in the log domain (float32): each rescaling subtracts a logsumexp.

  The same projection as dividing exp(logits) by its sums, without its failure: there, a row
  whose logits sit ~60 below the others' is a sum of float32 denormals, whose reciprocal
  squared overflows in the backward pass (a NaN gradient under a finite loss); ~85 below,
  the forward is off too (tests/test_literature_variants.py)."""

  def rescale(_, z: jax.Array) -> jax.Array:
    z = z - jax.nn.logsumexp(z, axis=-1, keepdims=True)
    return z - jax.nn.logsumexp(z, axis=-2, keepdims=True)

  # A loop, not `iters` unrolled copies: unrolled, the log domain compiled for minutes and ran
  # 3.2x slower than exp-then-divide; looped, 0.72x its time (12 projections at [16, 128, 4, 4],
  # forward and backward, one CPU core).
  return jnp.exp(jax.lax.fori_loop(0, iters, rescale, logits.astype(jnp.float32)))


def static_bias_init(layer_index: jax.Array, rate: int) -> jax.Array:
  """[P] = [b_pre | b_post | vec(b_res)] = [e_(k mod n) | 0 | vec(I_n)]."""
  b_pre = jax.nn.one_hot(layer_index % rate, rate, dtype=jnp.float32)
  b_post = jnp.zeros((rate,), jnp.float32)
  return jnp.concatenate([b_pre, b_post, jnp.eye(rate, dtype=jnp.float32).reshape(-1)])


class ManifoldHyperConnection(nnx.Module):
  """One sub-layer's mHC: H_pre in, H_post out, H_res (doubly stochastic) copy to copy."""

  def __init__(
    self, rate: int, dim: int, layer_index: jax.Array, *, dynamic: bool, iters: int, eps: float
  ):
    self.rate, self.dynamic, self.iters = rate, dynamic, iters
    p = 2 * rate + rate * rate
    self.bias = nnx.Param(static_bias_init(layer_index, rate), out_sharding=(None,))
    if dynamic:
      self.norm = RMSNorm(rate * dim, eps, axis=None)
      self.phi = nnx.Param(jnp.zeros((rate * dim, p), jnp.float32), out_sharding=(None, None))
      self.gates = nnx.Param(jnp.full((3,), DYNAMIC_SCALE_INIT, jnp.float32), out_sharding=(None,))

  def coefficients(self, x_BxTxNxD: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(H_pre [.., N], H_post [.., N], H_res [.., N, N]): static, or per token [B, T, ...]."""
    n = self.rate
    logits = self.bias[...]
    if self.dynamic:
      b, t = x_BxTxNxD.shape[:2]
      flat = self.norm(x_BxTxNxD.reshape(b, t, -1)).astype(jnp.float32)
      gate = jnp.repeat(self.gates[...], np.array([n, n, n * n]), total_repeat_length=logits.size)
      logits = gate * (flat @ self.phi[...]) + logits
    h_pre = jax.nn.sigmoid(logits[..., :n])
    h_post = 2.0 * jax.nn.sigmoid(logits[..., n : 2 * n])
    h_res = sinkhorn(logits[..., 2 * n :].reshape(*logits.shape[:-1], n, n), self.iters)
    return h_pre, h_post, h_res

  def __call__(self, x_BxTxNxD: jax.Array, branch_fn: Callable[[jax.Array], jax.Array]):
    """x' = H_res x + H_post^T F(H_pre x)."""
    h_pre, h_post, h_res = (c.astype(x_BxTxNxD.dtype) for c in self.coefficients(x_BxTxNxD))
    lead = "btn" if self.dynamic else "n"
    f_BxTxD = branch_fn(jnp.einsum(f"{lead},btnd->btd", h_pre, x_BxTxNxD))
    mixed = jnp.einsum(f"{lead}m,btmd->btnd", h_res, x_BxTxNxD)
    return mixed + h_post[..., None] * f_BxTxD[:, :, None, :]


def make(cfg, *, slot: int, num_slots: int, layer_index, **_) -> ManifoldHyperConnection:
  """Sub-layer k = num_slots * l + slot, as hyperconn.py."""
  k = num_slots * jnp.asarray(0 if layer_index is None else layer_index, jnp.int32) + slot
  return ManifoldHyperConnection(
    cfg.mhc_rate,
    cfg.d_model,
    k,
    dynamic=cfg.mhc_dynamic,
    iters=cfg.mhc_sinkhorn_iters,
    eps=cfg.norm_eps,
  )


VARIANTS = (
  Residual(
    "mhc",
    "manifold-constrained hyper-connections: n copies, H_res doubly stochastic (Sinkhorn)",
    keys={
      "mhc_rate": Key(4, "n copies of the residual stream (expansion rate)", positive_int),
      "mhc_sinkhorn_iters": Key(
        20, "Sinkhorn-Knopp iterations projecting H_res (the paper's t_max)", positive_int
      ),
      "mhc_dynamic": Key(True, "per-token coefficients from the flattened stream (the paper's)"),
    },
    multi_stream=True,
    make=make,
    wraps_branch=True,
    stream_in=lambda x, cfg: expand(x, cfg.mhc_rate),
    stream_out=collapse,
    matmul_params=lambda cfg: (
      cfg.mhc_rate * cfg.d_model * (2 * cfg.mhc_rate + cfg.mhc_rate**2) if cfg.mhc_dynamic else 0
    ),
  ),
)
