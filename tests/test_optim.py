"""Tests for resnorm_jax.train.optimizers: schedule values, the decay mask, decay and clipping."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import base
from resnorm_jax.train.optimizers.build import make_optimizer
from resnorm_jax.train.optimizers.checks import SCHEDULES
from resnorm_jax.train.optimizers.masks import decay_mask
from resnorm_jax.train.optimizers.schedules import make_schedule

LR = 1e-3


def _opt(**overrides):
  """config.opt with overrides (unlocked copy of the base schema)."""
  cfg = base.get_config().opt
  for key, value in overrides.items():
    setattr(cfg, key, value)
  return cfg


def _lrs(cfg, steps, total: int = 100) -> np.ndarray:
  schedule = make_schedule(cfg, total)
  return np.array([float(schedule(s)) for s in steps])


@pytest.mark.parametrize("name", SCHEDULES)
def test_no_warmup_starts_at_full_lr(name):
  lr0 = _lrs(_opt(schedule=name, lr=LR, warmup_steps=0), [0])[0]
  assert lr0 == pytest.approx(LR, rel=1e-6)


@pytest.mark.parametrize("name", SCHEDULES)
def test_warmup_is_linear_from_lr_over_w(name):
  w = 10
  lrs = _lrs(_opt(schedule=name, lr=LR, warmup_steps=w), range(w))
  # lr * (s + 1) / W: never 0 at step 0, full lr at the last warmup step.
  np.testing.assert_allclose(lrs, LR * (np.arange(w) + 1) / w, rtol=1e-5)
  assert lrs[0] > 0


@pytest.mark.parametrize("name", ["constant", "cosine", "linear"])
def test_full_lr_right_after_warmup(name):
  lrs = _lrs(_opt(schedule=name, lr=LR, warmup_steps=10), [9, 10])
  np.testing.assert_allclose(lrs, [LR, LR], rtol=1e-5)


def test_constant_stays_constant():
  np.testing.assert_allclose(_lrs(_opt(warmup_steps=5), [5, 50, 99, 500]), LR, rtol=1e-6)


@pytest.mark.parametrize("w", [0, 1, 4, 16])
def test_inverse_sqrt_formula(w):
  steps = np.arange(0, 200, 7)
  lrs = _lrs(_opt(schedule="inverse_sqrt", warmup_steps=w), steps)
  we = max(w, 1)
  expected = np.where(steps < w, LR * (steps + 1) / we, LR * np.sqrt(we / (steps + 1)))
  np.testing.assert_allclose(lrs, expected, rtol=1e-5)


@pytest.mark.parametrize("w", [0, 10])
@pytest.mark.parametrize("ratio", [0.0, 0.1])
def test_cosine_and_linear_reach_floor_at_total_steps(w, ratio):
  total = 100
  for name in ("cosine", "linear"):
    cfg = _opt(schedule=name, warmup_steps=w, min_lr_ratio=ratio)
    end, after = _lrs(cfg, [total, total + 50], total)
    assert end == pytest.approx(LR * ratio, abs=1e-9)
    assert after == pytest.approx(LR * ratio, abs=1e-9)
  # Midway through decay: cosine at (1 + ratio) / 2, linear likewise at the midpoint.
  mid = w + (total - w) // 2
  for name in ("cosine", "linear"):
    lr_mid = _lrs(_opt(schedule=name, warmup_steps=w, min_lr_ratio=ratio), [mid], total)[0]
    assert lr_mid == pytest.approx(LR * (1 + ratio) / 2, rel=1e-5)
  t = 0.25  # cosine a quarter of the way: the formula, not the linear value.
  s = w + int(t * (total - w))
  frac = (s - w) / (total - w)
  got = _lrs(_opt(schedule="cosine", warmup_steps=w, min_lr_ratio=ratio), [s], total)[0]
  want = LR * (ratio + (1 - ratio) * 0.5 * (1 + math.cos(math.pi * frac)))
  assert got == pytest.approx(want, rel=1e-5)


def test_decay_schedules_need_steps_after_warmup():
  with pytest.raises(ValueError, match="train.steps=10"):
    make_schedule(_opt(schedule="cosine", warmup_steps=10), 10)


def _params():
  """A nested tree like the model's: stacked layer weights have a leading layer axis."""
  L, D = 3, 4
  return {
    "embed": {"embedding": jnp.ones((16, D))},
    "layers": {
      "attn": {"q": {"kernel": jnp.ones((L, D, D)), "bias": jnp.ones((L, D))}},
      "norm1": {"scale": jnp.ones((L, D)), "bias": jnp.zeros((L, D))},
      "rezero": jnp.zeros((L,)),
      "layerscale": jnp.ones((L, D)),
      "gate": {"kernel": jnp.ones((L, D, D)), "gate_bias": jnp.zeros((L, D))},
      "dyt": {"alpha": jnp.ones((L,))},
    },
    "final_norm": {"scale": jnp.ones((D,))},
  }


def test_decay_mask_on_nested_stacked_tree():
  mask = decay_mask(_params())
  flat = {
    "/".join(k.key for k in path): v for path, v in jax.tree_util.tree_flatten_with_path(mask)[0]
  }
  decayed = {k for k, v in flat.items() if v}
  assert decayed == {"embed/embedding", "layers/attn/q/kernel", "layers/gate/kernel"}
  assert len(flat) == 11
  assert all(isinstance(v, bool) for v in flat.values())


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd"])
def test_weight_decay_shrinks_kernel_not_scale(name):
  params = {"kernel": jnp.ones((2, 2)), "scale": jnp.ones((2,))}
  grads = jax.tree.map(jnp.zeros_like, params)
  tx = make_optimizer(_opt(name=name, lr=0.1, weight_decay=0.5), 10)
  state = tx.init(params)
  updates, _ = tx.update(grads, state, params)
  new = optax.apply_updates(params, updates)
  np.testing.assert_array_equal(new["scale"], params["scale"])
  assert float(new["kernel"].max()) < 1.0
  if name == "sgd":
    np.testing.assert_allclose(new["kernel"], 1 - 0.1 * 0.5, rtol=1e-6)
  if name == "adamw":
    np.testing.assert_allclose(new["kernel"], 1 - 0.1 * 0.5, rtol=1e-6)


def test_no_weight_decay_leaves_params_with_zero_grad():
  params = {"kernel": jnp.ones((2, 2))}
  tx = make_optimizer(_opt(name="adam", weight_decay=0.0), 10)
  updates, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
  np.testing.assert_array_equal(updates["kernel"], 0.0)


def test_clipping_bounds_the_update():
  params = {"kernel": jnp.zeros((3,))}
  grads = {"kernel": jnp.array([300.0, -400.0, 0.0])}  # norm 500
  tx = make_optimizer(_opt(name="sgd", lr=1.0, clip_norm=2.0), 10)
  updates, _ = tx.update(grads, tx.init(params), params)
  assert float(optax.tree.norm(updates)) == pytest.approx(2.0, rel=1e-5)
  np.testing.assert_allclose(updates["kernel"], [-1.2, 1.6, 0.0], rtol=1e-5)
  tx = make_optimizer(_opt(name="sgd", lr=1.0, clip_norm=0.0), 10)
  updates, _ = tx.update(grads, tx.init(params), params)
  assert float(optax.tree.norm(updates)) == pytest.approx(500.0, rel=1e-5)


def test_adam_first_step_uses_schedule_lr():
  # Adam's first update has magnitude lr (m/sqrt(v) = sign(g)): with warmup 0 that is full lr.
  params = {"kernel": jnp.zeros((2,))}
  grads = {"kernel": jnp.array([0.3, -2.0])}
  for w, lr0 in ((0, LR), (4, LR / 4)):
    tx = make_optimizer(_opt(name="adam", warmup_steps=w, eps=1e-12), 10)
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["kernel"], [-lr0, lr0], rtol=1e-4)


@pytest.mark.parametrize(
  "overrides, pattern",
  [
    ({"name": "lamb"}, r"opt.name='lamb'.*adam, adamw, sgd"),
    ({"schedule": "step"}, r"opt.schedule='step'.*constant, inverse_sqrt, cosine, linear"),
    ({"lr": 0.0}, r"opt.lr=0.0"),
    ({"lr": -1.0}, r"opt.lr=-1.0"),
    ({"warmup_steps": -1}, r"opt.warmup_steps=-1"),
    ({"min_lr_ratio": 1.5}, r"opt.min_lr_ratio=1.5"),
    ({"clip_norm": -0.1}, r"opt.clip_norm=-0.1"),
  ],
)
def test_bad_values_raise(overrides, pattern):
  with pytest.raises(ValueError, match=pattern):
    make_optimizer(_opt(**overrides), 100)
