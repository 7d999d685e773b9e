"""One decoder layer: where the norms sit and how the residuals combine.

Placements (per sub-layer F, `res` the residual rule, N a norm):
  post: x = N(res(x, F(x)))          pre: x = res(x, F(N(x)))
  peri: x = res(x, N'(F(N(x))))      none: x = res(x, F(x))
Parallel block (PaLM): F(h) = Attn(h) + FFN(h), one residual and one norm per slot.

Every layer also returns its statistics (RMS over batch, time and channels, float32):
`stream_rms` after the layer, `<slot>_in_rms` at every norm's input and `<branch>_rms` of
each branch output, so the scanned stack yields per-layer arrays of them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.attention import Attention
from resnorm_jax.config_types import ModelConfig
from resnorm_jax.initializers import InitRule
from resnorm_jax.mlp import MLP
from resnorm_jax.norms import make_norm
from resnorm_jax.residual import Residual


def rms(x: jax.Array) -> jax.Array:
  """Root mean square over every element, in float32."""
  return jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32))))


class Block(nnx.Module):
  """A decoder layer built from the config's placement, residual and block axes."""

  def __init__(self, cfg: ModelConfig, rule: InitRule, rngs: nnx.Rngs):
    self.position = cfg.norm_position
    self.parallel = cfg.block == "parallel"
    self.attn = Attention(cfg, rule, rngs)
    self.mlp = MLP(cfg, rule, rngs)

    def norm():
      return make_norm(
        cfg.norm,
        cfg.d_model,
        eps=cfg.norm_eps,
        batchnorm_momentum=cfg.batchnorm_momentum,
        dyt_alpha_init=cfg.dyt_alpha_init,
      )

    def residual():
      return Residual(
        cfg.residual,
        cfg.d_model,
        alpha=cfg.residual_alpha,
        scale=cfg.branch_scale,
        rezero_init=cfg.rezero_init,
        layerscale_init=cfg.layerscale_init,
        rngs=rngs,
      )

    slots = ("block",) if self.parallel else ("attn", "ffn")
    has_norm = self.position != "none"
    # Norm modules per slot: `<slot>_norm` (input side for pre/peri, output for post) and
    # `<slot>_out_norm` (peri only, on the branch output).
    self.norms = nnx.Dict({s: norm() for s in slots} if has_norm else {})
    self.out_norms = nnx.Dict({s: norm() for s in slots} if self.position == "peri" else {})
    self.residuals = nnx.Dict({s: residual() for s in slots})

  def _sublayer(self, slot: str, x, branch_fn, stats: dict):
    """One residual sub-layer at this block's placement."""
    pos = self.position
    h = x
    if pos in ("pre", "peri"):
      stats[f"{slot}_norm_in_rms"] = rms(x)
      h = self.norms[slot](x)
    f = branch_fn(h, stats)
    if pos == "peri":
      stats[f"{slot}_out_norm_in_rms"] = rms(f)
      f = self.out_norms[slot](f)
    y = self.residuals[slot](x, f)
    if pos == "post":
      stats[f"{slot}_norm_in_rms"] = rms(y)
      y = self.norms[slot](y)
    return y

  def __call__(self, x_BxTxD: jax.Array, rope=None):
    stats: dict[str, jax.Array] = {}

    def attn(h, st):
      a = self.attn(h, rope)
      st["attn_branch_rms"] = rms(a)
      return a

    def ffn(h, st):
      f = self.mlp(h)
      st["ffn_branch_rms"] = rms(f)
      return f

    if self.parallel:
      x = self._sublayer("block", x_BxTxD, lambda h, st: attn(h, st) + ffn(h, st), stats)
    else:
      x = self._sublayer("attn", x_BxTxD, attn, stats)
      x = self._sublayer("ffn", x, ffn, stats)
    stats["stream_rms"] = rms(x)
    return x, stats
