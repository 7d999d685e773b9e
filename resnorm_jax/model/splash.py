"""model.attention=splash: JAX's Pallas splash attention (a TPU flash-attention kernel), causal.

`jax.experimental.pallas.ops.tpu.splash_attention` (JAX 0.10.2): `make_splash_mha` builds a
kernel for one sequence, heads-major, q [H, T, K], k and v [H, S, K], from a per-head mask
(`MultiHeadMask` of `CausalMask`) and tile sizes (`BlockSizes`); it is vmapped here over the
batch. The kernel does not scale the logits: q is multiplied by the model's softmax scale
first (1/sqrt(K), muP's 1/K, nGPT's sqrt(K)), so its `attn_logits_soft_cap` caps the scaled
logits q.k * scale, as the dense path's softcap does (variants/softcap.py), and its `sinks`
(one logit per head whose exp joins every row's denominator) are the dense path's sinks
(variants/sinks.py), their gradient included. Scores, softmax and the output's accumulator
are float32 in the kernel; no [B, H, T, S] probabilities are stored (the backward pass
recomputes them from the saved logsumexp). Under `remat=full` the forward pass runs the
kernel without residuals (`remat_lean`).

Tiles: 512 where the sequence length divides by it, else 256, else 128 (Mosaic's lane width:
the kernel needs tiles of 128 multiples that divide the sequence, so the sequence length must
be a multiple of 128), the same for the forward pass and the two backward kernels (dq, dkv).

Where it runs: a TPU (Mosaic). Anywhere else the kernel can only be interpreted (Pallas
interpret mode: the kernel's body run as ordinary JAX ops, slowly), which only the tests use:
they set INTERPRET = True; otherwise `config_types.resolve_attention` refuses `splash` off a
TPU before anything compiles.

Sharding: a Mosaic kernel is a custom call the SPMD partitioner cannot split. Inside a step
traced with the stream's sharding (stream_sharding.py: rows over the data-parallel mesh
axes), the kernel runs under `jax.shard_map` on each chip's rows; heads are not split (the
model's `heads` rule maps to `tensor`: with mesh.tensor > 1 the heads are gathered first).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from resnorm_jax.model import stream_sharding

# Pallas interpret mode (the kernel run as plain JAX ops on any backend). Only the tests set
# it: on a CPU `splash` is refused unless it is True.
INTERPRET = False

LANES = 128  # the kernel's tiles are multiples of this (NUM_LANES in splash_attention_kernel)
TILES = (512, 256, 128)


def block_size(seq_len: int) -> int:
  """The tile for a sequence of `seq_len`: the largest of TILES that divides it."""
  for tile in TILES:
    if seq_len % tile == 0:
      return tile
  raise ValueError(
    f"model.attention='splash' needs a sequence length that is a multiple of {LANES} (the "
    f"kernel's tile); got {seq_len}. Use train.seq_len={-(-seq_len // LANES) * LANES} or "
    "model.attention='dense'"
  )


def _kernel(num_heads: int, seq_len: int, softcap: float | None, interpret: bool):
  from jax.experimental.pallas.ops.tpu import splash_attention as sa

  tile = block_size(seq_len)
  blocks = sa.BlockSizes(
    block_q=tile,
    block_kv=tile,
    block_kv_compute=tile,
    block_q_dkv=tile,
    block_kv_dkv=tile,
    block_kv_dkv_compute=tile,
    block_q_dq=tile,
    block_kv_dq=tile,
  )
  mask = sa.MultiHeadMask([sa.CausalMask((seq_len, seq_len)) for _ in range(num_heads)])
  return sa.make_splash_mha(
    mask,
    block_sizes=blocks,
    head_shards=1,
    q_seq_shards=1,
    attn_logits_soft_cap=softcap,
    interpret=interpret,
  )


def attention(
  q_BxTxHxK: jax.Array,
  k_BxTxHxK: jax.Array,
  v_BxTxHxK: jax.Array,
  scale: float,
  *,
  sinks_H: jax.Array | None = None,
  softcap: float | None = None,
) -> jax.Array:
  """softmax(cap(Q K^T * scale) + causal mask [+ sink column]) V by the splash kernel:
  [B, T, H, K], q's dtype. Swaps to the kernel's heads-major layout and back (the model's
  own splash path projects to that layout instead: attention.Attention.heads_first)."""
  q = (q_BxTxHxK.astype(jnp.float32) * scale).astype(q_BxTxHxK.dtype)
  q, k, v = (jnp.swapaxes(y, 1, 2) for y in (q, k_BxTxHxK, v_BxTxHxK))  # [B, H, T, K]
  return jnp.swapaxes(heads_major(q, k, v, sinks_H=sinks_H, softcap=softcap), 1, 2)


def remat_lean(fn):
  """`fn` (the kernel's call) with its VJP as before, and a forward pass under remat that
  writes no residuals: where a checkpointed layer keeps nothing of the call (`remat=full`:
  the layer is run again in the backward pass), the forward pass runs the kernel without
  residuals (its `_no_residuals` variant) instead of the one that also writes the float32
  logsumexp, broadcast over 128 lanes ([B, H, T, 128], 4 bytes each: as many bytes as q, k
  and v together at head dim 64 in bfloat16), only for XLA to drop it. The run of the layer
  in the backward pass keeps the residuals the backward kernels read. JAX's
  `custom_vjp(optimize_remat=True)` does the choosing, by dead-code elimination of unused
  residuals."""

  @jax.custom_vjp
  def lean(q, k, v, sinks):
    return fn(q, k, v, sinks)

  def fwd(q, k, v, sinks):
    return jax.vjp(fn, q, k, v, sinks)  # (out, the VJP holding the kernel's residuals)

  def bwd(vjp, g):
    return vjp(g)

  lean.defvjp(fwd, bwd, optimize_remat=True)
  return lean


def heads_major(
  q_BxHxTxK: jax.Array,
  k_BxHxSxK: jax.Array,
  v_BxHxSxK: jax.Array,
  *,
  sinks_H: jax.Array | None = None,
  softcap: float | None = None,
) -> jax.Array:
  """The kernel on the layout it reads: q already scaled, [B, H, T, K] in and out."""
  _, h, t, _ = q_BxHxTxK.shape
  # The kernel's mask tables are built as constants, not as values of the trace: the
  # forward pass's kernel without residuals (remat_lean) is traced after this trace ends.
  with jax.ensure_compile_time_eval():
    kernel = _kernel(h, t, softcap or None, INTERPRET)
  sinks = None if sinks_H is None else sinks_H.astype(jnp.float32)

  per_shard = remat_lean(
    lambda q, k, v, sinks: jax.vmap(lambda q, k, v: kernel(q, k, v, sinks=sinks))(q, k, v)
  )

  sharding = stream_sharding.current()
  if isinstance(sharding, NamedSharding) and len(sharding.spec):
    rows = PartitionSpec(sharding.spec[0])
    per_shard = jax.shard_map(
      per_shard,
      mesh=sharding.mesh,
      in_specs=(rows, rows, rows, PartitionSpec()),
      out_specs=rows,
      check_vma=False,  # a Pallas call carries no varying-axes type; the transpose psums
    )
  return per_shard(q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, sinks)
