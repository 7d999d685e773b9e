"""The model's static definition: NNX graph definitions for train and eval mode, the
logical axis names of every parameter, and the pure-dict init the train state is built from.

The train state holds plain nested dicts of arrays (params, non-trainable model state such as
batchnorm running averages), so optax, orbax and the sharding rules all see ordinary pytrees;
`ModelDef` merges them back into the NNX module inside jit.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
from flax import nnx

from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.model.transformer import Transformer

PyTree = Any


@dataclasses.dataclass(frozen=True, eq=False)
class ModelDef:
  """The static half of the model: graph definitions for train and eval mode."""

  cfg: ModelConfig
  train_graph: Any
  eval_graph: Any
  param_specs: PyTree  # logical axis names per param leaf (tuples)
  model_state_specs: PyTree

  def apply(self, params, model_state, tokens_BxT, *, train: bool):
    """(logits, stats, new_model_state): batchnorm updates come back as new_model_state."""
    model = nnx.merge(self.train_graph if train else self.eval_graph, params, model_state)
    logits, stats = model(tokens_BxT)
    if train:
      _, _, rest = nnx.split(model, nnx.Param, ...)
      model_state = nnx.to_pure_dict(rest)
    return logits, stats, model_state


def _specs(state: nnx.State) -> PyTree:
  """Logical axis names of every leaf: a tuple per leaf (None where unnamed)."""

  def names(v):
    spec = v.get_metadata().get("out_sharding") or (None,) * len(v.shape)
    return tuple(spec)

  return nnx.to_pure_dict(
    jax.tree.map(
      lambda v: v.replace(names(v)), state, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )
  )


def init_model(cfg: ModelConfig, seed: int | jax.Array) -> tuple[PyTree, PyTree]:
  """(params, model_state) as pure dicts; a pure function of the seed (jit- and vmap-able:
  the seed may be traced; `jax.random.key(seed)` is the key nnx.Rngs makes of an int)."""
  model = Transformer(cfg, rngs=nnx.Rngs(params=jax.random.key(seed)))
  _, params, rest = nnx.split(model, nnx.Param, ...)
  return nnx.to_pure_dict(params), nnx.to_pure_dict(rest)


def make_model_def(cfg: ModelConfig) -> ModelDef:
  """Builds the graph definitions abstractly (no weights allocated)."""
  model = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  # NNX's train()/eval() set use_running_average (batchnorm: batch statistics in train mode,
  # the running averages in eval mode) on every sub-module that has it.
  model.train()
  train_graph, params, rest = nnx.split(model, nnx.Param, ...)
  model.eval()
  eval_graph = nnx.graphdef(model)
  return ModelDef(cfg, train_graph, eval_graph, _specs(params), _specs(rest))
