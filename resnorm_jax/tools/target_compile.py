"""A run compiled for a TPU slice this host does not have: memory, fit and cost estimates.

Deviceless ahead-of-time compilation: `jax.experimental.topologies` asks libtpu's compiler
for the devices of a TPU topology ("v5e:4x4") without any TPU, `run_setup.build` builds the
run on them exactly as the loop does (same mesh rules, remat, dtype, shardings), and the
TPU compiler compiles the train and eval steps. What comes back is the compiler's own:
per-chip memory (an oversize program is refused with RESOURCE_EXHAUSTED, as on the chip)
and its cost model (FLOPs, `optimal_seconds`).

The cost model counts a `while` loop's body once, not once per iteration, so the scanned
layer stack's cost is that of one layer whatever the depth. `loop_corrected` compiles the
step a second time with two layers per loop iteration (model.scan_unroll=2): the difference
is one layer's cost, and outside + L x layer is the step's (docs/tpu_compile/README.md
checks it against the same stack compiled without a loop). Every time, rate and MFU
derived from it is the TPU compiler's cost-model estimate, not a measurement.

The compiled FLOPs (all chips) over the analytic model FLOPs (`Report.flops_ratio`) says
whether the partitioned program does the model's work once: full remat's recompute and the
elementwise ops the cost model also counts put a well-partitioned step at 1.0-1.5; above
FLOPS_RATIO_LIMIT the chips repeat work (measured: the fsdp :paper configs compute every
layer's attention on the whole global batch on every chip), and the output and results.csv
say so."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from ml_collections import ConfigDict

GIB = 2**30
ESTIMATE = "TPU compiler cost-model estimate, not a measurement"
GPT2_VOCAB = 50304  # GPT-2's 50,257 ids padded to a multiple of 128 (the :paper data)
REMAT_ORDER = ("none", "dots", "dots_no_batch", "full")  # most memory first
# Compiled FLOPs (all chips, loop-corrected) over the analytic model FLOPs above which the
# estimate is flagged: full remat recomputes the forward pass (4/3 of the analytic 6N) and
# the cost model also counts norms, softmax and the optimizer; a step whose chips each do
# their share measured 1.3 (docs/tpu_compile/README.md). Above 2, work is repeated on
# several chips, and the time, tokens/s and MFU estimate that program, not the model's.
FLOPS_RATIO_LIMIT = 2.0


class TargetError(ValueError):
  """Bad input for a target compile: an unknown topology, no libtpu, a mesh that does not fit."""


@dataclasses.dataclass(frozen=True)
class Chip:
  """A TPU generation: its name in topologies, JAX's device_kind, nominal HBM and bf16 peak."""

  name: str  # v5e: the prefix of a topology name (v5e:4x4)
  kind: str  # jax Device.device_kind
  hbm_bytes: int  # nominal, per chip; the compiler's usable limit is probed (hbm_limit)
  bf16_flops: float  # dense bf16 peak per chip (Cloud TPU documentation)
  hbm_bandwidth: float  # bytes/s per chip (Cloud TPU documentation)
  dims: int  # 2: a 2D torus (v5e, v6e); 3: 3D (v4, v5p)
  accelerator: str  # prefix of the Cloud accelerator type (v5litepod-16)
  cores_per_chip: int  # the accelerator type counts TensorCores (v4-8, v5p-8 are 4 chips)


CHIPS = {
  c.name: c
  for c in (
    Chip("v4", "TPU v4", 32 * GIB, 275e12, 1228e9, 3, "v4", 2),
    Chip("v5e", "TPU v5 lite", 16 * GIB, 197e12, 819e9, 2, "v5litepod", 1),
    Chip("v5p", "TPU v5", 95 * GIB, 459e12, 2765e9, 3, "v5p", 2),
    Chip("v6e", "TPU v6 lite", 32 * GIB, 918e12, 1640e9, 2, "v6e", 1),
  )
}
_TOPOLOGY = re.compile(r"^(v[0-9a-z]+):([0-9]+(?:x[0-9]+){1,2})$")
_ACCELERATOR = re.compile(r"^(v[0-9a-z]+)-([0-9]+)$")


def _grow(dims: list[int], n: int) -> str:
  """A chip count's slice shape as Cloud TPU names it: double the last of the smallest sides."""
  while dims and int(_prod(dims)) < n:
    small = min(dims)
    i = len(dims) - 1 - dims[::-1].index(small)
    dims[i] *= 2
  return "x".join(map(str, dims))


def _prod(xs: Sequence[int]) -> int:
  out = 1
  for x in xs:
    out *= x
  return out


def topology_name(spec: str) -> tuple[Chip, str]:
  """(chip, libtpu topology name) of 'v5e:4x4' or a Cloud accelerator type ('v5litepod-16',
  'v5p-8': 4 chips, 'v4-32': 16 chips, 'v6e-16'); TargetError naming the valid forms."""
  valid = ", ".join(CHIPS)
  m = _TOPOLOGY.match(spec)
  if m:
    chip = CHIPS.get(m.group(1))
    if chip is None:
      raise TargetError(f"topology {spec!r}: unknown TPU {m.group(1)!r}; known: {valid}")
    sides = m.group(2).split("x")
    if len(sides) != chip.dims and not (len(sides) == 3 and sides[2] == "1"):
      raise TargetError(f"topology {spec!r}: a {chip.name} slice has {chip.dims} sides")
    return chip, spec
  m = _ACCELERATOR.match(spec)
  if m:
    prefix, count = m.group(1), int(m.group(2))
    by_type = {c.accelerator: c for c in CHIPS.values()} | {"v5e": CHIPS["v5e"]}
    chip = by_type.get(prefix)
    if chip is None:
      raise TargetError(f"accelerator type {spec!r}: unknown TPU {prefix!r}")
    chips = count // chip.cores_per_chip
    if count % chip.cores_per_chip or chips < 1 or chips & (chips - 1):
      raise TargetError(f"accelerator type {spec!r}: not a slice size (a power of 2)")
    if chips < 4:
      return chip, f"{chip.name}:" + "x".join(["1", str(chips)] + ["1"] * (chip.dims - 2))
    return chip, f"{chip.name}:" + _grow([2, 2, 1] if chip.dims == 3 else [2, 2], chips)
  raise TargetError(
    f"topology {spec!r} is not NAME:AxB[xC] (v5e:4x4, v5p:2x2x2, v4:2x2x4, v6e:4x4) or an "
    f"accelerator type (v5litepod-16, v5p-8, v4-32, v6e-16); TPUs: {valid}"
  )


def require_libtpu() -> None:
  """TargetError unless libtpu (the TPU compiler) is importable."""
  if importlib.util.find_spec("libtpu") is None:
    raise TargetError(
      "libtpu is not installed (the TPU compiler): pip install libtpu==0.0.42.1 "
      "(requirements-dev.txt, requirements-tpu.txt)"
    )


def topology_devices(spec: str) -> tuple[Chip, str, list]:
  """(chip, topology name, compile-only devices): one device per chip.

  v4 (and v5p) chips hold two TensorCores; libtpu's default chip config for v4 gives one
  device per core, which jax.make_mesh refuses ("Creating meshes for TPU >v3 requires one
  device per chip"); the "megacore" config, what a v4 or v5p slice runs by default, gives
  one device per chip.
  """
  chip, name = topology_name(spec)
  require_libtpu()
  # With libtpu installed, every JAX process that may use a TPU takes /tmp/libtpu_lockfile;
  # compiling for a topology uses no TPU, so it need not wait for that lock.
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  import jax
  from jax.experimental import topologies

  def get(**kwargs) -> list:
    try:
      return list(topologies.get_topology_desc(name, "tpu", **kwargs).devices)
    except jax.errors.JaxRuntimeError as e:
      raise TargetError(f"topology {name!r}: {str(e).splitlines()[0]}") from None

  devices = get()
  if any(getattr(d, "core_on_chip", 0) for d in devices):
    devices = get(chip_config_name="megacore")
  return chip, name, devices


_HBM = re.compile(r"available HBM \(([0-9.]+)([KMGT])\)")
_TEMPS = re.compile(r"HLO temporaries \(([0-9.]+)([KMGT])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _bytes_in(pattern: re.Pattern, message: str) -> int | None:
  m = pattern.search(message)
  return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def hbm_limit(device) -> int | None:
  """The HBM the TPU compiler lets a program use on `device` (bytes): from its refusal of a
  program that needs far more (e.g. 15.75 GiB of a v5e's 16); None if it gives no number."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import Mesh, NamedSharding, PartitionSpec

  one = NamedSharding(Mesh(np.array([device]), ("x",)), PartitionSpec())
  x = jax.ShapeDtypeStruct((1 << 19,), jnp.float32, sharding=one)  # outer: 1 TiB
  try:
    jax.jit(jnp.outer, in_shardings=(one, one), out_shardings=one).lower(x, x).compile()
  except jax.errors.JaxRuntimeError as e:
    return _bytes_in(_HBM, str(e))
  return None


@dataclasses.dataclass
class Compiled:
  """One step compiled for the target: per-chip memory or the compiler's refusal, its cost."""

  memory: dict[str, int]  # run_setup.aot_memory; {} when refused
  oom: str  # the compiler's RESOURCE_EXHAUSTED message ('' when it compiled)
  cost: dict[str, float]  # cost_analysis: flops, optimal_seconds, ... (per chip)
  seconds: float  # wall-clock compile time
  cpu_seconds: float  # this process's CPU time while compiling (less noisy on a shared host)


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


def loop_corrected(one: dict[str, float], two: dict[str, float], layers: int) -> dict[str, float]:
  """The step's cost from the compiler's cost of the step at 1 and 2 layers per iteration of
  the scanned stack (each counts the loop body once): layer = two - one, outside = one -
  layer, step = outside + layers x layer = one + (layers - 1) x (two - one)."""
  return {k: one[k] + (layers - 1) * (two[k] - one[k]) for k in one if k in two}


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


def resolve_vocab(config: ConfigDict, vocab_size: int = 0) -> tuple[int, str]:
  """(vocabulary, note): `vocab_size` if given, else the run's (model.vocab_size or its data);
  a :paper config whose token folder is not on this host compiles at GPT-2's padded 50,304."""
  from resnorm_jax.train import run_setup

  if vocab_size:
    return vocab_size, ""
  try:
    return run_setup.model_config(config).vocab_size, ""
  except ValueError:
    if config.model.vocab_size:
      raise
  return GPT2_VOCAB, f"vocabulary {GPT2_VOCAB:,} (GPT-2, padded): no data folder here"


@dataclasses.dataclass
class Report:
  """What a target compile found; every cost-derived field is an estimate (ESTIMATE)."""

  config_name: str
  topology: str
  chip: Chip
  chips: int
  mesh: dict[str, int]
  remat: str
  batch: tuple[int, int]  # global (sequences, tokens per sequence)
  params: int
  vocab_size: int
  hbm_limit: int  # bytes the compiler allows per chip
  train: Compiled
  eval: Compiled | None
  cost: dict[str, float]  # per chip, loop-corrected where `corrected`
  corrected: bool
  model_flops_per_step: float  # analytic (bench.flops_per_token x tokens), all chips
  seconds: float | None = None  # step_estimate's, per step
  scanned: bool = True  # the stack compiled as a loop (model.scan_unroll < num_layers)
  seconds_source: str = ""
  notes: list[str] = dataclasses.field(default_factory=list)

  @property
  def fits(self) -> bool:
    total = self.train.memory.get("total")
    return not self.train.oom and total is not None and total <= self.hbm_limit

  @property
  def per_chip_bytes(self) -> int | None:
    """The train step's total per chip, or the temporaries the compiler refused."""
    return self.train.memory.get("total") or _bytes_in(_TEMPS, self.train.oom)

  @property
  def step_seconds(self) -> float | None:
    return self.seconds if self.fits else None

  @property
  def tokens_per_second(self) -> float | None:
    s = self.step_seconds
    return self.batch[0] * self.batch[1] / s if s else None

  @property
  def mfu(self) -> float | None:
    s = self.step_seconds
    return self.model_flops_per_step / (s * self.chips * self.chip.bf16_flops) if s else None

  @property
  def flops_ratio(self) -> float | None:
    """The compiler's FLOPs per step (all chips, loop-corrected) over the analytic model
    FLOPs; None without a cost (refused, or no loop correction on a scanned stack)."""
    if not (self.fits and self.cost.get("flops") and self.model_flops_per_step > 0):
      return None
    if not self.corrected and self.scanned:
      return None  # the loop body counted once: not the step's FLOPs
    return self.cost["flops"] * self.chips / self.model_flops_per_step

  @property
  def flops_warning(self) -> str:
    """'' or why the cost estimate is not the model's (flops_ratio > FLOPS_RATIO_LIMIT)."""
    r = self.flops_ratio
    if r is None or r <= FLOPS_RATIO_LIMIT:
      return ""
    return (
      f"the compiled step does {r:.1f}x the analytic model FLOPs (over "
      f"{FLOPS_RATIO_LIMIT:g}x: remat and elementwise ops account for under 1.5x): the "
      "partitioned program repeats work on several chips (e.g. activations replicated over "
      "the batch instead of sharded); its time, tokens/s and MFU estimate that program"
    )


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

  TargetError (a ValueError) for a bad topology, no libtpu, or a mesh or batch the slice
  cannot hold, before anything compiles. `devices` overrides the topology's (tests)."""
  from resnorm_jax.tools import bench
  from resnorm_jax.train import run_setup

  chip, name, topo_devices = topology_devices(topology)
  devices = list(devices if devices is not None else topo_devices)
  vocab, note = resolve_vocab(config, vocab_size)
  try:
    run = run_setup.build(config, devices, vocab_size=vocab, platform="tpu")
  except ValueError as e:
    raise TargetError(f"{name}: {e}") from None
  train = compile_lowered(run.lower_step())
  cost, corrected, costs = dict(train.cost), False, [train.cost]
  layers = run.mcfg.num_layers
  if correct_loop and not train.oom and layers >= 2 and run.mcfg.scan_unroll == 1:
    twice = with_overrides(config, {"model.scan_unroll": 2})
    run2 = run_setup.build(twice, devices, vocab_size=vocab, platform="tpu")
    two = compile_lowered(run2.lower_step())
    if not two.oom:
      cost, corrected = loop_corrected(train.cost, two.cost, layers), True
      costs.append(two.cost)
  seconds, source = step_estimate(costs, cost, chip) if cost else (None, "")
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
    hbm_limit=hbm_limit(devices[0]) or chip.hbm_bytes,
    train=train,
    eval=evaluated,
    cost=cost,
    corrected=corrected,
    model_flops_per_step=per_token * t.batch_size * t.seq_len,
    seconds=seconds,
    seconds_source=source,
    scanned=run.mcfg.scan_unroll < layers,
    notes=[note] if note else [],
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
  _, name, devices = topology_devices(topology)
  for label, overrides in candidates(config, len(devices))[:max_tries]:
    c = with_overrides(config, overrides)
    report = compile_fn(c, name, eval_step=False, correct_loop=correct_loop, **kwargs)
    if report.fits:
      return label, overrides, report
  return None


def size(n: float | None) -> str:
  if n is None:
    return "-"
  return f"{n / GIB:.2f} GiB" if abs(n) >= GIB / 10 else f"{n / 2**20:.2f} MiB"


def describe(r: Report) -> list[str]:
  """The report as the lines compile_for prints."""
  lines = [
    f"{r.config_name} on {r.topology}: {r.chips} x {r.chip.kind} ({r.chip.name}), "
    f"{r.params:,} params, vocab {r.vocab_size:,}",
    f"mesh {r.mesh}, remat {r.remat}, batch {r.batch[0]} x {r.batch[1]} "
    f"({r.batch[0] // max(1, r.chips)} sequences per chip)",
    *[f"note: {n}" for n in r.notes],
  ]
  m = r.train.memory
  if m:
    lines.append(
      f"per chip: arguments {size(m['argument'])}, temporaries {size(m['temp'])}, total "
      f"{size(m['total'])} of {size(r.hbm_limit)} HBM (margin {size(r.hbm_limit - m['total'])})"
    )
  else:
    lines.append(f"per chip: refused by the TPU compiler: {r.train.oom}")
  verdict = "FITS" if r.fits else "DOES NOT FIT"
  lines.append(f"{verdict} on {r.topology}")
  lines.append(
    f"compile: train step {r.train.seconds:.1f} s wall ({r.train.cpu_seconds:.1f} s CPU)"
    + (f", eval step {r.eval.seconds:.1f} s" if r.eval else "")
  )
  if r.eval and r.eval.memory:
    lines.append(f"eval step per chip: total {size(r.eval.memory['total'])}")
  if r.fits and r.cost:
    how = "loop-corrected: outside + L x one layer" if r.corrected else "no loop correction"
    lines += [
      f"{ESTIMATE} ({how}):",
      f"  FLOPs per step {r.cost['flops'] * r.chips:.3e} (all chips; analytic model FLOPs "
      f"{r.model_flops_per_step:.3e})",
      f"  step {r.step_seconds * 1e3:.4g} ms ({r.seconds_source}), "
      f"{r.tokens_per_second:,.0f} tokens/s, MFU "
      f"{r.mfu:.1%} of {r.chip.bf16_flops / 1e12:.0f} TFLOP/s bf16 per chip",
    ]
    if r.flops_ratio is not None:
      lines.append(f"  compiled / analytic FLOPs {r.flops_ratio:.2f}")
    if r.flops_warning:
      lines.append(f"WARNING: {r.flops_warning}")
  return lines


CSV_FIELDS = (
  "config",
  "topology",
  "chips",
  "mesh",
  "remat",
  "batch",
  "per_chip_gib",
  "hbm_gib",
  "fits",
  "compile_s",
  "compile_cpu_s",
  "flops_per_step",
  "bytes_per_step",
  "model_flops_per_step",
  "flops_ratio",
  "est_step_s",
  "est_step_source",
  "est_tokens_per_s",
  "est_mfu",
)


def csv_row(r: Report, config_label: str) -> dict[str, str]:
  """One row of docs/tpu_compile/results.csv (est_*: the cost model's, loop-corrected;
  flops_ratio: compiled over analytic FLOPs, flagged above FLOPS_RATIO_LIMIT)."""
  per_chip = r.per_chip_bytes
  return {
    "config": config_label,
    "topology": r.topology,
    "chips": str(r.chips),
    "mesh": "x".join(f"{k}{v}" for k, v in r.mesh.items() if v > 1) or "1",
    "remat": r.remat,
    "batch": f"{r.batch[0]}x{r.batch[1]}",
    "per_chip_gib": f"{per_chip / GIB:.2f}" if per_chip else "",
    "hbm_gib": f"{r.hbm_limit / GIB:.2f}",
    "fits": "yes" if r.fits else "no",
    "compile_s": f"{r.train.seconds:.1f}",
    "compile_cpu_s": f"{r.train.cpu_seconds:.1f}",
    "flops_per_step": f"{r.cost['flops'] * r.chips:.4g}" if r.fits and r.cost else "",
    "bytes_per_step": f"{r.cost.get('bytes accessed', 0) * r.chips:.4g}" if r.fits else "",
    "model_flops_per_step": f"{r.model_flops_per_step:.4g}",
    "flops_ratio": f"{r.flops_ratio:.2f}" if r.flops_ratio is not None else "",
    "est_step_source": r.seconds_source if r.fits else "",
    "est_step_s": f"{r.step_seconds:.4g}" if r.step_seconds else "",
    "est_tokens_per_s": f"{r.tokens_per_second:.4g}" if r.step_seconds else "",
    "est_mfu": f"{r.mfu:.3f}" if r.step_seconds else "",
  }
