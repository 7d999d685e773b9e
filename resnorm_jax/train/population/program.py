"""A population of runs as one program: M copies of a model that differ only in peak lr and
seed, trained by one vmapped step.

Each member's state is a slice of a TrainState whose every leaf has a leading member axis
[M, ...]; member i starts from `init_state(..., seeds[i])` and steps with peak lr `lrs[i]`
through the config's schedule (make_optimizer's `lr`), on its own batch. train_step
already keeps the state of a member whose loss or gradient is non-finite, so a diverged
member stays frozen at its last finite state while the others go on; `active` holds any
member frozen the same way (a select of its old state), so a member that is ahead of the
others, or done, keeps its slot in the program and no update. Member i's slice of the program
depends on no other slot: its results are the same whatever the others hold.

Measured on a 2-core CPU (docs/benchmarks.md, "A sweep as one program"): XLA:CPU runs the
batched matmuls no faster than M single steps, so on a CPU this saves only per-run start-up;
the case for it is an accelerator, where one small model leaves the chip idle. Members as
ordinary run folders (checkpoints, logs, summaries): population/run.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from resnorm_jax.model.model_def import ModelDef
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer

PyTree = Any


def member(tree: PyTree, i: int) -> PyTree:
  """Member i's slice of a population pytree (state, metrics)."""
  return jax.tree.map(lambda x: x[i], tree)


def stack(trees: Sequence[PyTree]) -> PyTree:
  """Members' pytrees stacked on a new leading axis."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def init_states(model_def: ModelDef, opt_cfg: Any, steps: int, seeds: jax.Array):
  """The population's fresh TrainState: member i initialised exactly as a run of seed i."""
  optimizer = make_optimizer(opt_cfg, steps, model_def)  # its state is lr-free
  return jax.vmap(functools.partial(ts.init_state, model_def, optimizer))(seeds)


def train_steps(
  model_def: ModelDef,
  opt_cfg: Any,
  steps: int,
  lrs: jax.Array,
  states: ts.TrainState,
  batches: tuple[jax.Array, jax.Array],
  *,
  active: jax.Array | None = None,
  per_layer: bool = True,
  z_loss_weight: float = 0.0,
):
  """One update of every member: member i at peak lr lrs[i] on batch [i]; (states, metrics).
  `active` ([M] bool, default all): a member whose entry is False keeps its state (its
  metrics are computed and mean nothing)."""

  def one(lr, on, state, batch):
    optimizer = make_optimizer(opt_cfg, steps, model_def, lr=lr)
    new, metrics = ts.train_step(
      model_def, optimizer, state, batch, per_layer=per_layer, z_loss_weight=z_loss_weight
    )
    return hold(on, new, state), metrics

  if active is None:
    active = jnp.ones(lrs.shape, jnp.bool_)
  return jax.vmap(one)(lrs, active, states, batches)


def hold(on: jax.Array, new: PyTree, old: PyTree) -> PyTree:
  """`new` where `on`, else `old`: the select train_step applies to a non-finite step."""
  return jax.tree.map(lambda n, o: jnp.where(on, n, o), new, old)


def eval_steps(model_def: ModelDef, states: ts.TrainState, batch) -> jax.Array:
  """Every member's held-out loss on one shared batch: [M]."""
  return jax.vmap(functools.partial(ts.eval_step, model_def), in_axes=(0, None))(states, batch)
