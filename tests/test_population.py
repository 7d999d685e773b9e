"""A population (resnorm_jax/train/population/program.py): each member trains exactly as its
single run."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from resnorm_jax.train import run_setup
from resnorm_jax.train.population import program as population

STEPS = 4


def _config(variant: str):
  c = importlib.import_module(f"configs.{variant}_96L").get_config("smoke")
  c.diag.per_layer = False
  c.train.steps = STEPS
  return c


def _batches(c, n_members: int):
  """Member i's batch of each step: random tokens drawn from (member, step)."""
  t = c.train
  rng = np.random.default_rng(0)
  x = rng.integers(0, c.model.vocab_size, (STEPS, n_members, t.batch_size, t.seq_len + 1))
  return jnp.asarray(x[..., :-1], jnp.int32), jnp.asarray(x[..., 1:], jnp.int32)


def _single_run(c, lr: float, seed: int, inputs, targets) -> list[float]:
  c.opt.lr, c.seed = lr, seed
  run = run_setup.build(c, jax.devices()[:1])  # the single run's own init and compiled step
  state = run.init_state()
  losses = []
  for k in range(STEPS):
    state, m = run.step_fn(state, (inputs[k], targets[k]))
    losses.append(float(m["loss"]))
  return losses


@pytest.mark.slow  # a population and its 3 single runs, compiled, per variant
@pytest.mark.parametrize(
  "variant",
  [
    "postnorm",
    pytest.param("prenorm", marks=pytest.mark.long),
    pytest.param("deepnorm", marks=pytest.mark.long),
  ],
)
def test_members_train_as_their_single_runs(variant):
  c = _config(variant)
  lrs, seeds = [1e-3, 4e-3, 1e-3], [0, 0, 1]  # lr alone and seed alone differ
  inputs, targets = _batches(c, len(lrs))
  md = run_setup.build(c, jax.devices()[:1]).model_def
  states = population.init_states(md, c.opt, STEPS, jnp.asarray(seeds))
  step = jax.jit(
    lambda s, b: population.train_steps(md, c.opt, STEPS, jnp.asarray(lrs), s, b, per_layer=False)
  )
  got = []
  for k in range(STEPS):
    states, m = step(states, (inputs[k], targets[k]))
    got.append(np.asarray(m["loss"]))
  got = np.stack(got, axis=1)  # [M, steps]
  for i, (lr, seed) in enumerate(zip(lrs, seeds, strict=True)):
    want = _single_run(c, lr, seed, inputs[:, i], targets[:, i])
    # Batched matmuls sum in another order: float32 rounding grows over steps through Adam.
    np.testing.assert_allclose(got[i], want, rtol=2e-4, atol=2e-4)
  assert abs(got[0, -1] - got[1, -1]) > 1e-3 and abs(got[0, -1] - got[2, -1]) > 1e-3


@pytest.mark.slow  # a population trained step by step (about 11 s)
@pytest.mark.long  # a population run
def test_a_diverging_member_is_frozen_and_does_not_touch_the_others():
  c = _config("postnorm")
  inputs, targets = _batches(c, 3)
  md = run_setup.build(c, jax.devices()[:1]).model_def
  seeds = jnp.asarray([0, 1, 2])
  run = lambda lrs: _run_population(md, c, lrs, seeds, inputs, targets)
  calm_losses, calm_states = run([1e-3, 1e-3, 1e-3])
  wild_losses, wild_states = run([1e-3, 1e30, 1e-3])
  np.testing.assert_array_equal(wild_losses[[0, 2]], calm_losses[[0, 2]])
  assert not np.all(np.isfinite(wild_losses[1]))  # member 1 blew up ...
  frozen = population.member(wild_states, 1)
  assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(frozen.params))  # ... kept finite
  assert int(frozen.step) < STEPS  # its non-finite steps were not applied


def _run_population(md, c, lrs, seeds, inputs, targets):
  states = population.init_states(md, c.opt, STEPS, seeds)
  step = jax.jit(
    lambda s, b: population.train_steps(md, c.opt, STEPS, jnp.asarray(lrs), s, b, per_layer=False)
  )
  losses = []
  for k in range(STEPS):
    states, m = step(states, (inputs[k], targets[k]))
    losses.append(np.asarray(m["loss"]))
  return np.stack(losses, axis=1), states
