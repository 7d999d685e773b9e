"""A run compiled for accelerators this host does not have: a TPU slice or a set of GPUs.

Deviceless ahead-of-time compilation: the target's compiler gives compile-only devices
(libtpu for a TPU topology such as "v5e:4x4", tpu_target.py; the CUDA PJRT plugin for
"h100:8", gpu_target.py), `run_setup.build` builds the run on them exactly as the loop
does (same mesh rules, remat, dtype, shardings), and that compiler compiles the train and
eval steps. What comes back is the compiler's own: per-device memory (the TPU compiler
refuses an oversize program with RESOURCE_EXHAUSTED, as on the chip; on GPUs the verdict is
the memory analysis against what JAX lets a process allocate) and, for TPUs, its cost model
(FLOPs, `optimal_seconds`).

The cost model counts a `while` loop's body once, not once per iteration, so the scanned
layer stack's cost is that of one layer whatever the depth. `loop_corrected` compiles the
step a second time with two layers per loop iteration (model.scan_unroll=2; the smallest
divisor of L past 1 at an odd depth): the difference is one layer's cost (over the extra layers
per iteration), and outside + L x layer is the step's (docs/tpu_compile/README.md
checks it against the same stack compiled without a loop). Every time, rate and MFU
derived from it is the TPU compiler's cost-model estimate, not a measurement
(target_report.py).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax.hardware import gpu_target, tpu_target
from resnorm_jax.hardware.target_report import Compiled, Report
from resnorm_jax.hardware.tpu_target import Chip, TargetError

GPT2_VOCAB = 50304  # GPT-2's 50,257 ids padded to a multiple of 128 (the :paper data)
REMAT_ORDER = ("none", "dots", "dots_no_batch", "full")  # most memory first


def use_cpu_host() -> None:
  """JAX's own platform in a process that compiles for a target it does not have: the CPU.

  Set before JAX starts a backend (experiments.compile_for calls it before any JAX work).
  Left to choose, JAX starts every platform it finds: with the CUDA plugin installed
  (requirements-gpu-compile.txt) on a host without CUDA it fails ("Unable to load CUDA",
  then "topology not implemented for cuda"); with libtpu on a host without a TPU it logs
  "Unable to initialize backend 'tpu'". The target's compile-only devices come from its
  compiler whatever the host platform is.
  """
  os.environ["JAX_PLATFORMS"] = "cpu"
  if "jax" in sys.modules:  # imported, no backend started yet: the flag still applies
    sys.modules["jax"].config.update("jax_platforms", "cpu")


def target_devices(spec: str) -> tuple[Chip, str, list, str]:
  """(chip, target name, compile-only devices, platform) of a TPU slice ('v5e:4x4',
  'v5p-8') or of GPUs ('h100:8'); TargetError for a bad spec or a missing compiler."""
  if gpu_target.is_gpu(spec):
    chip, devices = gpu_target.chip_devices(spec)
    return chip, spec, devices, "gpu"
  chip, name, devices = tpu_target.topology_devices(spec)
  return chip, name, devices, "tpu"


def memory_limit(chip: Chip, device, platform: str) -> int:
  """Bytes one device may hold: the TPU compiler's HBM limit (probed), or what JAX lets a
  process allocate on the GPU (gpu_target.usable_bytes)."""
  if platform == "gpu":
    return gpu_target.usable_bytes(chip.name)
  return tpu_target.hbm_limit(device) or chip.hbm_bytes


def compile_lowered(lowered) -> Compiled:
  """Compiles `lowered` for its devices; RESOURCE_EXHAUSTED is a result (oom), not an error."""
  import jax

  from resnorm_jax.train import run_setup

  wall, cpu = time.perf_counter(), time.process_time()
  try:
    compiled = lowered.compile()
  except jax.errors.JaxRuntimeError as e:
    if "RESOURCE_EXHAUSTED" not in str(e):
      raise
    oom = str(e).splitlines()[0]
    return Compiled({}, oom, {}, time.perf_counter() - wall, time.process_time() - cpu)
  seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
  cost = compiled.cost_analysis() or {}
  if isinstance(cost, list):  # older JAX: one dict per program
    cost = cost[0] if cost else {}
  keep = ("flops", "optimal_seconds", "bytes accessed", "transcendentals")
  cost = {k: float(cost[k]) for k in keep if k in cost}
  return Compiled(run_setup.aot_memory(compiled), "", cost, seconds, cpu_seconds)


def correction_unroll(layers: int) -> int:
  """Layers per loop iteration of the second compile: the smallest divisor of `layers` past 1.

  A scan whose unroll does not divide its length runs the remainder outside the loop (and a
  one-trip loop is inlined): at 3 layers, unroll 2 compiles all three in line, and one + 2 x
  (two - one) counted 5. A divisor keeps every layer in the loop body's count."""
  return next(d for d in range(2, layers + 1) if layers % d == 0)


def loop_corrected(
  one: dict[str, float], two: dict[str, float], layers: int, unroll: int = 2
) -> dict[str, float]:
  """The step's cost from the compiler's cost of the step at 1 and `unroll` layers per
  iteration of the scanned stack (each counts the loop body once, `unroll` a divisor of
  `layers`: correction_unroll): layer = (two - one) / (unroll - 1), outside = one - layer,
  step = outside + layers x layer = one + (layers - 1) x layer."""
  if layers % unroll:
    raise ValueError(f"unroll {unroll} does not divide {layers} layers (correction_unroll)")
  return {k: one[k] + (layers - 1) * (two[k] - one[k]) / (unroll - 1) for k in one if k in two}


def step_estimate(costs: Sequence[dict[str, float]], cost: dict[str, float], chip: Chip):
  """(seconds, source) of one step per chip from `cost` (loop-corrected from `costs`).

  The compiler's `optimal_seconds` where every compile gave one >= 0; it is sometimes
  negative (some programs' ops count as -1 s each), and then the roofline of the compiler's
  own FLOPs and bytes accessed: max(FLOPs / bf16 peak, bytes / HBM bandwidth)."""
  if all(c.get("optimal_seconds", -1.0) >= 0 for c in costs) and cost["optimal_seconds"] > 0:
    return cost["optimal_seconds"], "optimal_seconds"
  roofline = max(
    cost["flops"] / chip.bf16_flops, cost.get("bytes accessed", 0) / chip.hbm_bandwidth
  )
  return roofline, "roofline of FLOPs and bytes"


def with_overrides(config: ConfigDict, overrides: dict[str, Any]) -> ConfigDict:
  """A copy of `config` with dotted-key overrides (the config stays locked)."""
  c = ConfigDict(config.to_dict())
  c.update_from_flattened_dict(dict(overrides))
  c.lock()
  return c


def resolve_vocab(
  config: ConfigDict, vocab_size: int = 0, platform: str | None = None
) -> tuple[int, str]:
  """(vocabulary, note): `vocab_size` if given, else the run's (model.vocab_size or its data);
  a :paper config whose token folder is not on this host compiles at GPT-2's padded 50,304.
  `platform`: the target's (what model.attention resolves to there; splash: a TPU's)."""
  from resnorm_jax.train import run_setup

  if vocab_size:
    return vocab_size, ""
  try:
    return run_setup.model_config(config, platform=platform).vocab_size, ""
  except ValueError:
    if config.model.vocab_size:
      raise
  return GPT2_VOCAB, f"vocabulary {GPT2_VOCAB:,} (GPT-2, padded): no data folder here"


def compile_for(
  config: ConfigDict,
  topology: str,
  *,
  vocab_size: int = 0,
  eval_step: bool = True,
  correct_loop: bool = True,
  devices: Sequence | None = None,
) -> Report:
  """Builds `config`'s run on `topology`'s devices as training does and compiles its steps.

  TargetError (a ValueError) for a bad target, no compiler for it, or a mesh or batch the slice
  cannot hold, before anything compiles. `devices` overrides the topology's (tests)."""
  chip, name, topo_devices, platform = target_devices(topology)
  devices = list(devices if devices is not None else topo_devices)
  return compile_on(
    config,
    name,
    chip,
    devices,
    platform,
    vocab_size=vocab_size,
    eval_step=eval_step,
    correct_loop=correct_loop,
  )


CUDNN_WHEEL = "nvidia-cudnn-cu12==9.28.0.42"  # requirements-gpu-compile.txt's pin


def lower_step(run, name: str):
  """`run`'s train step lowered; TargetError in one line where tracing needs a library this
  host lacks: cuDNN's attention (model.attention=cudnn) asks the cuDNN library for its
  version while tracing, even for a compile-only GPU ("cuDNN not found")."""
  try:
    return run.lower_step()
  except RuntimeError as e:
    if "cuDNN" not in str(e):
      raise
    first = str(e).splitlines()[0]
    raise TargetError(
      f"{name}: model.attention='cudnn' traces cuDNN's attention, which needs the cuDNN "
      f"library on this host ({first}): pip install --no-deps {CUDNN_WHEEL} "
      "(requirements-gpu-compile.txt), or model.attention=xla"
    ) from None


def compile_on(
  config: ConfigDict,
  name: str,
  chip: Chip,
  devices: Sequence,
  platform: str,
  *,
  vocab_size: int = 0,
  eval_step: bool = True,
  correct_loop: bool = True,
) -> Report:
  """`compile_for` on given devices: a topology's compile-only ones, or the chips this host
  has (scripts/bench_accelerator.py: the cost model's estimate of the program it times)."""
  from resnorm_jax.hardware import bench
  from resnorm_jax.train import run_setup

  devices = list(devices)
  vocab, note = resolve_vocab(config, vocab_size, platform)
  try:
    run = run_setup.build(config, devices, vocab_size=vocab, platform=platform)
  except ValueError as e:
    raise TargetError(f"{name}: {e}") from None
  train = compile_lowered(lower_step(run, name))
  cost, corrected, costs = dict(train.cost), False, [train.cost]
  layers = run.mcfg.num_layers
  scanned = run.mcfg.scan_unroll == 1
  if correct_loop and train.cost and not train.oom and layers >= 2 and scanned:
    unroll = correction_unroll(layers)
    twice = with_overrides(config, {"model.scan_unroll": unroll})
    run2 = run_setup.build(twice, devices, vocab_size=vocab, platform=platform)
    two = compile_lowered(run2.lower_step())
    if not two.oom:
      cost, corrected = loop_corrected(train.cost, two.cost, layers, unroll), True
      costs.append(two.cost)
  seconds, source = step_estimate(costs, cost, chip) if cost else (None, "")
  notes = [note] if note else []
  if run.mcfg.attention == "splash" and cost:
    # Measured (docs/tpu_compile/README.md, "A Mosaic kernel in the cost model"): the TPU
    # cost model counts a Pallas kernel's custom call as 0 FLOPs and 0 bytes.
    source += "; splash kernel not counted"
    notes.append(
      "the splash attention kernel is not in the cost model (a Mosaic custom call counts 0 "
      "FLOPs, 0 bytes): the FLOPs and the step estimate leave attention out"
    )
  evaluated = None
  if eval_step and not train.oom:
    evaluated = compile_lowered(run.eval_fn.lower(run.abstract, run.abstract_batch))
  t = config.train
  per_token = bench.flops_per_token(run.mcfg, t.seq_len)["train"]
  return Report(
    config_name=config.name,
    topology=name,
    chip=chip,
    chips=len(devices),
    mesh=dict(run.mesh.shape),
    remat=run.mcfg.remat,
    batch=(t.batch_size, t.seq_len),
    params=run.num_params,
    vocab_size=vocab,
    hbm_limit=memory_limit(chip, devices[0], platform),
    train=train,
    eval=evaluated,
    cost=cost,
    corrected=corrected,
    model_flops_per_step=per_token * t.batch_size * t.seq_len,
    seconds=seconds,
    seconds_source=source,
    scanned=run.mcfg.scan_unroll < layers,
    notes=notes,
  )


def candidates(config: ConfigDict, chips: int) -> list[tuple[str, dict[str, Any]]]:
  """What may make a config fit, in order: the next remat policies (the same run, more
  recompute), the whole slice as one fsdp axis (the same run, sharded state), then smaller
  global batches (fewer tokens per step: a different run)."""
  out: list[tuple[str, dict[str, Any]]] = []
  remat = config.model.remat
  for policy in REMAT_ORDER[REMAT_ORDER.index(remat) + 1 :] if remat in REMAT_ORDER else ():
    out.append((f"model.remat={policy}", {"model.remat": policy}))
  mesh = config.mesh
  if (int(mesh.data), int(mesh.fsdp), int(mesh.tensor)) not in ((1, -1, 1), (1, chips, 1)):
    fsdp = {"mesh.data": 1, "mesh.fsdp": -1, "mesh.tensor": 1}
    out.append(("mesh.data=1 mesh.fsdp=-1 (params, optimizer state sharded over all chips)", fsdp))
  base = {k: v for _, o in out for k, v in o.items()}  # the strongest of the above, then
  batch = config.train.batch_size
  for div in (2, 4, 8):
    if batch % div == 0 and (batch // div) % chips == 0:
      overrides = {**base, "train.batch_size": batch // div}
      label = " ".join(f"{k}={v}" for k, v in overrides.items())
      note = f"per-chip batch {batch // div // chips}: fewer tokens per step"
      out.append((f"{label} ({note})", overrides))
  return out


def find_fit(
  config: ConfigDict,
  topology: str,
  *,
  max_tries: int = 6,
  correct_loop: bool = False,
  compile_fn: Callable[..., Report] = compile_for,
  **kwargs,
) -> tuple[str, dict[str, Any], Report] | None:
  """The first of `candidates` that compiles within the chip's memory: (label, overrides,
  report), or None; each try is one compile (no eval step; the loop correction, where asked,
  only for the one that fits)."""
  _, name, devices, _ = target_devices(topology)
  for label, overrides in candidates(config, len(devices))[:max_tries]:
    c = with_overrides(config, overrides)
    report = compile_fn(c, name, eval_step=False, correct_loop=correct_loop, **kwargs)
    if report.fits:
      return label, overrides, report
  return None
