"""Learned attention sinks (OpenAI gpt-oss, 2025; code openai/gpt-oss): one learned logit s_h
per head, a column of every row's softmax whose probability is dropped, so a query may give
less than all of its attention to the keys:

  p_ts = exp(l_ts) / (sum_(s' <= t) exp(l_ts') + exp(s_h)),   out_t = sum_s p_ts v_s

Reference code: gpt_oss/torch/model.py, `sdpa(Q, K, V, S, sm_scale, sliding_window)`: the
scaled, masked logits QK, `QK = torch.cat([QK, S], dim=-1)`, `W = torch.softmax(QK, dim=-1)`,
`W = W[..., :-1]`; `AttentionBlock.sinks` is a [num_attention_heads] parameter (bfloat16 there;
float32 here). The released weights are trained; here s_h starts at 0 (SINK_INIT): at init a
row of t keys gives the sink 1 / (t + 1) of its mass.

  model.attn_sinks=true   on (off by default)

The dense path appends the column to the logits. The xla path (jax.nn.dot_product_attention,
implementation='xla') gets the same softmax from one extra key and value of zeros, its
logit q.0 = 0 plus a bias of s_h, never masked: exp(s_h) joins the denominator and its value
adds nothing. The splash kernel (model.attention=splash) takes the sinks itself: its
running max starts at s_h and its denominator at exp(s_h) (gradient included). cuDNN's
kernel (model.attention=cudnn, or fused on a GPU in bfloat16) is refused: its sequence must
keep its length and mask (model/attention_paths.py, the paths that apply the attn_sink hook).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model.variants.hooks import Column, Feature, Key

SINK_INIT = 0.0


class Sink(nnx.Module):
  """One learned logit per head [H], added to every row's softmax denominator."""

  def __init__(self, num_heads: int):
    self.logits = nnx.Param(jnp.full((num_heads,), SINK_INIT, jnp.float32), out_sharding=(None,))

  def __call__(self) -> jax.Array:
    return self.logits[...]


VARIANTS = (
  Feature(
    "sinks",
    "learned attention sinks: one logit per head in every softmax's denominator (gpt-oss)",
    keys={
      "attn_sinks": Key(
        False,
        "a learned sink logit per head in the softmax",
        hparam=Column("attn_sinks", 158),
      )
    },
    on=lambda cfg: cfg.attn_sinks,
    turned_on={"attn_sinks": True},
    attn_sink=lambda cfg: Sink(cfg.num_heads) if cfg.attn_sinks else None,
  ),
)
