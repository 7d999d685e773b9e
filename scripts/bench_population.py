"""A population as one program against its runs one after another: the step time of one
vmapped step of M members (resnorm_jax/train/population/program.py) against M steps of the
single run's own compiled step, interleaved, on the cores this process may use.

python scripts/bench_population.py [--variant=prenorm] [--layers=6,12,24] [--members=1,2,4,8]
    [--reps=3] [--steps=4] [--out=FILE.json]

Run it pinned to one core for the per-core comparison a pinned sweep makes:
  XLA_FLAGS=--xla_cpu_multi_thread_eigen=false taskset -c 1 python scripts/bench_population.py
Prints, per depth and M, both times per model-step and their ratio (> 1: the population wins).
"""

import argparse
import importlib
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.train import run_setup
from resnorm_jax.train.population import program as population


def _timed(fn, n: int) -> float:
  """Seconds per call of fn() over n calls, after the device finished."""
  t0 = time.perf_counter()
  out = None
  for _ in range(n):
    out = fn()
  jax.block_until_ready(out)
  return (time.perf_counter() - t0) / n


def measure(variant: str, layers: int, members: int, reps: int, steps: int) -> dict:
  """Seconds per model-step of the single run's step and of a population of `members`."""
  c = importlib.import_module(f"configs.{variant}_96L").get_config()
  c.model.num_layers, c.model.remat, c.diag.per_layer = layers, "none", False
  run = run_setup.build(c, jax.devices()[:1])
  md, t = run.model_def, c.train
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.integers(0, 256, (members, t.batch_size, t.seq_len)), jnp.int32)
  lrs = jnp.asarray([c.opt.lr * 2.0**-i for i in range(members)])
  single_state = run.init_state()
  states = jax.jit(lambda s: population.init_states(md, c.opt, t.steps, s))(jnp.arange(members))
  pop_step = jax.jit(
    lambda s, b: population.train_steps(md, c.opt, t.steps, lrs, s, b, per_layer=False),
    donate_argnums=0,
  )
  box = {"single": single_state, "pop": states}

  def single():
    out = None
    for i in range(members):
      box["single"], out = run.step_fn(box["single"], (x[i], x[i]))
    return out

  def pop():
    box["pop"], out = pop_step(box["pop"], (x, x))
    return out

  single(), pop()  # compile and warm up
  s_times, p_times = [], []
  for _ in range(reps):  # interleaved: both see the same machine
    s_times.append(_timed(single, steps) / members)
    p_times.append(_timed(pop, steps) / members)
  s, p = float(np.median(s_times)), float(np.median(p_times))
  return {
    "variant": variant,
    "layers": layers,
    "members": members,
    "single_s": s,
    "pop_s": p,
    "ratio": s / p,
  }


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--variant", default="prenorm")
  ap.add_argument("--layers", default="6,12,24")
  ap.add_argument("--members", default="1,2,4,8")
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--steps", type=int, default=4)
  ap.add_argument("--out", default=None)
  a = ap.parse_args()
  cores = sorted(os.sched_getaffinity(0))
  print(f"{len(cores)} core(s) {cores}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
  rows = []
  for layers in [int(v) for v in a.layers.split(",")]:
    for m in [int(v) for v in a.members.split(",")]:
      r = measure(a.variant, layers, m, a.reps, a.steps)
      rows.append(r)
      print(
        f"{a.variant} {layers:>3} layers, M={m:>2}: single {1e3 * r['single_s']:7.1f} ms, "
        f"population {1e3 * r['pop_s']:7.1f} ms per model-step; ratio {r['ratio']:.2f}",
        flush=True,
      )
  if a.out:
    with open_nofollow(a.out, "w") as f:
      json.dump(
        {"cores": cores, "xla_flags": os.environ.get("XLA_FLAGS", ""), "rows": rows}, f, indent=1
      )


if __name__ == "__main__":
  main()
