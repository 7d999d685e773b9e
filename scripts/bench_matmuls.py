"""The matmul floor of one train step: every dot of a step alone, XLA against PyTorch.

python scripts/bench_matmuls.py [--config=configs/nanogpt_char.py] [--reps=40] [--copies=8]
    [--no_torch] [--out=matmuls.json]

Lists the dots one train step of the config's model performs (`step_dots`: for each dense
layer the forward x@W, the input gradient dY@W^T and the weight gradient X^T@dY; for
attention the batched QK^T and AV and their four backward products; the head's three),
then times (1) each distinct dot shape alone and (2) all of a step's dots in one jitted call
with distinct operands per layer (no common-subexpression reuse), in XLA on the default
device and, when PyTorch is installed, the same products in PyTorch eager. Their sum of
FLOPs equals `benchmark.flops_per_token(...)["train"]` times the tokens per step (tested).
What it answers: how much of a step's time its matmuls alone take with XLA's kernels on this
machine, i.e. the floor no change to fusion or dispatch can go below.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

from resnorm_jax.config import cli
from resnorm_jax.tools.bench import machine_info, summarize


@dataclass(frozen=True)
class Dot:
  """One product of a train step: einsum `eq` of operands shaped `a` and `b`, `count` times."""

  name: str
  eq: str
  a: tuple[int, ...]
  b: tuple[int, ...]
  count: int

  @property
  def flops(self) -> int:
    """2 x multiply-adds of one product."""
    ins, out = self.eq.split("->")
    sa, sb = ins.split(",")
    size = dict(zip(sa, self.a, strict=True)) | dict(zip(sb, self.b, strict=True))
    n = 1
    for c in set(sa + sb):
      n *= size[c]
    return 2 * n


def step_dots(m, batch_size: int, seq_len: int) -> list[Dot]:
  """Every dot of one train step of ModelConfig `m` (forward and backward)."""
  tokens, d, f = batch_size * seq_len, m.d_model, m.d_ff
  heads, t = m.num_heads, seq_len
  hd = d // heads
  dense = [("q", d, d), ("k", d, d), ("v", d, d), ("attn_out", d, d)]
  dense += [("ffn_in", d, f)] * (2 if m.ffn_activation == "swiglu" else 1) + [("ffn_out", f, d)]
  if m.residual == "gated":
    dense += [("gate", d, d)] * (1 if m.block == "parallel" else 2)
  layers = m.num_layers
  dots = []
  for name, k, n in dense:
    dots += [
      Dot(f"{name} x@W", "mk,kn->mn", (tokens, k), (k, n), layers),
      Dot(f"{name} dY@W^T", "mn,kn->mk", (tokens, n), (k, n), layers),
      Dot(f"{name} X^T@dY", "mk,mn->kn", (tokens, k), (tokens, n), layers),
    ]
  bh = batch_size * heads
  dots += [  # scores S = Q K^T, O = P V; backward: dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q
    Dot("attn Q@K^T", "bqd,bkd->bqk", (bh, t, hd), (bh, t, hd), layers),
    Dot("attn P@V", "bqk,bkd->bqd", (bh, t, t), (bh, t, hd), layers),
    Dot("attn dO@V^T", "bqd,bkd->bqk", (bh, t, hd), (bh, t, hd), layers),
    Dot("attn P^T@dO", "bqk,bqd->bkd", (bh, t, t), (bh, t, hd), layers),
    Dot("attn dS@K", "bqk,bkd->bqd", (bh, t, t), (bh, t, hd), layers),
    Dot("attn dS^T@Q", "bqk,bqd->bkd", (bh, t, t), (bh, t, hd), layers),
  ]
  v = m.vocab_size
  dots += [
    Dot("head x@E^T", "mk,kn->mn", (tokens, d), (d, v), 1),
    Dot("head dY@E", "mn,kn->mk", (tokens, v), (d, v), 1),
    Dot("head X^T@dY", "mk,mn->kn", (tokens, d), (tokens, v), 1),
  ]
  return dots


def _operands(dot: Dot, copies: int, seed: int):
  import numpy as np

  rng = np.random.default_rng(seed)
  a = rng.standard_normal((copies, *dot.a), dtype=np.float32)
  b = rng.standard_normal((copies, *dot.b), dtype=np.float32)
  ins, out = dot.eq.split("->")
  sa, sb = ins.split(",")
  return a, b, f"z{sa},z{sb}->z{out}"  # a leading axis of distinct copies


def _time(fn, reps: int) -> dict:
  fn()
  fn()
  ts = []
  for _ in range(reps):
    t0 = time.perf_counter()
    fn()
    ts.append(time.perf_counter() - t0)
  return summarize(ts)


def time_shapes(dots: list[Dot], copies: int, reps: int, use_torch: bool) -> list[dict]:
  """Per distinct dot: seconds per product (median over reps of `copies` products)."""
  import jax
  import jax.numpy as jnp

  torch = _torch() if use_torch else None
  rows, seen = [], set()
  for i, dot in enumerate(dots):
    key = (dot.eq, dot.a, dot.b)
    if key in seen:
      continue
    seen.add(key)
    a, b, eq = _operands(dot, copies, i)
    ja, jb = jax.device_put(a), jax.device_put(b)
    f = jax.jit(lambda x, y, eq=eq: jnp.einsum(eq, x, y))
    row = {"name": dot.name, "eq": dot.eq, "a": dot.a, "b": dot.b, "flops": dot.flops}
    row["xla_s"] = _time(lambda f=f, ja=ja, jb=jb: f(ja, jb).block_until_ready(), reps)
    if torch is not None:
      ta, tb = torch.from_numpy(a), torch.from_numpy(b)
      row["torch_s"] = _time(lambda eq=eq, ta=ta, tb=tb: torch.einsum(eq, ta, tb), reps)
    rows.append(row)
  return rows


def time_step(dots: list[Dot], reps: int, use_torch: bool) -> dict:
  """All of a step's dots in one call (distinct operands per product): seconds per step."""
  import jax
  import jax.numpy as jnp

  ops = [_operands(dot, dot.count, i) for i, dot in enumerate(dots)]
  args = [(jax.device_put(a), jax.device_put(b)) for a, b, _ in ops]
  eqs = [eq for _, _, eq in ops]

  @jax.jit
  def step(args):  # every product feeds the output, so none is dead code
    return sum(jnp.einsum(eq, x, y).sum() for eq, (x, y) in zip(eqs, args, strict=True))

  out = {"flops": sum(d.flops * d.count for d in dots)}
  out["xla_s"] = _time(lambda: step(args).block_until_ready(), reps)
  torch = _torch() if use_torch else None
  if torch is not None:
    targs = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b, _ in ops]

    def tstep():
      with torch.no_grad():
        for eq, (x, y) in zip(eqs, targs, strict=True):
          torch.einsum(eq, x, y)

    out["torch_s"] = _time(tstep, reps)
    out["torch_threads"] = torch.get_num_threads()
  return out


def _torch():
  try:
    import torch
  except ImportError:
    return None
  return torch


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", default="configs/nanogpt_char.py", help="FILE[:ARG]")
  p.add_argument("--reps", type=int, default=40, help="timed calls per measurement")
  p.add_argument("--copies", type=int, default=8, help="distinct products per shape call")
  p.add_argument("--no_torch", action="store_true", help="skip the PyTorch comparison")
  p.add_argument("--out", default="", help="write the results as JSON to this file")
  a = p.parse_args()

  from resnorm_jax.model.config_types import model_config_from

  config = cli.load_config_file(a.config)
  m, t = model_config_from(config), config.train
  dots = step_dots(m, t.batch_size, t.seq_len)
  use_torch = not a.no_torch
  res = {"machine": machine_info(), "config": a.config, "batch": t.batch_size, "seq": t.seq_len}
  res["shapes"] = time_shapes(dots, a.copies, a.reps, use_torch)
  res["step"] = time_step(dots, a.reps, use_torch)
  res["loadavg_end"] = list(os.getloadavg())

  print(f"{config.name}: {len(dots)} dot kinds, load {res['machine']['loadavg'][0]:.2f}")
  print(f"{'dot':16} {'shapes':>24} {'xla ms':>8} {'GFLOP/s':>8} {'torch ms':>9} {'GFLOP/s':>8}")
  for r in res["shapes"]:
    xs = r["xla_s"]["median"] / a.copies
    shapes = str(r["a"]) + str(r["b"])
    line = f"{r['name']:16} {shapes:>24} {xs * 1e3:8.3f} {r['flops'] / xs / 1e9:8.1f}"
    if "torch_s" in r:
      ts = r["torch_s"]["median"] / a.copies
      line += f" {ts * 1e3:9.3f} {r['flops'] / ts / 1e9:8.1f}"
    print(line)
  s = res["step"]
  fl = s["flops"]
  print(
    f"whole step's dots: {fl / 1e9:.3f} GFLOP; XLA {s['xla_s']['median'] * 1e3:.2f} ms "
    f"({fl / s['xla_s']['median'] / 1e9:.1f} GFLOP/s, p10-p90 "
    f"{s['xla_s']['p10'] * 1e3:.2f}-{s['xla_s']['p90'] * 1e3:.2f})",
    end="",
  )
  if "torch_s" in s:
    ts = s["torch_s"]["median"]
    rate = fl / ts / 1e9
    print(f"; PyTorch eager {ts * 1e3:.2f} ms ({rate:.1f} GFLOP/s, {s['torch_threads']} threads)")
  else:
    print()
  print(f"load at end {res['loadavg_end'][0]:.2f}")
  if a.out:
    cli.write_json(a.out, res)


if __name__ == "__main__":
  main()
