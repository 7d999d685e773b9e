"""Forward + backward time of each norm alone, LayerNorm against RMSNorm
(scripts/bench_norms.py is the command line).

One call computes y = norm(x) and the backward pass (dx, dgamma and, for LayerNorm, dbeta) from
a random output gradient dy: jit(jax.vjp) of the norm, as inside a model. The output gradient
is random because a constant one (the gradient of sum(norm(x))) is folded into the backward pass
by XLA, which no norm in a model sees.
"""

from __future__ import annotations

import time

from resnorm_jax.hardware.bench import summarize


def norm_step(name: str, tokens: int, d: int, dtype: str):
  """(jit of y = norm(x) and its backward from a random dy, its arguments (x, params, dy))."""
  import jax
  import jax.numpy as jnp
  from flax import nnx

  from resnorm_jax.model.variants import make_norm

  with nnx.use_eager_sharding(False):  # logical axis names only; no mesh here
    graphdef, params = nnx.split(make_norm(name, d))
  params = nnx.to_pure_dict(params)
  kx, kdy = jax.random.split(jax.random.key(0))
  x = jax.random.normal(kx, (tokens, d), jnp.float32).astype(dtype)
  dy = jax.random.normal(kdy, (tokens, d), jnp.float32).astype(dtype)

  def forward_backward(x, params, dy):
    y, pullback = jax.vjp(lambda x, p: nnx.merge(graphdef, p)(x), x, params)
    return y, pullback(dy)

  fn = jax.jit(forward_backward)
  args = (x, params, dy)
  jax.block_until_ready(fn(*args))
  jax.block_until_ready(fn(*args))
  return fn, args


def time_norms(names, tokens: int, d: int, dtype: str, reps: int) -> dict:
  """Per-call seconds of each norm's step, the norms' calls alternating (same machine load)."""
  import jax

  steps = {n: norm_step(n, tokens, d, dtype) for n in names}
  times = {n: [] for n in names}
  for _ in range(reps):
    for n, (fn, args) in steps.items():
      t0 = time.perf_counter()
      jax.block_until_ready(fn(*args))
      times[n].append(time.perf_counter() - t0)
  return {n: summarize(ts) for n, ts in times.items()}
