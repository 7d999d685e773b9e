"""Parameter masks, trees of bools shaped like the params: the decayed leaves (matrices only),
muP's hidden matrices, and Muon's Adam group (every leaf but the hidden matrices)."""

from typing import Any

import jax
import jax.numpy as jnp

from resnorm_jax.train import param_groups

# Only matrices are decayed. Norm gains/biases, biases and residual scalars are not: decaying
# a LayerNorm scale or a ReZero alpha towards 0 changes the architecture under study.
DECAYED_NAMES = frozenset({"kernel", "embedding"})


def _leaf_name(path: tuple[Any, ...]) -> str | None:
  """A leaf's own key: the last dict key or attribute (nnx Variables add a `.value`)."""
  for entry in reversed(path):
    if isinstance(entry, jax.tree_util.DictKey) and isinstance(entry.key, str):
      return entry.key
    if isinstance(entry, jax.tree_util.GetAttrKey) and entry.name != "value":
      return entry.name
  return None


def decay_mask(params: Any) -> Any:
  """Same tree of bools: True exactly for leaves named `kernel` or `embedding`."""
  return jax.tree_util.tree_map_with_path(lambda path, _: _leaf_name(path) in DECAYED_NAMES, params)


def hidden_matrix_mask(params: Any) -> Any:
  """Same tree of bools: True for muP's hidden matrices, the leaves inside the layer stack
  with two or more axes per layer (their leading axis is the stacked layer axis)."""
  hidden = param_groups.mask(params, ["hidden"])
  return jax.tree.map(lambda p, h: bool(h) and jnp.ndim(p) >= 3, params, hidden)


def hidden_decayed_mask(params: Any) -> Any:
  """Same tree of bools: True for the hidden matrices that are decayed."""
  return jax.tree.map(lambda a, b: a and b, hidden_matrix_mask(params), decay_mask(params))


def adam_group(params: Any) -> Any:
  """Same tree of bools: True for the leaves Muon leaves to Adam (all but the hidden matrices)."""
  return jax.tree.map(lambda m: not m, hidden_matrix_mask(params))
