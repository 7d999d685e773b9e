"""Adam-atan2 (Everett et al. 2024, arXiv 2407.05872): Adam's m_hat / (sqrt(v_hat) + eps)
replaced by a atan2(m_hat, b sqrt(v_hat)), a = 4/pi, b = 1: no eps."""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

# Adam-atan2's constants (Everett et al. 2024, section 4.3's Adam-atan2: a = 4/pi, b = 1):
# a atan2(1, b) = 1 where m_hat = sqrt(v_hat), Adam's step for a constant gradient.
ATAN2_A = 4 / math.pi  # 1.2732395
ATAN2_B = 1.0


class ScaleByAdamAtan2State(NamedTuple):
  count: jax.Array
  mu: Any
  nu: Any


def scale_by_adam_atan2(
  b1: float, b2: float, a: float = ATAN2_A, b: float = ATAN2_B
) -> optax.GradientTransformation:
  """Adam-atan2 (Everett et al. 2024, arXiv 2407.05872): a * atan2(m_hat, b * sqrt(v_hat)),
  m_hat and v_hat Adam's bias-corrected moments (decays b1, b2). No eps: atan2 is bounded by
  a pi / 2 and defined at v_hat = 0, and the step is invariant to the gradients' scale."""

  def init(params):
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)
    return ScaleByAdamAtan2State(jnp.zeros([], jnp.int32), zeros(), zeros())

  def update(updates, state, params=None):
    del params
    mu = optax.tree.update_moment(updates, state.mu, b1, 1)
    nu = optax.tree.update_moment_per_elem_norm(updates, state.nu, b2, 2)
    count = optax.safe_increment(state.count)
    m_hat = optax.tree.bias_correction(mu, b1, count)
    v_hat = optax.tree.bias_correction(nu, b2, count)
    step = jax.tree.map(lambda m, v: a * jnp.arctan2(m, b * jnp.sqrt(v)), m_hat, v_hat)
    return step, ScaleByAdamAtan2State(count, mu, nu)

  return optax.GradientTransformation(init, update)
