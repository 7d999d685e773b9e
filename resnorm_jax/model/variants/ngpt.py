"""nGPT (Loshchilov et al. 2024, arXiv 2410.01131): the normalized Transformer.

Legend: B batch, T time, D model width, H heads, K head dim, F FFN width, V vocab.
Norm(x) = x / ||x||_2 over the last axis (no mean, no gain: not a LayerNorm).

`model.residual = ngpt` (with `norm_position = none`: no LayerNorm anywhere) makes

  embedding rows, hidden states and every weight vector along the embedding axis unit norm;
  attention  q <- Norm(q) * s_qk, k <- Norm(k) * s_qk     (per head, after RoPE; the paper
             softmax(q k^T * sqrt(K))                      puts sqrt(d_k) where GPT has
                                                           1/sqrt(d_k): q.k is a cosine)
  MLP        u <- u * s_u, v <- v * s_v * sqrt(D),  (u * silu(v)) W_o   (SwiGLU, u = x W_in,
                                                                        v = x W_gate)
  update     h <- Norm(h + alpha_A * (Norm(Attn(h)) - h))   (per sub-layer, alpha per channel:
             h <- Norm(h + alpha_M * (Norm(MLP(h)) - h))     the "eigen learning rates")
  logits     z = (E_out h) * s_z                             (no final norm: h is unit norm)

Every learnable scale s (and alpha) is stored as `s_scale * 1` and used as
`stored * (s_init / s_scale)`, the paper's trick for giving it its own effective learning
rate under Adam (which is invariant to a parameter's scale):

  | factor      | shape     | s_init        | s_scale      |
  | alpha_A/M   | [D]       | 0.05 (model.ngpt_alpha_init) | 1/sqrt(D) |
  | s_qk        | [H*K]=[D] | 1             | 1/sqrt(D)    |
  | s_u, s_v    | [F]       | 1             | 1            |
  | s_z         | [V]       | 1             | 1/sqrt(D)    |

The weights E_in [V, D], E_out, W_q, W_k, W_v ([D, H*K]), W_o ([H*K, D]), W_in, W_gate
([D, F]) and W_o of the MLP ([F, D]) are normalized along their embedding (D) axis at init
and after every optimizer step. Here that is the axis whose logical name is "embed", and the
projection is an optax GradientTransformation (`hypersphere_projection`, the variant's
optimizer transformation) that make_optimizer chains after the optimizer: its updates are
`Norm(p + u) - p`, so `p + updates` is on the sphere. Pure jnp on whatever sharding the
arrays have: the norm over a sharded "embed" axis is a reduction XLA turns into a collective.

Kept from the paper: all of the above; no weight decay (opt.weight_decay=0) and no warmup
(opt.warmup_steps=0), which are this project's defaults anyway; untied embeddings in the
named config (the paper's; tied also works: one table, normalized once).
Where the paper or its code leaves a choice:
  - alpha is used as stored (signed), the paper's formula; the official code (NVIDIA/ngpt)
    takes |alpha|. It starts at 0.05 > 0 either way.
  - s_qk multiplies Norm(q) after RoPE, as in the official code (RoPE rotates within each
    head, so it commutes with Norm but not with a per-channel s_qk).
  - s_v alone is multiplied by sqrt(D) (the paper's text); the official code multiplies both
    s_u and s_v by sqrt(D). We follow the text.
  - alpha_init stays 0.05 at every depth (the paper's value, chosen for its 24- and 36-layer
    models; it may want to shrink with depth); model.ngpt_alpha_init changes it.
Left out: the paper's optimizer settings (its code: AdamW b2=0.95, grad clip 1, cosine to 0,
lr per model size): the stability map runs every variant under one setting (Adam b2=0.98,
constant lr 1e-3, no clipping); `--config.opt.schedule=cosine` etc. are one key away.
Refused (`check`, when ModelConfig is built): learned position tables (nGPT uses RoPE),
GELU/ReLU FFNs (s_u, s_v are SwiGLU's), qk_norm (nGPT normalizes q and k itself), a final
norm, the parallel block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from resnorm_jax.model.variants.hooks import Key, Residual

ALPHA_INIT = 0.05  # the paper's alpha_A,init = alpha_M,init (model.ngpt_alpha_init)
SQK_INIT = SU_INIT = SV_INIT = SZ_INIT = 1.0
# Leaves that are weight matrices: normalized along their "embed" axis (layers.py names).
WEIGHT_NAMES = frozenset({"kernel", "embedding"})
_TINY = 1e-30  # keeps Norm(0) finite (0, not NaN); unit vectors never come near it


def unit(x: jax.Array, axis: int = -1) -> jax.Array:
  """x / ||x||_2 along `axis`, computed in float32, returned in x's dtype."""
  x32 = x.astype(jnp.float32)
  inv = jax.lax.rsqrt(jnp.maximum(jnp.sum(jnp.square(x32), axis=axis, keepdims=True), _TINY))
  return (x32 * inv).astype(x.dtype)


class Scale(nnx.Module):
  """A learnable vector s stored as `scale` and used as stored * (init / scale)."""

  def __init__(self, size: int, init: float, scale: float, axis: str | None):
    self.s = nnx.Param(jnp.full((size,), scale, jnp.float32), out_sharding=(axis,))
    self.restore = init / scale  # a Python float: static, not state

  def __call__(self) -> jax.Array:
    return self.s[...] * self.restore


class SphereUpdate(nnx.Module):
  """The residual of one sub-layer: h <- Norm(h + alpha * (Norm(F) - h))."""

  def __init__(self, dim: int, alpha_init: float = ALPHA_INIT):
    self.alpha = Scale(dim, alpha_init, 1 / math.sqrt(dim), "embed")

  def __call__(self, h_BxTxD: jax.Array, f_BxTxD: jax.Array) -> jax.Array:
    alpha = self.alpha().astype(h_BxTxD.dtype)
    return unit(h_BxTxD + alpha * (unit(f_BxTxD) - h_BxTxD))


class QKScale(nnx.Module):
  """q <- Norm(q) s_qk, k <- Norm(k) s_qk per head; the softmax then scales by sqrt(K)."""

  def __init__(self, num_heads: int, head_dim: int):
    d = num_heads * head_dim
    self.s_qk = Scale(d, SQK_INIT, 1 / math.sqrt(d), "heads")
    self.shape = (num_heads, head_dim)

  def __call__(self, q_BxTxHxK: jax.Array, k_BxSxHxK: jax.Array):
    s = self.s_qk().reshape(self.shape).astype(q_BxTxHxK.dtype)
    return unit(q_BxTxHxK) * s, unit(k_BxSxHxK) * s


def softmax_scale(head_dim: int) -> float:
  """sqrt(d_k): q.k of unit vectors is a cosine in [-1, 1] (GPT's 1/sqrt(d_k) inverted)."""
  return math.sqrt(head_dim)


class MLPScale(nnx.Module):
  """SwiGLU's u <- u s_u, v <- v s_v sqrt(D) before u * silu(v)."""

  def __init__(self, d_model: int, d_ff: int):
    self.s_u = Scale(d_ff, SU_INIT, 1.0, "mlp")
    self.s_v = Scale(d_ff, SV_INIT, 1.0, "mlp")
    self.sqrt_d = math.sqrt(d_model)

  def __call__(self, u_BxTxF: jax.Array, v_BxTxF: jax.Array):
    dtype = u_BxTxF.dtype
    return u_BxTxF * self.s_u().astype(dtype), v_BxTxF * (self.s_v() * self.sqrt_d).astype(dtype)


class LogitScale(nnx.Module):
  """z <- z s_z, one learnable factor per vocabulary entry."""

  def __init__(self, vocab_size: int, d_model: int):
    self.s_z = Scale(vocab_size, SZ_INIT, 1 / math.sqrt(d_model), "vocab")

  def __call__(self, logits_BxTxV: jax.Array) -> jax.Array:
    return logits_BxTxV * self.s_z().astype(logits_BxTxV.dtype)


# --- the weight normalization: at init (the init stage) and after every step (make_optimizer) -


def _embed_axis(name: str | None, names: tuple) -> int | None:
  """The axis a weight is normalized along: its 'embed' axis, for weight matrices only."""
  if name in WEIGHT_NAMES and "embed" in names and len(names) >= 2:
    return names.index("embed")
  return None


def normalize_weights(model: nnx.Module) -> None:
  """Puts every weight matrix of `model` on the sphere along its 'embed' axis (at init)."""
  for path, v in nnx.iter_graph(model):
    if isinstance(v, nnx.Param) and path:
      names = tuple(v.get_metadata().get("out_sharding") or ())
      axis = _embed_axis(path[-1], names)
      if axis is not None:
        v[...] = unit(v[...], axis)


def unit_norm_axes(param_specs: Any) -> dict[str, int]:
  """{keystr path: axis} of the leaves to normalize, from a ModelDef's logical axis names."""
  axes: dict[str, int] = {}

  def visit(path, names):
    key = path[-1].key if path and isinstance(path[-1], jax.tree_util.DictKey) else None
    axis = _embed_axis(key, tuple(names))
    if axis is not None:
      axes[jax.tree_util.keystr(path)] = axis

  jax.tree_util.tree_map_with_path(visit, param_specs, is_leaf=lambda x: isinstance(x, tuple))
  return axes


class ProjectionState(NamedTuple):
  """The projection's (empty) state: marks an optimizer state that projects (require_projection)."""


def require_projection(opt_state: Any) -> None:
  """ValueError unless the optimizer state comes from a chain with hypersphere_projection."""
  found = jax.tree_util.tree_leaves(opt_state, is_leaf=lambda x: isinstance(x, ProjectionState))
  if not any(isinstance(x, ProjectionState) for x in found):
    raise ValueError(
      "model.residual=ngpt needs its weights projected after every step: build the optimizer "
      "with make_optimizer(opt_cfg, steps, model_def) (resnorm_jax/train/optimizers/build.py)"
    )


def hypersphere_projection(axes: Mapping[str, int]) -> optax.GradientTransformation:
  """updates -> Norm(params + updates) - params on the leaves of `axes` ({keystr path: axis}).

  Chained last, `params + updates` then has unit-norm vectors along each listed axis; other
  leaves' updates pass through unchanged. Stateless; needs `params` in update().
  """

  def init_fn(params):
    del params
    return ProjectionState()

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError("hypersphere_projection needs the params (optimizer.update(g, s, params))")

    def one(path, u, p):
      axis = axes.get(jax.tree_util.keystr(path))
      if axis is None:
        return u
      return (unit(p + u, axis) - p).astype(u.dtype)

    return jax.tree_util.tree_map_with_path(one, updates, params), state

  return optax.GradientTransformation(init_fn, update_fn)


def check(cfg) -> None:
  """nGPT is defined with RoPE, SwiGLU, a sequential block and no LayerNorm anywhere."""
  needed = {
    "model.norm_position": (cfg.norm_position, "none"),
    "model.final_norm": (cfg.final_norm, False),
    "model.qk_norm": (cfg.qk_norm, False),
    "model.block": (cfg.block, "sequential"),
    "model.position": (cfg.position, "rope"),
    "model.ffn_activation": (cfg.ffn_activation, "swiglu"),
  }
  wrong = [f"{k}={v!r} (needs {want!r})" for k, (v, want) in needed.items() if v != want]
  if wrong:
    raise ValueError(
      "model.residual=ngpt (the normalized Transformer: its own L2 normalizations, no "
      f"LayerNorm; configs/ngpt_96L.py) refuses {', '.join(wrong)}"
    )
  if not cfg.ngpt_alpha_init > 0:
    raise ValueError(f"model.ngpt_alpha_init={cfg.ngpt_alpha_init!r} must be > 0")


def projection(model_def) -> optax.GradientTransformation:
  """The weights back on the sphere after every step (model_def: a ModelDef)."""
  return hypersphere_projection(unit_norm_axes(model_def.param_specs))


VARIANTS = (
  Residual(
    "ngpt",
    "nGPT: the normalized Transformer, h <- Norm(h + alpha (Norm(F(h)) - h)) on the sphere",
    keys={
      "ngpt_alpha_init": Key(
        ALPHA_INIT, "the eigen learning rates alpha_A, alpha_M at init (the paper's)"
      )
    },
    check=check,
    make=lambda cfg, **_: SphereUpdate(cfg.d_model, cfg.ngpt_alpha_init),
    embed_scale=lambda rule: 1.0,  # the input is the unit-norm embedding row itself
    qk_scale=lambda cfg: QKScale(cfg.num_heads, cfg.head_dim),
    softmax_scale=softmax_scale,
    mlp_scale=lambda cfg: MLPScale(cfg.d_model, cfg.d_ff),
    logit_scale=lambda cfg: LogitScale(cfg.vocab_size, cfg.d_model),
    # Weight rows on the sphere from the start, as after a step.
    init_stage=lambda model, rngs: normalize_weights(model),
    optimizer_transform=projection,
    check_opt_state=require_projection,
  ),
)
