"""LayerNorm scaling (Sun 2025, arXiv 2502.05795): x = res(x, F(N(x) / sqrt(l + 1))).

Pre-LN whose l-th (0-based) layer divides its normalized input by sqrt(l + 1). The layer
index is scan data (model.py), so the factor is a value carried through one scanned stack.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from resnorm_jax.model.variants.hooks import Placement
from resnorm_jax.model.variants.standard import normalize_input


def lnscale_factor(index: jax.Array) -> jax.Array:
  """1/sqrt(l) for the 1-based layer l."""
  return jax.lax.rsqrt(jnp.asarray(index, jnp.float32) + 1.0)


def scaled_input(block, slot: str, x, stats: dict, index):
  h = normalize_input(block, slot, x, stats, index)
  if index is None:
    raise ValueError("norm_position=lnscale needs the layer index (scan data)")
  return h * lnscale_factor(index).astype(h.dtype)


VARIANTS = (
  Placement(
    "lnscale",
    "LayerNorm scaling: Pre-LN with the branch input scaled by 1/sqrt(l)",
    pre_like=True,
    branch_input=scaled_input,
  ),
)
