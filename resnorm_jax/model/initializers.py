"""Initialization rules keyed by weight role: xavier, normal, gpt2, deepnorm, magneto.

Roles: q, k, v, attn_out, ffn_in, ffn_gate (SwiGLU gate), ffn_out, embed, pos, head.
A kernel of shape [fan_in, fan_out] is drawn from a normal distribution whose std the rule
picks; embeddings are [vocab, D].
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

INITS = ("xavier", "normal", "gpt2", "deepnorm", "magneto")
ROLES = ("q", "k", "v", "attn_out", "ffn_in", "ffn_gate", "ffn_out", "embed", "pos", "head")
# DeepNet's beta multiplies the value/output projections and the FFN weights, never Q/K
# (they set the attention pattern, not the branch magnitude). For SwiGLU we scale the value
# input (ffn_in) and the output (ffn_out) and keep the gate at gain 1 for the same reason
# as Q/K: the gate sets which units pass, silu(x W_gate), not how much of x is carried.
DEEPNORM_BETA_ROLES = frozenset({"v", "attn_out", "ffn_in", "ffn_out"})
# Magneto (Wang 2022, arXiv 2210.06423, Sub-LN's init): the same four roles are multiplied
# by gamma = sqrt(ln 2N) for a decoder-only (or encoder-only) model of N layers; the
# official code (torchscale) multiplies fc1, fc2, out_proj and v_proj by it. An
# encoder-decoder's decoder uses sqrt(ln 3M): not our case. The gain is > 1 (a deep Sub-LN
# model starts with larger branches), the opposite of DeepNorm's beta < 1. SwiGLU's gate
# keeps gain 1 as under DeepNorm.
_XAVIER_BASED = ("xavier", "deepnorm", "magneto")
# The layer stack's matrices: muP's hidden weights (resnorm_jax/model/width_param.py).
HIDDEN_ROLES = frozenset({"q", "k", "v", "attn_out", "ffn_in", "ffn_gate", "ffn_out"})


def magneto_gamma(num_layers: int) -> float:
  """Magneto decoder-only init gain gamma = sqrt(ln(2N))."""
  return math.sqrt(math.log(2 * num_layers))


@dataclasses.dataclass(frozen=True)
class InitRule:
  """Which rule, and its constants resolved for a given depth."""

  name: str
  num_layers: int
  d_model: int
  std: float = 0.02  # normal and gpt2 rules
  beta: float = 1.0  # deepnorm rule's beta; magneto rule's gamma
  # muP's m_d (width_param.py; 1.0: off): hidden matrices x m_d^-1/2, the fan-in rules'
  # fans of width axes at base width (fan / m_d). d_model above is then the base width.
  width_multiplier: float = 1.0

  def __post_init__(self):
    if self.name not in INITS:
      raise ValueError(f"model.init={self.name!r} is unknown; valid: {', '.join(INITS)}")

  def kernel_std(self, role: str, fan_in: int, fan_out: int) -> float:
    """Std of a [fan_in, fan_out] weight of this role."""
    if role not in ROLES:
      raise ValueError(f"unknown weight role {role!r}; valid: {', '.join(ROLES)}")
    m = self.width_multiplier
    if m != 1.0:
      return self._base_width_std(role, fan_in, fan_out) * (m**-0.5 if role in HIDDEN_ROLES else 1)
    return self._base_width_std(role, fan_in, fan_out)

  def _base_width_std(self, role: str, fan_in: float, fan_out: float) -> float:
    """The rule's std; under muP (width_multiplier != 1) the fan-in rules' width axes (both
    fans of a hidden matrix, the head's fan-in) count at the base width."""
    if self.name in _XAVIER_BASED:
      m = self.width_multiplier
      if m != 1.0:
        fan_in = fan_in / m if role in HIDDEN_ROLES or role == "head" else fan_in
        fan_out = fan_out / m if role in HIDDEN_ROLES else fan_out
      std = math.sqrt(2.0 / (fan_in + fan_out))  # xavier (Glorot) normal
      if self.name in ("deepnorm", "magneto") and role in DEEPNORM_BETA_ROLES:
        std *= self.beta
      return std
    if self.name == "gpt2" and role in ("attn_out", "ffn_out"):
      return self.std / math.sqrt(2 * self.num_layers)
    return self.std

  def embed_std(self) -> float:
    """Token-embedding std: d^-1/2 (fairseq: scaled by sqrt(d) on input) or the rule std."""
    return self.d_model**-0.5 if self.name in _XAVIER_BASED else self.std

  def embed_scale(self) -> float:
    """Multiplier on token embeddings at the input (fairseq convention for xavier rules)."""
    return math.sqrt(self.d_model) if self.name in _XAVIER_BASED else 1.0

  def kernel(self, key: jax.Array, role: str, shape: tuple[int, ...]) -> jax.Array:
    """A weight of `shape` whose first axis is fan-in and the rest fan-out."""
    fan_in, fan_out = shape[0], math.prod(shape[1:])
    return self.kernel_std(role, fan_in, fan_out) * jax.random.normal(key, shape, jnp.float32)
