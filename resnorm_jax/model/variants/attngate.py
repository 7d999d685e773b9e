"""Gated attention (Qiu et al. 2025, arXiv 2505.06708; code qiuzh20/gated_attention): a
sigmoid gate on each head's attention output before the output projection, the paper's G1
position,

  Y' = Y * sigmoid(X W_g),   out = Y' W_o

X the attention's input (the block's normalised input under Pre-LN; whatever the placement
feeds attention otherwise), Y the heads' concatenated output softmax(Q K^T / sqrt(K)) V.

  model.attn_gate=elementwise  one gate per head and channel: W_g [D, H K] (the paper's
                               recommended form; its config `elementwise_attn_output_gate`)
  model.attn_gate=headwise     one gate per head, shared by its K channels: W_g [D, H]
                               (`headwise_attn_output_gate`)
  model.attn_gate=off          no gate (the default)

Reference code: the repository's modeling_qwen3.py (Qwen3Attention) widens q_proj by H K
(elementwise) or H (headwise) outputs, splits them off per head as `gate_score`, and multiplies
`attn_output * torch.sigmoid(gate_score)` before o_proj. Here W_g is its own matrix, drawn as
the query's (the columns the reference adds to q_proj): the same function. The gate acts on
the heads' output before Sub-LN's norm, if that placement is chosen (the gate is part of
attention's output, the norm of the projection's input). Every attention implementation
(dense, xla, cudnn): the gate acts on the output, not on the logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model.layers import Dense
from resnorm_jax.model.variants import Feature, Key

CHOICES = ("off", "elementwise", "headwise")


class Gate(nnx.Module):
  """ctx * sigmoid(x W_g) per head: W_g [D, H K] (elementwise) or [D, H] (headwise)."""

  def __init__(self, cfg, rule, rngs: nnx.Rngs):
    self.elementwise = cfg.attn_gate == "elementwise"
    width = cfg.d_model if self.elementwise else cfg.num_heads
    # Drawn as the query's columns: the reference's gate is part of q_proj.
    self.proj = Dense(rngs.params(), rule, "q", (cfg.d_model, width), ("embed", "heads"))

  def __call__(self, ctx_BxTxHxK: jax.Array, x_BxTxD: jax.Array) -> jax.Array:
    b, t, h, k = ctx_BxTxHxK.shape
    scores = self.proj(x_BxTxD).astype(jnp.float32)
    gate = jax.nn.sigmoid(scores.reshape(b, t, h, k if self.elementwise else 1))
    return (ctx_BxTxHxK.astype(jnp.float32) * gate).astype(ctx_BxTxHxK.dtype)


def _choice(value) -> str | None:
  return None if value in CHOICES else f"is not valid; valid values: {', '.join(CHOICES)}"


def _gate_params(cfg) -> int:
  return cfg.d_model * (cfg.d_model if cfg.attn_gate == "elementwise" else cfg.num_heads)


VARIANTS = (
  Feature(
    "attngate",
    "gated attention: each head's output times sigmoid(X W_g) before W_o (Qiu et al. 2025)",
    keys={
      "attn_gate": Key(
        "off", "sigmoid gate on attention's output: off | elementwise | headwise", _choice
      ),
    },
    on=lambda cfg: cfg.attn_gate != "off",
    attn_output=lambda cfg, rule, rngs: Gate(cfg, rule, rngs),
    matmul_params=_gate_params,
  ),
)
