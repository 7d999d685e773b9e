"""One decoder layer: where the norms sit and how the residuals combine.

Placements (per sub-layer F, `res` the residual rule, N a norm, l the 0-based layer index):
  post: x = N(res(x, F(x)))          pre: x = res(x, F(N(x)))
  peri: x = res(x, N'(F(N(x))))      none: x = res(x, F(x))
  subln (Sub-LN, Magneto): pre, plus a norm inside F before its output projection
        (attention.py, mlp.py)
  lnscale (LayerNorm scaling, Sun 2025): x = res(x, F(N(x) / sqrt(l + 1)))
  mix (Mix-LN, Li 2024): post for l < floor(model.mixln_post_fraction * L), pre after
Parallel block (PaLM): F(h) = Attn(h) + FFN(h), one residual and one norm per slot.
Hyper-connections (residual=hyperconn): the stream is n copies [B, T, n, D]; the branch
reads a mix of them and writes into each (resnorm_jax/hyperconn.py).
nGPT (residual=ngpt, placement none): x = Norm(x + alpha (Norm(F(x)) - x)) (resnorm_jax/ngpt.py).

The layer index l is scan data (model.py), so lnscale's factor and mix's switch are
values carried through one scanned stack, not a second stack.

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
from resnorm_jax.hyperconn import HyperConnection
from resnorm_jax.initializers import InitRule
from resnorm_jax.mlp import MLP
from resnorm_jax.ngpt import SphereUpdate
from resnorm_jax.norms import config_norm
from resnorm_jax.residual import Residual


def rms(x: jax.Array) -> jax.Array:
  """Root mean square over every element, in float32."""
  return jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32))))


def lnscale_factor(index: jax.Array) -> jax.Array:
  """LayerNorm scaling (Sun 2025, arXiv 2502.05795): 1/sqrt(l) for 1-based layer l."""
  return jax.lax.rsqrt(jnp.asarray(index, jnp.float32) + 1.0)


def mixln_num_post(num_layers: int, fraction: float) -> int:
  """Mix-LN (Li 2024, arXiv 2412.13795): the first floor(alpha * L) layers are Post-LN."""
  return int(fraction * num_layers)


class Block(nnx.Module):
  """A decoder layer built from the config's placement, residual and block axes."""

  def __init__(
    self, cfg: ModelConfig, rule: InitRule, rngs: nnx.Rngs, layer_index: jax.Array | None = None
  ):
    self.norm_position = cfg.norm_position
    self.parallel = cfg.block == "parallel"
    self.num_post = mixln_num_post(cfg.num_layers, cfg.mixln_post_fraction)
    self.attn = Attention(cfg, rule, rngs)
    self.mlp = MLP(cfg, rule, rngs)

    def norm():
      return config_norm(cfg, cfg.d_model)

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
    has_norm = self.norm_position != "none"
    # Norm modules per slot: `<slot>_norm` (input side for pre/peri, output for post) and
    # `<slot>_out_norm` (peri only, on the branch output).
    self.norms = nnx.Dict({s: norm() for s in slots} if has_norm else {})
    self.out_norms = nnx.Dict({s: norm() for s in slots} if self.norm_position == "peri" else {})
    if cfg.residual == "hyperconn":
      # Sub-layer k = len(slots) * l + slot: attention and FFN are separate hyper-layers.
      k = len(slots) * jnp.asarray(0 if layer_index is None else layer_index, jnp.int32)
      self.residuals = nnx.Dict(
        {
          s: HyperConnection(
            cfg.hyperconn_rate, cfg.d_model, k + i, dynamic=cfg.hyperconn_dynamic, norm=norm
          )
          for i, s in enumerate(slots)
        }
      )
    elif cfg.residual == "ngpt":
      self.residuals = nnx.Dict({s: SphereUpdate(cfg.d_model, cfg.ngpt_alpha_init) for s in slots})
    else:
      self.residuals = nnx.Dict({s: residual() for s in slots})
    self.hyper = cfg.residual == "hyperconn"

  def _is_post(self, index) -> jax.Array:
    """mix: whether layer `index` is one of the Post-LN layers."""
    if index is None:
      raise ValueError("norm_position=mix needs the layer index (scan data)")
    return jnp.asarray(index) < self.num_post

  def _branch(self, slot: str, x, branch_fn, stats: dict, index):
    """F(x) with this placement's input and output norms (not the post/mix output norm)."""
    pos = self.norm_position
    h = x
    if pos in ("pre", "peri", "subln", "lnscale"):
      stats[f"{slot}_norm_in_rms"] = rms(x)
      h = self.norms[slot](x)
      if pos == "lnscale":
        if index is None:
          raise ValueError("norm_position=lnscale needs the layer index (scan data)")
        h = h * lnscale_factor(index).astype(h.dtype)
    elif pos == "mix":  # Pre-LN layers normalize the branch input, Post-LN layers do not
      h = jnp.where(self._is_post(index), x, self.norms[slot](x))
    f = branch_fn(h, stats)
    if pos == "peri":
      stats[f"{slot}_out_norm_in_rms"] = rms(f)
      f = self.out_norms[slot](f)
    return f

  def _sublayer(self, slot: str, x, branch_fn, stats: dict, index=None):
    """One residual sub-layer at this block's placement."""
    if self.hyper:
      return self.residuals[slot](x, lambda h: self._branch(slot, h, branch_fn, stats, index))
    pos = self.norm_position
    f = self._branch(slot, x, branch_fn, stats, index)
    y = self.residuals[slot](x, f)
    if pos == "post":
      stats[f"{slot}_norm_in_rms"] = rms(y)
      y = self.norms[slot](y)
    elif pos == "mix":
      is_post = self._is_post(index)
      stats[f"{slot}_norm_in_rms"] = jnp.where(is_post, rms(y), rms(x))
      y = jnp.where(is_post, self.norms[slot](y), y)
    return y

  def __call__(self, x_BxTxD: jax.Array, rope=None, index: jax.Array | None = None):
    """(x after the layer, stats); `index` is the 0-based layer index (lnscale, mix)."""
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
      both = lambda h, st: attn(h, st) + ffn(h, st)
      x = self._sublayer("block", x_BxTxD, both, stats, index)
    else:
      x = self._sublayer("attn", x_BxTxD, attn, stats, index)
      x = self._sublayer("ffn", x, ffn, stats, index)
    stats["stream_rms"] = rms(x)
    return x, stats
