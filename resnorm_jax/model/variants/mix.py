"""Mix-LN (Li 2024, arXiv 2412.13795): Post-LN in the first layers, Pre-LN after.

Layer l (0-based) is Post-LN for l < floor(model.mixln_post_fraction * L), Pre-LN after.
The layer index is scan data (model.py), so the switch is a value carried through one
scanned stack (jnp.where), not a second stack.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from resnorm_jax.config.keys import unit_interval
from resnorm_jax.model.norms import rms
from resnorm_jax.model.variants.hooks import Key, Placement


def mixln_num_post(num_layers: int, fraction: float) -> int:
  """The first floor(alpha * L) layers are Post-LN."""
  return int(fraction * num_layers)


def is_post(block, index) -> jax.Array:
  """Whether layer `index` is one of the Post-LN layers."""
  if index is None:
    raise ValueError("norm_position=mix needs the layer index (scan data)")
  cfg = block.cfg
  return jnp.asarray(index) < mixln_num_post(cfg.num_layers, cfg.mixln_post_fraction)


def branch_input(block, slot: str, x, stats: dict, index):
  """Pre-LN layers normalize the branch input, Post-LN layers do not."""
  return jnp.where(is_post(block, index), x, block.norms[slot](x))


def stream_output(block, slot: str, x, y, stats: dict, index):
  """Post-LN layers normalize the stream after the residual."""
  post = is_post(block, index)
  stats[f"{slot}_norm_in_rms"] = jnp.where(post, rms(y), rms(x))
  return jnp.where(post, block.norms[slot](y), y)


VARIANTS = (
  Placement(
    "mix",
    "Mix-LN: Post-LN for the first floor(mixln_post_fraction * L) layers, Pre-LN after",
    keys={
      "mixln_post_fraction": Key(
        0.25,
        "the first floor(fraction * N) layers are Post-LN",
        unit_interval,
      )
    },
    pre_like=True,
    normalizes_stream=True,
    branch_input=branch_input,
    stream_output=stream_output,
  ),
)
