"""Forward + backward time of each norm alone: resnorm_jax.model.norms LayerNorm against RMSNorm.

python scripts/bench_norms.py [--tokens=8192] [--dims=256,1024,4096] [--dtype=float32]
    [--reps=30] [--out=norms.json]

For each d: x [tokens, d] and a random output gradient dy [tokens, d]; one call computes
y = norm(x) and the backward pass (dx, dgamma and, for LayerNorm, dbeta) from dy:
jit(jax.vjp) of the norm, as inside a model. Timed per call after warm-up (median, p10, p90
over --reps calls, each blocked; the two norms' calls alternate, so both see the same machine
load). The RMSNorm claim to test (Zhang & Sennrich 2019): 7%-64% faster than LayerNorm.
The timed step is resnorm_jax/hardware/norm_bench.py's.
"""

from __future__ import annotations

import argparse
import os

from resnorm_jax.config import cli
from resnorm_jax.hardware.bench import machine_info
from resnorm_jax.hardware.norm_bench import time_norms


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
