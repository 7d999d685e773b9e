"""The position-wise feed-forward branch: gelu, relu or swiglu."""

from __future__ import annotations

import jax
from flax import nnx

from resnorm_jax.config_types import ModelConfig
from resnorm_jax.initializers import InitRule
from resnorm_jax.layers import Dense


class MLP(nnx.Module):
  """act(x W_in) W_out, or (silu(x W_gate) * x W_in) W_out for swiglu."""

  def __init__(self, cfg: ModelConfig, rule: InitRule, rngs: nnx.Rngs):
    d, f = cfg.d_model, cfg.d_ff
    self.activation = cfg.ffn_activation
    self.ffn_in = Dense(rngs.params(), rule, "ffn_in", (d, f), ("embed", "mlp"))
    self.ffn_gate = (
      Dense(rngs.params(), rule, "ffn_gate", (d, f), ("embed", "mlp"))
      if self.activation == "swiglu"
      else None
    )
    self.ffn_out = Dense(rngs.params(), rule, "ffn_out", (f, d), ("mlp", "embed"))

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    h_BxTxF = self.ffn_in(x_BxTxD)
    if self.activation == "gelu":
      h_BxTxF = jax.nn.gelu(h_BxTxF)
    elif self.activation == "relu":
      h_BxTxF = jax.nn.relu(h_BxTxF)
    else:
      h_BxTxF = jax.nn.silu(self.ffn_gate(x_BxTxD)) * h_BxTxF
    return self.ffn_out(h_BxTxF)
