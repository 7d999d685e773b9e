"""The XLA flag sets `compile_for --tune` tries on a TPU, by name, and which of them a libtpu
accepts. A candidate names its flags `default` or FLAG_PARTS names joined by "+"
(`no_windowed+maxtext`); they are compile options here and LIBTPU_INIT_ARGS on a TPU VM
(tuned_table.launch_keys)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

# What MaxText sets in LIBTPU_INIT_ARGS for its TPU runs (async collectives fused and
# overlapped with compute, the latency-hiding scheduler), passed here as compile options;
# one libtpu does not accept is dropped with a note (accepted_flags).
MAXTEXT_FLAGS = {
  "xla_tpu_enable_latency_hiding_scheduler": "true",
  "xla_tpu_enable_async_collective_fusion": "true",
  "xla_tpu_enable_async_collective_fusion_fuse_all_gather": "true",
  "xla_tpu_enable_async_collective_fusion_multiple_steps": "true",
  "xla_tpu_overlap_compute_collective_tc": "true",
  "xla_enable_async_all_gather": "true",
  "xla_enable_async_collective_permute": "true",
  "xla_tpu_enable_data_parallel_all_reduce_opt": "true",
  "xla_tpu_data_parallel_opt_different_sized_ops": "true",
}
# XLA compiles a matmul whose contraction is sharded (fsdp shards every weight on d_model) as a
# loop over the weight's shards, a "windowed einsum" (a collective matmul that overlaps the
# all-gather with compute). At the :paper width each trip re-reads and re-writes the whole
# output: Post-LN 96 on v5e:4x4 spends 77% of its HBM bytes in those loops (scripts/hlo_bytes.py),
# and the cost model counts each loop's body once, not per trip. These flags make the compiler
# all-gather the (0.5-2 MiB) weight and run one matmul; docs/tpu_compile/README.md has the rows.
NO_WINDOWED_EINSUM = {
  "xla_tpu_enable_windowed_einsum_for_all_gather": "false",
  "xla_tpu_enable_windowed_einsum_for_reduce_scatter": "false",
}
FLAG_PARTS = {"no_windowed": NO_WINDOWED_EINSUM, "maxtext": MAXTEXT_FLAGS}


def flag_parts(name: str) -> tuple[str, ...]:
  """The FLAG_PARTS a candidate's flags name ('default': none); ValueError for another name."""
  parts = () if name == "default" else tuple(name.split("+"))
  for p in parts:
    if p not in FLAG_PARTS:
      raise ValueError(f"XLA flag set {p!r} (in {name!r}): one of default, {', '.join(FLAG_PARTS)}")
  return parts


def flags_of(name: str, accepted: dict[str, str] | None = None) -> dict[str, str]:
  """The compile options of a candidate's flags name, less those libtpu did not accept."""
  out = {k: v for p in flag_parts(name) for k, v in FLAG_PARTS[p].items()}
  return {k: v for k, v in out.items() if accepted is None or k in accepted}


def accepted_flags(devices: Sequence, flags: dict[str, str], note: Callable[[str], None]):
  """The flags libtpu accepts as compile options (a tiny program compiled for `devices` with
  each); one it refuses ("No such compile option") is dropped with a one-line note."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import Mesh, NamedSharding, PartitionSpec

  one = NamedSharding(Mesh(np.array(devices[:1]), ("x",)), PartitionSpec())
  lowered = jax.jit(jnp.sin, in_shardings=one, out_shardings=one).lower(
    jax.ShapeDtypeStruct((8,), jnp.float32, sharding=one)
  )
  kept = {}
  for k, v in flags.items():
    try:
      lowered.compile(compiler_options={k: v})
      kept[k] = v
    except jax.errors.JaxRuntimeError as e:
      note(f"note: XLA flag {k} not accepted by this libtpu ({str(e).splitlines()[0][:80]})")
  return kept
