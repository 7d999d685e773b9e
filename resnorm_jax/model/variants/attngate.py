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
  model.attn_gate_bias=b       b != 0: a learned bias per gate unit, initialised to b, so
                               the gate starts near sigmoid(b) (3.0: ~0.93, 1 - 0.07) instead
                               of ~0.5; 0 (the default): no bias, the reference's gate
  model.attn_gate_frozen=true  the gate's weights (and bias) never move: its init alone acts
                               (Feature.frozen: the optimizer's update of them is zero; their
                               gradient still counts in opt.clip_norm's norm, as opt.freeze's)

At init x W_g has about unit spread (x normalised, W_g drawn as the query's), so the gate is
sigmoid(N(0, 1)) ~ 0.5 +- 0.2: it halves the attention branch. model.attn_out_scale=0.5 (a
core key) is that halving without a gate, attn_gate_bias the gate without the halving,
attn_gate_frozen the halving by a gate that does not learn (docs/stabilizers: the controls).

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
from resnorm_jax.model.variants.hooks import Column, Feature, Key

CHOICES = ("off", "elementwise", "headwise")


class Gate(nnx.Module):
  """ctx * sigmoid(x W_g) per head: W_g [D, H K] (elementwise) or [D, H] (headwise)."""

  def __init__(self, cfg, rule, rngs: nnx.Rngs):
    self.elementwise = cfg.attn_gate == "elementwise"
    width = cfg.d_model if self.elementwise else cfg.num_heads
    # Drawn as the query's columns: the reference's gate is part of q_proj.
    self.proj = Dense(rngs.params(), rule, "q", (cfg.d_model, width), ("embed", "heads"))
    # model.attn_gate_bias: a learned bias per gate unit from that value; 0: none.
    bias = float(cfg.attn_gate_bias)
    self.bias = (
      nnx.Param(jnp.full((width,), bias, jnp.float32), out_sharding=("heads",)) if bias else None
    )

  def __call__(
    self, ctx_BxTxHxK: jax.Array, x_BxTxD: jax.Array, stats: dict | None = None
  ) -> jax.Array:
    """The gated heads' output; `stats` (the layer's, or None) gets the gate's mean and
    spread over batch, time and units (`attn_gate_mean`, `attn_gate_std`; no gradient)."""
    b, t, h, k = ctx_BxTxHxK.shape
    scores = self.proj(x_BxTxD).astype(jnp.float32)
    if self.bias is not None:
      scores = scores + self.bias[...]
    gate = jax.nn.sigmoid(scores.reshape(b, t, h, k if self.elementwise else 1))
    if stats is not None:
      g = jax.lax.stop_gradient(gate)
      stats["attn_gate_mean"], stats["attn_gate_std"] = jnp.mean(g), jnp.std(g)
    return (ctx_BxTxHxK.astype(jnp.float32) * gate).astype(ctx_BxTxHxK.dtype)


def _choice(value) -> str | None:
  return None if value in CHOICES else f"is not valid; valid values: {', '.join(CHOICES)}"


def check(cfg) -> None:
  """The gate's own keys need a gate: refused, naming the key, with model.attn_gate=off."""
  if cfg.attn_gate != "off":
    return
  for key, off in (("attn_gate_bias", 0.0), ("attn_gate_frozen", False)):
    if getattr(cfg, key) != off:
      raise ValueError(
        f"model.{key}={getattr(cfg, key)!r} acts on the attention gate, which is off "
        f"(model.attn_gate='off'): set model.attn_gate to one of {', '.join(CHOICES[1:])}"
      )


def is_gate(path: str) -> bool:
  """A gate parameter's path in the params tree: ['layers']['attn']['gate'][...]."""
  return path.startswith("['layers']['attn']['gate']")


def _gate_params(cfg) -> int:
  return cfg.d_model * (cfg.d_model if cfg.attn_gate == "elementwise" else cfg.num_heads)


VARIANTS = (
  Feature(
    "attngate",
    "gated attention: each head's output times sigmoid(X W_g) before W_o (Qiu et al. 2025)",
    keys={
      "attn_gate": Key(
        "off",
        "sigmoid gate on attention's output: off | elementwise | headwise",
        _choice,
        hparam=Column("attn_gate", 154),
      ),
      "attn_gate_bias": Key(
        0.0,
        "the gate's initial bias (learned); 0: no bias; 3.0 starts it near 0.93",
        hparam=Column("attn_gate_bias", 156),
      ),
      "attn_gate_frozen": Key(
        False,
        "the gate's weights never move (its init alone)",
        hparam=Column("attn_gate_frozen", 157),
      ),
    },
    # On with any of its keys set, so that check() refuses a gate key without a gate.
    on=lambda cfg: cfg.attn_gate != "off" or cfg.attn_gate_bias != 0 or cfg.attn_gate_frozen,
    check=check,
    attn_output=lambda cfg, rule, rngs: Gate(cfg, rule, rngs) if cfg.attn_gate != "off" else None,
    frozen=lambda cfg: is_gate if cfg.attn_gate_frozen else None,
    acts_on=lambda cfg: ("attn_output",) + ("frozen",) * cfg.attn_gate_frozen,
    turned_on={"attn_gate": "elementwise", "attn_gate_frozen": True},
    matmul_params=_gate_params,
  ),
)
