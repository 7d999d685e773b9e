"""The position-wise feed-forward branch: gelu, relu or swiglu."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model import variants
from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.model.layers import Dense

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@jax.custom_vjp
def gelu(x: jax.Array) -> jax.Array:
  """jax.nn.gelu (tanh approximation), whose backward pass recomputes tanh from x.

  Autodiff of the formula saves four [B, T, F] tensors per layer (x^3, tanh, products) for
  the backward pass; this saves only x. Same forward values, gradient within rounding.
  """
  return jax.nn.gelu(x)


def _gelu_fwd(x):
  return jax.nn.gelu(x), x


def _gelu_bwd(x, g):
  x32 = x.astype(jnp.float32)
  t = jnp.tanh(_SQRT_2_OVER_PI * (x32 + 0.044715 * x32**3))
  dt = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x32**2)
  d = 0.5 * (1.0 + t) + 0.5 * x32 * (1.0 - t * t) * dt
  return ((g.astype(jnp.float32) * d).astype(g.dtype),)


gelu.defvjp(_gelu_fwd, _gelu_bwd)


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
    # Sub-LN (Magneto): a norm on the hidden units, before the second matrix.
    self.sub_norm = (
      variants.config_norm(cfg, f, "mlp")
      if variants.placement(cfg.norm_position).sub_norm
      else None
    )
    # A residual variant's scaling of SwiGLU's (u, v): nGPT's u s_u, v s_v sqrt(D) (SwiGLU
    # only, its check refuses others). The attribute keeps its name: checkpoints' path.
    self.ngpt = variants.residual(cfg.residual).mlp_scale(cfg)

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    h_BxTxF = self.ffn_in(x_BxTxD)
    if self.activation == "gelu":
      h_BxTxF = gelu(h_BxTxF)
    elif self.activation == "relu":
      h_BxTxF = jax.nn.relu(h_BxTxF)
    else:
      g_BxTxF = self.ffn_gate(x_BxTxD)
      if self.ngpt is not None:
        h_BxTxF, g_BxTxF = self.ngpt(h_BxTxF, g_BxTxF)
      h_BxTxF = jax.nn.silu(g_BxTxF) * h_BxTxF
    if self.sub_norm is not None:
      h_BxTxF = self.sub_norm(h_BxTxF)
    return self.ffn_out(h_BxTxF)
