"""The auxiliary z-loss (train.z_loss): its formula, and that the step's gradient carries it
while the reported loss stays the cross entropy."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from resnorm_jax.train import run_setup
from resnorm_jax.train import train_step as ts


def test_z_loss_is_the_mean_squared_log_partition():
  rng = np.random.default_rng(0)
  logits = rng.normal(0, 3, (2, 3, 5)).astype(np.float32)
  m = logits.max(-1, keepdims=True)
  lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
  assert float(ts.z_loss(jnp.asarray(logits))) == pytest.approx(float((lse**2).mean()), rel=1e-5)
  # shifting every logit by c moves log Z by c: the z-loss is not shift-invariant, CE is
  assert float(ts.z_loss(jnp.asarray(logits) + 1.0)) > float(ts.z_loss(jnp.asarray(logits)))


def _two_steps(z: float):
  c = importlib.import_module("configs.prenorm_96L").get_config("smoke")
  c.diag.per_layer = False
  c.train.z_loss = z
  run = run_setup.build(c, jax.devices()[:1])
  state = run.init_state()
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.integers(0, c.model.vocab_size, (c.train.batch_size, c.train.seq_len + 1)))
  batch = (x[:, :-1].astype(jnp.int32), x[:, 1:].astype(jnp.int32))
  state, m1 = run.step_fn(state, batch)
  _, m2 = run.step_fn(state, batch)
  return m1, m2


@pytest.mark.slow  # builds and compiles the smoke run twice
@pytest.mark.long  # two trained steps; the formula: the test above
def test_z_loss_changes_the_update_not_the_reported_loss():
  off1, off2 = _two_steps(0.0)
  on1, on2 = _two_steps(1e-2)
  assert "z_loss" not in off1 and float(on1["z_loss"]) > 0
  # step 1 reports the loss before its update: the same cross entropy with and without
  assert float(on1["loss"]) == pytest.approx(float(off1["loss"]), rel=1e-6)
  # the z-loss term moved the parameters: step 2 starts elsewhere
  assert float(on2["loss"]) != pytest.approx(float(off2["loss"]), rel=1e-7, abs=0)


def test_negative_z_loss_is_refused_before_compiling():
  c = importlib.import_module("configs.prenorm_96L").get_config("smoke")
  c.train.z_loss = -1e-4
  with pytest.raises(ValueError, match=r"train.z_loss=-0.0001 must be a number >= 0"):
    run_setup.validate(c)
