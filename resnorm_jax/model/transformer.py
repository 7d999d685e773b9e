"""The decoder-only LM: embed -> scanned stack of blocks -> final norm (if any) -> logits.

Legend: B batch, T time, D model width, V vocab, L layers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model import depth_param, stream_sharding, variants, width_param
from resnorm_jax.model.attention import rope_tables
from resnorm_jax.model.block import Block
from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.model.layers import Dense, Embed
from resnorm_jax.model.norms import rms

REMAT_POLICIES = {
  "full": None,  # save nothing inside a layer: recompute it all on the backward pass
  "dots": jax.checkpoint_policies.checkpoint_dots,
  "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def init_rule(cfg: ModelConfig) -> InitRule:
  """The init rule with its depth-dependent constants (at model.base_depth under a depth
  parametrization: depth_param.py) and its width constants (at model.base_width under muP,
  with hidden matrices x m_d^-1/2: width_param.py)."""
  n = depth_param.constants_depth(cfg.depth_param, cfg.num_layers, cfg.base_depth)
  return InitRule(
    cfg.init,
    n,
    width_param.constants_width(cfg),
    std=cfg.init_std,
    beta=cfg.init_beta,
    width_multiplier=width_param.width_multiplier(cfg),
  )


def _block_body(stream, layer: Block, rope, index):
  """One layer on the stream, through the residual variant's run_layer (default: the layer)."""
  return variants.residual(layer.cfg.residual).run_layer(layer, stream, rope, index)


class Transformer(nnx.Module):
  """Decoder-only Transformer whose L layers are stacked weights run by nnx.scan."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    rule = init_rule(cfg)
    # nGPT's input is the unit-norm embedding row itself.
    combine = variants.residual(cfg.residual)
    self.embed_scale = combine.embed_scale(rule)  # nGPT: 1, the unit-norm rows themselves
    # Logical axis names live in the variables' metadata; sharding.py maps them to the mesh
    # later, so nothing needs a mesh at construction time.
    with nnx.use_eager_sharding(False):
      self.embed = Embed(
        rngs.params(), cfg.vocab_size, cfg.d_model, rule.embed_std(), ("vocab", "embed")
      )
      self.pos_embed = (
        Embed(rngs.params(), cfg.max_seq_len, cfg.d_model, 0.02, (None, "embed"))
        if cfg.position == "learned"
        else None
      )

      # The layer index is vmapped data: hyper-connections initialize from it.
      @nnx.split_rngs(splits=cfg.num_layers)
      @nnx.vmap(in_axes=(0, 0), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
      def make_layers(rngs: nnx.Rngs, index: jax.Array) -> Block:
        return Block(cfg, rule, rngs, index)

      self.layers = make_layers(rngs, jnp.arange(cfg.num_layers, dtype=jnp.int32))
      _name_layer_axis(self.layers)
      self.final_norm = variants.config_norm(cfg, cfg.d_model) if cfg.final_norm else None
      self.head = (
        None
        if cfg.tie_embeddings
        else Dense(rngs.params(), rule, "head", (cfg.d_model, cfg.vocab_size), ("embed", "vocab"))
      )
      self.logit_scale = combine.logit_scale(cfg)  # nGPT's s_z; None for most variants
      # A feature's map on the output logits (softcapping), last of all; None: off.
      self.logit_map = variants.feature_module(cfg, "out_logits")
    # e.g. nGPT's weights put on the sphere; Admin's profiling pass, then its omegas.
    combine.init_stage(self, rngs)

  def embed_tokens(self, tokens_BxT: jax.Array) -> jax.Array:
    """The stack's input [B, T, D] in the compute dtype: scaled token rows plus positions."""
    t = tokens_BxT.shape[1]
    x = self.embed(tokens_BxT) * self.embed_scale
    if self.pos_embed is not None:
      x = x + self.pos_embed.embedding[:t][None]
    return stream_sharding.constrain(x.astype(COMPUTE_DTYPES[self.cfg.dtype]))

  def __call__(self, tokens_BxT: jax.Array, *, scan: bool = True):
    """Returns (logits [B,T,V] float32, stats); stats["layers"] holds per-layer [L] arrays."""
    cfg = self.cfg
    b, t = tokens_BxT.shape
    if t > cfg.max_seq_len and cfg.position == "learned":
      raise ValueError(f"sequence length {t} > model.max_seq_len={cfg.max_seq_len}")
    x = self.embed_tokens(tokens_BxT)
    rope = rope_tables(t, cfg.head_dim) if cfg.position == "rope" else None
    combine = variants.residual(cfg.residual)
    x = combine.stream_in(x, cfg)  # e.g. hyper-connections' n copies of the stream
    x, layer_stats = self.run_stack(x, rope) if scan else self.run_loop(x, rope)
    x = combine.stream_out(x)
    stats = {"layers": layer_stats}
    if self.final_norm is not None:
      stats["final_norm_in_rms"] = rms(x)
      x = self.final_norm(x)
    logits = self.embed.attend(x) if self.head is None else self.head(x)
    out_mult = width_param.output_multiplier(cfg)  # muP's 1/m_d (1.0: not applied)
    if out_mult != 1.0:
      logits = logits * jnp.asarray(out_mult, logits.dtype)
    if self.logit_scale is not None:
      logits = self.logit_scale(logits)
    if self.logit_map is not None:
      logits = self.logit_map(logits.astype(jnp.float32))
    return logits.astype(jnp.float32), stats

  def run_stack(self, x_BxTxD: jax.Array, rope):
    """The layer stack as one nnx.scan (optionally rematerialized): compile time flat in L.

    model.scan_unroll > 1 runs that many layers per loop iteration (the whole stack when it
    is >= L): the same values, compile time growing with the unrolled layers.
    """
    body = _block_body
    if self.cfg.remat != "none":
      body = nnx.remat(body, policy=REMAT_POLICIES[self.cfg.remat], prevent_cse=False)
    # unroll >= L: straight-line code, no while loop and no stacked per-layer activations.
    unroll = min(self.cfg.scan_unroll, self.cfg.num_layers)
    scan = nnx.scan(body, in_axes=(nnx.Carry, 0, None, 0), out_axes=(nnx.Carry, 0), unroll=unroll)
    return scan(x_BxTxD, self.layers, rope, jnp.arange(self.cfg.num_layers, dtype=jnp.int32))

  def run_loop(self, x_BxTxD: jax.Array, rope):
    """The same stack as a Python loop over layer slices (a reference for tests)."""
    graphdef, state = nnx.split(self.layers)
    per_layer, layer_stats = [], []
    for i in range(self.cfg.num_layers):
      layer = nnx.merge(graphdef, jax.tree.map(lambda a, i=i: a[i], state))
      x_BxTxD, st = _block_body(x_BxTxD, layer, rope, jnp.int32(i))
      per_layer.append(st)
      layer_stats.append(nnx.state(layer, nnx.BatchStat))
    # The merged slices are copies: write their batchnorm updates back, as the scan does.
    nnx.update(self.layers, jax.tree.map(lambda *a: jnp.stack(a), *layer_stats))
    return x_BxTxD, jax.tree.map(lambda *a: jnp.stack(a), *per_layer)


def _name_layer_axis(layers: nnx.Module) -> None:
  """Names the stacked axis of per-layer scalars 'layers' too.

  nnx.vmap adds 'layers' only to non-empty names, so a scalar (ReZero's a, DyT's alpha)
  would stack to shape [L] with names (): a rank mismatch for the sharding rules.
  """
  for _, v in nnx.iter_graph(layers):
    if isinstance(v, nnx.Variable):
      names = tuple(v.get_metadata().get("out_sharding") or ())
      ndim = len(v.shape)
      if len(names) < ndim:
        v.set_metadata("out_sharding", ("layers",) * (ndim - len(names)) + names)
