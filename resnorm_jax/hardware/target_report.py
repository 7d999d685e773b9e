"""What a target compile found, as printed lines and as a row of docs/tpu_compile's tables.

`Compiled` is one step compiled for the target (per-device memory, or the compiler's
refusal, and its cost model); `Report` is the run on the target: fits or not, and every
time, rate and MFU derived from the cost model, each an estimate (ESTIMATE), not a
measurement. The GPU compiler gives no cost model: a GPU report is memory only.

The compiled FLOPs (all chips) over the analytic model FLOPs (`Report.flops_ratio`) says
whether the partitioned program does the model's work once: full remat's recompute and the
elementwise ops the cost model also counts put a well-partitioned step at 1.0-1.5; above
FLOPS_RATIO_LIMIT the chips repeat work (measured: the fsdp :paper configs compute every
layer's attention on the whole global batch on every chip), and the output and results.csv
say so.
"""

from __future__ import annotations

import dataclasses

from resnorm_jax.hardware.tpu_target import GIB, HLO_TEMPS, Chip, bytes_in

ESTIMATE = "TPU compiler cost-model estimate, not a measurement"
# Compiled FLOPs (all chips, loop-corrected) over the analytic model FLOPs above which the
# estimate is flagged: full remat recomputes the forward pass (4/3 of the analytic 6N) and
# the cost model also counts norms, softmax and the optimizer; a step whose chips each do
# their share measured 1.3 (docs/tpu_compile/README.md). Above 2, work is repeated on
# several chips, and the time, tokens/s and MFU estimate that program, not the model's.
FLOPS_RATIO_LIMIT = 2.0
# Below 1 the cost model counted less work than the model does: a loop inside the layer whose
# body it counted once, such as the windowed einsums XLA makes of fsdp's projections (seen:
# 0.78 for Post-LN 96 :paper on v5e:4x4, docs/tpu_compile/README.md). Not checked with the
# splash kernel, whose attention the cost model counts as 0.
FLOPS_RATIO_FLOOR = 1.0


@dataclasses.dataclass
class Compiled:
  """One step compiled for the target: per-chip memory or the compiler's refusal, its cost."""

  memory: dict[str, int]  # run_setup.aot_memory; {} when refused
  oom: str  # the compiler's RESOURCE_EXHAUSTED message ('' when it compiled)
  cost: dict[str, float]  # cost_analysis: flops, optimal_seconds, ... (per chip)
  seconds: float  # wall-clock compile time
  cpu_seconds: float  # this process's CPU time while compiling (less noisy on a shared host)


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
    return self.train.memory.get("total") or bytes_in(HLO_TEMPS, self.train.oom)

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
    """'' or why the cost estimate is not the model's (flops_ratio above FLOPS_RATIO_LIMIT,
    or below FLOPS_RATIO_FLOOR without the splash kernel)."""
    r = self.flops_ratio
    splash = any("splash" in n for n in self.notes)
    if r is not None and r < FLOPS_RATIO_FLOOR and not splash:
      return (
        f"the compiled step counts {r:.2f}x the analytic model FLOPs (under "
        f"{FLOPS_RATIO_FLOOR:g}x): the cost model counted a loop inside the layer once, such "
        "as the windowed einsums XLA makes of fsdp's projections (scripts/hlo_bytes.py lists "
        "them; compile_for --tune's no_windowed flags remove them); its time, tokens/s and "
        "MFU estimate less work than the step does"
      )
    if r is None or r <= FLOPS_RATIO_LIMIT:
      return ""
    return (
      f"the compiled step does {r:.1f}x the analytic model FLOPs (over "
      f"{FLOPS_RATIO_LIMIT:g}x: remat and elementwise ops account for under 1.5x): the "
      "partitioned program repeats work on several chips (e.g. activations replicated over "
      "the batch instead of sharded); its time, tokens/s and MFU estimate that program"
    )


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
    "bytes_per_step": f"{r.cost.get('bytes accessed', 0) * r.chips:.4g}"
    if r.fits and r.cost
    else "",
    "model_flops_per_step": f"{r.model_flops_per_step:.4g}",
    "flops_ratio": f"{r.flops_ratio:.2f}" if r.flops_ratio is not None else "",
    "est_step_source": r.seconds_source if r.fits else "",
    "est_step_s": f"{r.step_seconds:.4g}" if r.step_seconds else "",
    "est_tokens_per_s": f"{r.tokens_per_second:.4g}" if r.step_seconds else "",
    "est_mfu": f"{r.mfu:.3f}" if r.step_seconds else "",
  }
