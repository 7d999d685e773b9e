"""Forward + backward time of each norm alone: resnorm_jax.model.norms LayerNorm against RMSNorm.

python scripts/bench_norms.py [--tokens=8192] [--dims=256,1024,4096] [--dtype=float32]
    [--reps=30] [--out=norms.json]

For each d: x [tokens, d] and a random output gradient dy [tokens, d]; one call computes
y = norm(x) and the backward pass (dx, dgamma and, for LayerNorm, dbeta) from dy:
jit(jax.vjp) of the norm, as inside a model. Timed per call after warm-up (median, p10, p90
over --reps calls, each blocked; the two norms' calls alternate, so both see the same machine
load). The RMSNorm claim to test (Zhang & Sennrich 2019): 7%-64% faster than LayerNorm.

Its first version timed value_and_grad of sum(norm(x)): the output gradient was then a
constant 1 that XLA folded into the backward pass, which no norm in a model sees.
"""

from __future__ import annotations

import argparse
import os
import time

from resnorm_jax.config import cli
from resnorm_jax.tools.bench import machine_info, summarize


def norm_step(name: str, tokens: int, d: int, dtype: str):
  """(jit of y = norm(x) and its backward from a random dy, its arguments (x, params, dy))."""
  import jax
  import jax.numpy as jnp
  from flax import nnx

  from resnorm_jax.model.norms import make_norm

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


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--tokens", type=int, default=8192, help="rows of x (batch x time)")
  p.add_argument("--dims", default="256,1024,4096", help="hidden sizes d, comma-separated")
  p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
  p.add_argument("--reps", type=int, default=30, help="timed calls per norm and size")
  p.add_argument("--out", default="", help="write the results as JSON to this file")
  a = p.parse_args()
  dims = [int(d) for d in a.dims.split(",")]
  out = {"machine": machine_info(), "tokens": a.tokens, "dtype": a.dtype, "rows": []}
  print(
    f"{'d':>6} {'layernorm ms':>13} {'rmsnorm ms':>11} {'LN/RMS':>7}  (median; p10-p90)   "
    f"load {out['machine']['loadavg'][0]:.2f}"
  )
  for d in dims:
    both = time_norms(("layernorm", "rmsnorm"), a.tokens, d, a.dtype, a.reps)
    ln, rms = both["layernorm"], both["rmsnorm"]
    ratio = ln["median"] / rms["median"]
    load = os.getloadavg()[0]
    out["rows"].append({"d": d, "layernorm_s": ln, "rmsnorm_s": rms, "ln_over_rms": ratio})
    print(
      f"{d:>6} {ln['median'] * 1e3:13.3f} {rms['median'] * 1e3:11.3f} {ratio:7.2f}  "
      f"(LN {ln['p10'] * 1e3:.3f}-{ln['p90'] * 1e3:.3f}; "
      f"RMS {rms['p10'] * 1e3:.3f}-{rms['p90'] * 1e3:.3f})   load {load:.2f}",
      flush=True,
    )
  out["loadavg_end"] = list(os.getloadavg())
  if a.out:
    cli.write_json(a.out, out)


if __name__ == "__main__":
  main()
