"""One decoder layer: where the norms sit and how the residuals combine.

Per sub-layer F (`res` the residual rule), the placement variant (model.norm_position,
resnorm_jax/model/variants/) says where the norms sit: h = its branch input, F(h) through its
branch output, then res(x, F) through its stream output; e.g. post: x = N(res(x, F(x))),
pre: x = res(x, F(N(x))).
Parallel block (PaLM): F(h) = Attn(h) + FFN(h), one residual and one norm per slot.
A residual variant may widen the stream (hyper-connections: n copies [B, T, n, D]); its
module then wraps the branch: it reads a mix of the copies and writes into each.

The layer index l is scan data (model.py): a placement that depends on it (LayerNorm
scaling's factor, Mix-LN's switch) computes values carried through one scanned stack.

Under a depth parametrization (model.depth_param, depth_param.py) every branch output F is
multiplied by m_L^-alpha before res(x, F); the `<branch>_rms` statistics are F's before it.

Every layer also returns its statistics (RMS over batch, time and channels, float32):
`stream_rms` after the layer, `<slot>_in_rms` at every norm's input and `<branch>_rms` of
each branch output, so the scanned stack yields per-layer arrays of them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model import depth_param, stream_sharding, variants
from resnorm_jax.model.attention import Attention
from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.model.mlp import MLP
from resnorm_jax.model.norms import rms


class Block(nnx.Module):
  """A decoder layer built from the config's placement, residual and block axes."""

  def __init__(
    self, cfg: ModelConfig, rule: InitRule, rngs: nnx.Rngs, layer_index: jax.Array | None = None
  ):
    self.cfg = cfg
    self.parallel = cfg.block == "parallel"
    placement = variants.placement(cfg.norm_position)
    self.attn = Attention(cfg, rule, rngs)
    self.mlp = MLP(cfg, rule, rngs)

    def norm():
      return variants.config_norm(cfg, cfg.d_model)

    slots = ("block",) if self.parallel else ("attn", "ffn")
    combine = variants.residual(cfg.residual)
    self.wraps_branch = combine.wraps_branch
    # The depth parametrization's m_L^-alpha on every branch output (1.0: not applied).
    self.branch_multiplier = depth_param.branch_multiplier(cfg)
    # Norm modules per slot, as the placement asks: `<slot>_norm` (the branch input's or the
    # stream's) and `<slot>_out_norm` (on the branch output: sandwich).
    normed = placement.norm_slots(cfg, slots) if placement.norms else ()
    self.norms = nnx.Dict({s: norm() for s in normed})
    self.out_norms = nnx.Dict({s: norm() for s in slots} if placement.out_norms else {})
    # The residual module of each slot, as the residual variant makes it.
    self.residuals = nnx.Dict(
      {
        s: combine.make(
          cfg, slot=i, num_slots=len(slots), layer_index=layer_index, norm=norm, rngs=rngs
        )
        for i, s in enumerate(slots)
      }
    )
    # A module the residual variant keeps per layer (DenseFormer's averaging weights).
    extra = combine.layer_module(cfg, layer_index=layer_index, rngs=rngs)
    if extra is not None:
      self.residuals["layer"] = extra

  @property
  def placement(self) -> variants.Placement:
    return variants.placement(self.cfg.norm_position)

  def _branch(self, slot: str, x, branch_fn, stats: dict, index):
    """F(x) with this placement's input and output norms (not a norm of the stream)."""
    h = self.placement.branch_input(self, slot, x, stats, index)
    return self.placement.branch_output(self, slot, branch_fn(h, stats), stats)

  def _sublayer(self, slot: str, x, branch_fn, stats: dict, index=None):
    """One residual sub-layer at this block's placement."""
    if self.wraps_branch:  # e.g. hyper-connections: F reads a mix of n streams
      return self.residuals[slot](x, lambda h: self._branch(slot, h, branch_fn, stats, index))
    f = self._branch(slot, x, branch_fn, stats, index)
    if self.branch_multiplier != 1.0:
      f = f * jnp.asarray(self.branch_multiplier, f.dtype)
    y = self.residuals[slot](x, f)
    return self.placement.stream_output(self, slot, x, y, stats, index)

  def __call__(
    self, x_BxTxD: jax.Array, rope=None, index: jax.Array | None = None, shared: dict | None = None
  ):
    """(x after the layer, stats); `index` is the 0-based layer index (scan data).

    `shared`: what the residual variant's run_layer carries across layers for attention
    (value residuals' first-layer values); attention reads and updates it in place.
    """
    stats: dict[str, jax.Array] = {}

    def attn(h, st):
      a = self.attn(h, rope, shared, stats=st)
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
    x = stream_sharding.constrain(x)  # rows over the data-parallel axes, when jitted so
    stats["stream_rms"] = rms(x)
    # the largest activation of the stream (massive activations, Sun et al. 2024)
    stats["stream_max"] = jax.lax.stop_gradient(jnp.max(jnp.abs(x.astype(jnp.float32))))
    return x, stats
