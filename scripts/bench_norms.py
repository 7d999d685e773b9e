"""Forward + backward time of each norm alone: resnorm_jax.norms LayerNorm against RMSNorm.

python scripts/bench_norms.py [--tokens=8192] [--dims=256,1024,4096] [--dtype=float32]
    [--reps=30] [--out=norms.json]

For each d: x [tokens, d], f(x, params) = sum(norm(x)), jit(value_and_grad(f, (x, params)))
(so the backward produces dx, dgamma and, for LayerNorm, dbeta), timed per call after
warm-up (median, p10, p90 over --reps calls, each blocked; the two norms' calls alternate,
so both see the same machine load). The RMSNorm claim to test
(Zhang & Sennrich 2019): 7%-64% faster than LayerNorm.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "scripts")):
  if _path not in sys.path:
    sys.path.insert(0, _path)

from benchmark import machine_info, summarize  # noqa: E402  (no JAX import)


def norm_step(name: str, tokens: int, d: int, dtype: str):
  """(jit(value_and_grad(sum of norm(x))) w.r.t. x and the norm's params, its arguments)."""
  import jax
  import jax.numpy as jnp
  from flax import nnx

  from resnorm_jax.norms import make_norm

  with nnx.use_eager_sharding(False):  # logical axis names only; no mesh here
    graphdef, params = nnx.split(make_norm(name, d))
  params = nnx.to_pure_dict(params)
  x = jax.random.normal(jax.random.key(0), (tokens, d), jnp.float32).astype(dtype)

  def loss(x, params):
    return jnp.sum(nnx.merge(graphdef, params)(x).astype(jnp.float32))

  fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  jax.block_until_ready(fn(x, params))
  jax.block_until_ready(fn(x, params))
  return fn, (x, params)


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
    with open(a.out, "w") as f:
      json.dump(out, f, indent=2)


if __name__ == "__main__":
  main()
