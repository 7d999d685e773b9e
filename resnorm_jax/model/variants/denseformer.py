"""DenseFormer: depth-weighted averaging (Pagliardini et al. 2024, arXiv 2402.02622;
code: epfml/DenseFormer, denseformer/denseformer.py).

Legend: B batch, T time, D hidden, L layers; X_0 the embedding, X_i the output of block i.

After block i (1-based) the next block's input is a learned weighted average of the
embedding and every block output so far (DWA, the paper's eq. 1):

  X_i = B_i(Y_(i-1)),     Y_i = sum_(j=0..i) alpha_(i,j) X_j,     Y_0 = X_0

and the head reads Y_L (then the final norm). alpha_i starts as the identity: alpha_(i,i) = 1
and the others 0 (the reference's _init_weights), so at init Y_i = X_i and the model is the
plain one. The blocks' own skip paths are plain x + F. The full form (dilation 1, period 1);
the paper's cheaper k x p variants (DWA every p-th block over every k-th output) are left out.

In the scanned stack: the carry is (Y, past) with past [L+1, B, T, D] the buffer of X_0..X_L
(zeros not yet written); block i writes X_i into it and reads the masked weighted sum. The
reference code writes the buffer in place under autograd; a scan's backward pass keeps its
carry at every step instead, so the training memory of this buffer grows as L^2 B T D
(L (L+1) B T D floats: 0.3 GB at 24 layers and 4.9 GB at 96 at the cpu scale's batch).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model.variants.hooks import Residual


class DepthWeights(nnx.Module):
  """alpha_i [L+1]: block i's (0-based) weights over X_0..X_L, the identity at init."""

  def __init__(self, num_layers: int, layer_index: jax.Array):
    alpha = jax.nn.one_hot(layer_index + 1, num_layers + 1, dtype=jnp.float32)
    self.alpha = nnx.Param(alpha, out_sharding=(None,))

  def __call__(self, past_LxBxTxD: jax.Array, index: jax.Array) -> jax.Array:
    """sum_(j <= index+1) alpha_j X_j (the weights of outputs not yet made are masked out)."""
    n = past_LxBxTxD.shape[0]
    w = jnp.where(jnp.arange(n) <= index + 1, self.alpha[...], 0.0)
    return jnp.einsum("l,lbtd->btd", w.astype(past_LxBxTxD.dtype), past_LxBxTxD)


def stream_in(x_BxTxD: jax.Array, cfg) -> tuple[jax.Array, jax.Array]:
  """(Y_0, past) = (X_0, [X_0, 0, ..., 0])."""
  past = jnp.zeros((cfg.num_layers + 1, *x_BxTxD.shape), x_BxTxD.dtype)
  return x_BxTxD, past.at[0].set(x_BxTxD)


def run_layer(layer, stream, rope, index):
  """X_i = B_i(Y_(i-1)) into the buffer, then Y_i = the weighted average."""
  y, past = stream
  index = jnp.asarray(0 if index is None else index, jnp.int32)
  x, stats = layer(y, rope, index)
  past = jax.lax.dynamic_update_index_in_dim(past, x, index + 1, 0)
  return (layer.residuals["layer"](past, index), past), stats


def layer_module(cfg, *, layer_index, **_) -> DepthWeights:
  index = jnp.asarray(0 if layer_index is None else layer_index, jnp.int32)
  return DepthWeights(cfg.num_layers, index)


VARIANTS = (
  Residual(
    "denseformer",
    "DenseFormer: x + F, then a learned average of every earlier block output (DWA)",
    make=lambda cfg, *, rngs, **_: residual_lib.Residual("add", cfg.d_model, rngs=rngs),
    layer_module=layer_module,
    stream_in=stream_in,
    stream_out=lambda stream: stream[0],
    run_layer=run_layer,
  ),
)
