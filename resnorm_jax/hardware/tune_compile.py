"""One candidate of `compile_for --tune` compiled for a TPU slice and estimated: the target
slice, the deviceless compile with its memory pass and its loop-corrected second pass, the
largest ops by bytes, the splash kernel's analytic time (the cost model counts it as 0) and
the roofline from the attributed bytes. The search over candidates is tune.py's. Every time
here is the TPU compiler's cost-model estimate, not a measurement.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from ml_collections import ConfigDict

from resnorm_jax.hardware import hlo_bytes
from resnorm_jax.hardware import target_compile as tc
from resnorm_jax.hardware.tpu_target import GIB, Chip, TargetError
from resnorm_jax.hardware.tune_cache import (
  Result,
  program_hash,
)
from resnorm_jax.hardware.tune_space import (
  Candidate,
  overrides,
)
from resnorm_jax.hardware.xla_flags import (
  flags_of,
)


def top_ops_by_bytes(hlo_text: str, n: int = 3) -> list[str]:
  """The `n` ops of the compiled program that move the most HBM bytes per step (each op's
  reads and writes times the trips of the loops around it: hlo_bytes.op_bytes), as
  'opcode dtype[shape] xTRIPS GiB (pass: JAX op)'."""
  from resnorm_jax.hardware import hlo_bytes

  return _top(hlo_bytes.op_bytes(hlo_text), n)


def _top(all_ops: list, n: int = 3) -> list[str]:
  from resnorm_jax.hardware import hlo_bytes
  from resnorm_jax.hardware.step_profile import short_source

  ops = sorted(all_ops, key=lambda o: -o.step_bytes)[:n]
  out = []
  for o in ops:
    first = hlo_bytes.first_array(o.shape)
    out.append(
      f"{o.opcode} {first} x{o.trips} {o.step_bytes / GIB:.2f} GiB "
      f"({o.part}: {short_source(o.source).split('/')[-1]})"
    )
  return out


def splash_seconds(mcfg, chip: Chip, tokens_per_chip: float) -> float:
  """The splash kernel's analytic time per chip per step (the cost model counts it as 0): the
  attention FLOPs bench counts (12 L T d per token: QK^T and AV over the full T, forward and
  backward; 4 L T d more where remat recomputes the forward) at the chip's bf16 peak, or its
  bytes (q, k, v, o read or written 4 times, dO, dq, dk, dv once: 24 L d bytes per token in
  bf16) at its HBM bandwidth, whichever is longer."""
  layers, t, d = mcfg.num_layers, mcfg.max_seq_len, mcfg.d_model
  flops = (12 + (4 if mcfg.remat != "none" else 0)) * layers * t * d * tokens_per_chip
  nbytes = 24 * layers * d * tokens_per_chip
  return max(flops / chip.bf16_flops, nbytes / chip.hbm_bandwidth)


@dataclasses.dataclass
class Target:
  """The slice a tune compiles for: chip, topology name, compile-only devices, HBM limit."""

  chip: Chip
  name: str
  devices: list
  hbm_limit: int
  flags: dict[str, str]  # the FLAG_PARTS flags this libtpu accepts


def target(topology: str, note: Callable[[str], None] = print) -> Target:
  """The TPU slice of `topology`; TargetError for a bad one or a GPU (no cost model)."""
  from resnorm_jax.hardware import gpu_target

  if gpu_target.is_gpu(topology):
    raise TargetError(
      f"--tune needs a TPU topology: the GPU compiler gives no cost model ({topology})"
    )
  chip, name, devices, platform = tc.target_devices(topology)
  return Target(chip, name, devices, tc.memory_limit(chip, devices[0], platform), {})


def _compile(lowered, options: dict[str, str] | None):
  """(memory, refusal, cost, top ops by bytes, CPU seconds, attributed bytes) of one compiled
  train step."""
  import jax

  from resnorm_jax.hardware import hlo_bytes
  from resnorm_jax.train import run_setup

  cpu = time.process_time()
  try:
    compiled = lowered.compile(compiler_options=options or None)
  except jax.errors.JaxRuntimeError as e:
    if "RESOURCE_EXHAUSTED" not in str(e):
      raise
    return {}, str(e).splitlines()[0], {}, [], time.process_time() - cpu, 0.0
  cost = compiled.cost_analysis() or {}
  cost = {k: float(cost[k]) for k in ("flops", "optimal_seconds", "bytes accessed") if k in cost}
  ops = hlo_bytes.op_bytes(compiled.as_text())  # parsed once: the total and the top ops
  attributed = sum(o.step_bytes for o in ops)
  top = _top(ops)
  return run_setup.aot_memory(compiled), "", cost, top, time.process_time() - cpu, attributed


def compiled_text(config: ConfigDict, tgt: Target, c: Candidate, vocab: int) -> tuple[str, dict]:
  """(the optimized HLO text, the cost analysis) of a candidate's train step compiled for
  `tgt` with its flags, the scanned stack's loop as it runs (no correction)."""
  lowered = _build(config, tgt, c, vocab).lower_step()
  compiled = lowered.compile(compiler_options=flags_of(c.flags, tgt.flags) or None)
  cost = compiled.cost_analysis() or {}
  return compiled.as_text(), {k: float(v) for k, v in cost.items() if isinstance(v, int | float)}


def _build(config: ConfigDict, tgt: Target, c: Candidate, vocab: int, unroll: int = 1):
  from resnorm_jax.train import run_setup

  keys = {**overrides(c, len(tgt.devices)), "model.scan_unroll": unroll}
  return run_setup.build(
    tc.with_overrides(config, keys), tgt.devices, vocab_size=vocab, platform="tpu"
  )


def lowered(config: ConfigDict, tgt: Target, c: Candidate, vocab: int):
  """(the candidate's train step lowered, its program_hash), or (None, the one-line reason)
  where the candidate's settings refuse the config (splash: the sequence) before lowering."""
  try:
    low = _build(config, tgt, c, vocab).lower_step()
  except ValueError as e:
    return None, str(e).splitlines()[0]
  return low, program_hash(low.as_text())


def _memory_pass(low, tgt: Target, options: dict[str, str], program: str) -> Result:
  """One compile of the lowered step `low`, no loop correction: fits or not, per-chip bytes,
  and the compiler's cost as it is (`raw_cost`: a scanned stack's loop body counted once, so
  no step estimate)."""
  from resnorm_jax.hardware.tpu_target import HLO_TEMPS, bytes_in

  memory, oom, cost, top, cpu, attributed = _compile(low, options)
  total = memory.get("total")
  fits = not oom and total is not None and total <= tgt.hbm_limit
  return Result(
    fits=fits,
    per_chip_bytes=total or bytes_in(HLO_TEMPS, oom),
    hbm_limit=tgt.hbm_limit,
    raw_cost=cost,
    top_ops=top,
    cpu_s=cpu,
    attributed_bytes=attributed,
    attribution=hlo_bytes.VERSION,
    program=program,
  )


def _corrected(config: ConfigDict, tgt: Target, c: Candidate, vocab: int, one: Result) -> Result:
  """The loop-corrected estimate of a candidate that fits: a second compile with two layers
  per loop iteration (target_compile.loop_corrected), MFU and bound from it."""
  from resnorm_jax.hardware import bench

  unroll = tc.correction_unroll(int(config.model.num_layers))
  run2 = _build(config, tgt, c, vocab, unroll=unroll)
  _, oom, cost2, _, cpu, _ = _compile(run2.lower_step(), flags_of(c.flags, tgt.flags))
  cost1 = one.raw_cost
  mcfg, chip, chips = run2.mcfg, tgt.chip, len(tgt.devices)
  cost = tc.loop_corrected(cost1, cost2, mcfg.num_layers, unroll) if not oom else cost1
  seconds, source = tc.step_estimate([cost1, cost2], cost, chip)
  t = config.train
  tokens = t.batch_size * t.seq_len
  flops_s = cost["flops"] / chip.bf16_flops
  kernel = splash_seconds(mcfg, chip, tokens / chips) if mcfg.attention == "splash" else 0.0
  if kernel:
    seconds, flops_s = seconds + kernel, flops_s + kernel
    source += " + splash kernel's analytic FLOPs/bytes at peak"
  bytes_s = cost.get("bytes accessed", 0.0) / chip.hbm_bandwidth
  model_flops = bench.flops_per_token(mcfg, t.seq_len)["train"] * tokens
  two = dataclasses.replace(
    one,
    corrected=not oom,
    step_s=seconds,
    source=source,
    mfu=model_flops / (seconds * chips * chip.bf16_flops),
    bound="FLOPs" if flops_s >= bytes_s else "bytes",
    flops=cost["flops"],
    bytes=cost.get("bytes accessed", 0.0),
    cpu_s=one.cpu_s + cpu,
    cached=False,
  )
  return with_attribution(two, one, config, tgt, vocab)


def with_attribution(two: Result, one: Result, config: ConfigDict, tgt: Target, vocab: int):
  """`two` (a loop-corrected result) with the roofline of its corrected FLOPs and `one`'s
  attributed bytes (+ the splash kernel's analytic time, as in the estimate)."""
  from resnorm_jax.hardware import bench
  from resnorm_jax.train import run_setup

  if not one.attributed_bytes or not two.step_s:
    return dataclasses.replace(two, attribution=one.attribution)
  mcfg = run_setup.model_config(config, vocab_size=vocab, platform="tpu")
  chip, chips, t = tgt.chip, len(tgt.devices), config.train
  tokens = t.batch_size * t.seq_len
  kernel = splash_seconds(mcfg, chip, tokens / chips) if mcfg.attention == "splash" else 0.0
  roofline = max(two.flops / chip.bf16_flops, one.attributed_bytes / chip.hbm_bandwidth)
  seconds = roofline + kernel
  model_flops = bench.flops_per_token(mcfg, t.seq_len)["train"] * tokens
  return dataclasses.replace(
    two,
    attributed_bytes=one.attributed_bytes,
    attributed_step_s=seconds,
    attributed_mfu=model_flops / (seconds * chips * chip.bf16_flops),
    attribution=one.attribution,
  )
