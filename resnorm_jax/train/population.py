"""A population of runs as one program: M copies of a model that differ only in peak lr and
seed, trained by one vmapped step.

Each member's state is a slice of a TrainState whose every leaf has a leading member axis
[M, ...]; member i starts from `init_state(..., seeds[i])` and steps with peak lr `lrs[i]`
through the config's schedule (optim.make_optimizer's `lr`), on its own batch. train_step
already keeps the state of a member whose loss or gradient is non-finite, so a diverged
member stays frozen at its last finite state while the others go on.

Measured on a 2-core CPU (docs/benchmarks.md, "A sweep as one program"): XLA:CPU runs the
batched matmuls no faster than M single steps, so on a CPU this saves only per-run start-up;
the case for it is an accelerator, where one small model leaves the chip idle. Members as
ordinary run folders (checkpoints, logs, summaries): population_run.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from resnorm_jax.model.model_def import ModelDef
from resnorm_jax.train import optim
from resnorm_jax.train import train_step as ts

PyTree = Any


def member(tree: PyTree, i: int) -> PyTree:
  """Member i's slice of a population pytree (state, metrics)."""
  return jax.tree.map(lambda x: x[i], tree)


def stack(trees: Sequence[PyTree]) -> PyTree:
  """Members' pytrees stacked on a new leading axis."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def init_states(model_def: ModelDef, opt_cfg: Any, steps: int, seeds: jax.Array):
  """The population's fresh TrainState: member i initialised exactly as a run of seed i."""
  optimizer = optim.make_optimizer(opt_cfg, steps, model_def)  # its state is lr-free
  return jax.vmap(functools.partial(ts.init_state, model_def, optimizer))(seeds)


def train_steps(
  model_def: ModelDef,
  opt_cfg: Any,
  steps: int,
  lrs: jax.Array,
  states: ts.TrainState,
  batches: tuple[jax.Array, jax.Array],
  *,
  per_layer: bool = True,
  z_loss_weight: float = 0.0,
):
  """One update of every member: member i at peak lr lrs[i] on batch [i]; (states, metrics)."""

  def one(lr, state, batch):
    optimizer = optim.make_optimizer(opt_cfg, steps, model_def, lr=lr)
    return ts.train_step(
      model_def, optimizer, state, batch, per_layer=per_layer, z_loss_weight=z_loss_weight
    )

  return jax.vmap(one)(lrs, states, batches)


def eval_steps(model_def: ModelDef, states: ts.TrainState, batch) -> jax.Array:
  """Every member's held-out loss on one shared batch: [M]."""
  return jax.vmap(functools.partial(ts.eval_step, model_def), in_axes=(0, None))(states, batch)
