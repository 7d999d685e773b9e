"""The matmul floor of one train step: every dot of a step alone, XLA against PyTorch
(scripts/bench_matmuls.py is the command line; its docstring says what is printed).

`step_dots` lists the dots one train step of a model performs (for each dense layer the forward
x@W, the input gradient dY@W^T and the weight gradient X^T@dY; for attention the batched QK^T
and AV and their four backward products; the head's three); their FLOPs sum to
`bench.flops_per_token(...)["train"]` times the tokens per step (tested). `time_shapes` times
each distinct dot shape alone, `time_step` all of a step's dots in one jitted call with distinct
operands per layer (no common-subexpression reuse), each in XLA and, when PyTorch is installed,
in PyTorch eager.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from resnorm_jax.hardware.bench import summarize


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
