"""HybridNorm (Zhuo et al. 2025, arXiv 2503.04598; code: BryceZhuo/HybridNorm).

QKV normalization inside attention with no norm in front of it, and Post-Norm around the
FFN. Per layer, as the paper's eq. and its reference code (dense_model/olmo/model.py with
configs/exps/1.2B-dense-HybriedNorm.yaml: attn_norm false, use_{query,key,value}_norm true,
ffn_norm true, ffn_residual_after_norm true):

  y  = x + Attn_QKV(x)            Attn_QKV: q, k, v each normalized per head (attention.py)
  x' = FFN(N(y)) + N(y)           one norm, `<ffn>_norm`, whose output is also the skip

so the stream is normalized once per layer, between the two sub-layers (Post-Norm of the
attention residual, which is the FFN's input and skip), and the model ends with a final norm
(the reference's ln_f; `final_norm=auto` adds it: the stream after the FFN is not normalized).

HybridNorm* (`model.hybridnorm_first_pre=true`; the reference's norm_pos_special_config
"{0: {'attn_norm': True, 'ffn_residual': False}}"): the first layer is Pre-Norm,
x + Attn_QKV(N_a(x)), then y + FFN(N(y)), with a second norm `<attn>_norm` in every layer
(the stack's layers share one structure; only layer 0 uses it).
"""

from __future__ import annotations

import jax.numpy as jnp

from resnorm_jax.model.norms import rms
from resnorm_jax.model.variants.hooks import Key, Placement


def _first(block, index):
  """Whether this is layer 0 of HybridNorm* (a traced bool), or None for plain HybridNorm."""
  if not block.cfg.hybridnorm_first_pre:
    return None
  if index is None:
    raise ValueError("norm_position=hybridnorm with hybridnorm_first_pre needs the layer index")
  return index == 0


def branch_input(block, slot: str, x, stats: dict, index):
  """attn: x (layer 0 of HybridNorm*: N_a(x)); ffn: x, already N(y) (layer 0 of HybridNorm*:
  N(y), the skip kept unnormalized)."""
  first = _first(block, index)
  if first is None:
    return x
  if slot == "attn":
    stats["attn_norm_in_rms"] = rms(x)
  return jnp.where(first, block.norms[slot](x), x)  # ffn's input statistic: stream_output


def stream_output(block, slot: str, x, y, stats: dict, index):
  """attn: N(x + Attn), the FFN's input and skip (layer 0 of HybridNorm*: x + Attn)."""
  if slot != "attn":
    return y
  first = _first(block, index)
  stats["ffn_norm_in_rms"] = rms(y)
  normed = block.norms["ffn"](y)
  return normed if first is None else jnp.where(first, y, normed)


def norm_slots(cfg, slots: tuple[str, ...]) -> tuple[str, ...]:
  """One norm per layer (the FFN's), two for HybridNorm* (its first layer's attention)."""
  return slots if cfg.hybridnorm_first_pre else ("ffn",)


def check(cfg) -> None:
  """Attention and FFN must be separate sub-layers; q, k, v are normalized here already."""
  if cfg.block != "sequential":
    raise ValueError(
      f"model.norm_position=hybridnorm needs model.block='sequential' (Post-Norm sits between "
      f"attention and FFN); model.block={cfg.block!r}; valid: sequential"
    )
  if cfg.qk_norm:
    raise ValueError(
      "model.norm_position=hybridnorm normalizes q, k and v itself; model.qk_norm=True would "
      "add a second norm on q and k: set model.qk_norm=false"
    )


VARIANTS = (
  Placement(
    "hybridnorm",
    "HybridNorm: QKV-norm attention without a pre-norm, Post-Norm around the FFN",
    keys={
      "hybridnorm_first_pre": Key(
        False, "HybridNorm*: the first layer Pre-Norm (attention and FFN)"
      ),
    },
    check=check,
    pre_like=True,
    normalizes_stream=True,
    qkv_norm=True,
    norm_slots=norm_slots,
    branch_input=branch_input,
    stream_output=stream_output,
  ),
)
