"""Value residual learning (Zhou et al. 2024, arXiv 2410.17897, "ResFormer").

Legend: B batch, T time, H heads, K head dim.

Every layer's attention mixes its values with the first layer's (the paper's eq.: U_n =
A_n (lambda_1 V_n + lambda_2 V_1), with A_n the layer's attention probabilities):

  V'_1 = V_1,     V'_n = lambda_(n,1) V_n + lambda_(n,2) V_1   (n > 1)

lambda_(n,1), lambda_(n,2) are learnable scalars per layer, initialized to 1 - lambda_0 and
lambda_0 (`model.valueres_lambda_init`, default 0.5: the paper's ResFormer, lambda_1 =
lambda_2 = 0.5, which its learnable variant starts from). V are the values attention uses:
after the value projection (and after HybridNorm's value norm, if that placement is chosen).
The skip paths are plain x + F.

The first layer's values cross the scanned stack in its carry: the stream is (x, V_1) with
V_1 [B, T, H, K]; layer 0 writes it, every later layer reads it (run_layer below).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.config.keys import unit_interval
from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model.variants.hooks import Key, Residual


class ValueMix(nnx.Module):
  """V' = lambda_1 V + lambda_2 V_1 (the first layer: V' = V, and it records V_1)."""

  def __init__(self, lambda_init: float):
    init = jnp.array([1.0 - lambda_init, lambda_init], jnp.float32)
    self.lambdas = nnx.Param(init, out_sharding=(None,))

  def __call__(self, v_BxTxHxK: jax.Array, shared: dict | None) -> jax.Array:
    if shared is None:  # attention called on its own: a first layer
      return v_BxTxHxK
    first = shared["first"]
    v1 = jnp.where(first, v_BxTxHxK, shared["values"])
    shared["values"] = v1
    lam = self.lambdas[...].astype(v_BxTxHxK.dtype)
    return jnp.where(first, v_BxTxHxK, lam[0] * v_BxTxHxK + lam[1] * v1)


def stream_in(x_BxTxD: jax.Array, cfg) -> tuple[jax.Array, jax.Array]:
  """(x, V_1) with V_1 zeros until layer 0 writes it."""
  b, t, _ = x_BxTxD.shape
  return x_BxTxD, jnp.zeros((b, t, cfg.num_heads, cfg.head_dim), x_BxTxD.dtype)


def run_layer(layer, stream, rope, index):
  """The layer with V_1 shared with its attention; layer 0 (index 0) records it."""
  x, values = stream
  shared = {"first": jnp.asarray(0 if index is None else index) == 0, "values": values}
  x, stats = layer(x, rope, index, shared)
  return (x, shared["values"]), stats


VARIANTS = (
  Residual(
    "valueres",
    "value residual learning: x + F, each layer's values mixed with the first layer's",
    keys={
      "valueres_lambda_init": Key(
        0.5,
        "weight of the first layer's values at init (lambda_2; lambda_1 = 1 - it)",
        unit_interval,
      ),
    },
    make=lambda cfg, *, rngs, **_: residual_lib.Residual("add", cfg.d_model, rngs=rngs),
    value_mix=lambda cfg: ValueMix(cfg.valueres_lambda_init),
    stream_in=stream_in,
    stream_out=lambda stream: stream[0],
    run_layer=run_layer,
  ),
)
