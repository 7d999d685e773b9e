"""A step timed on the chips this host has, beside the compiler's estimate of the same program
(scripts/bench_accelerator.py).

`measure` times the train step as the loop runs it (bench.benchmark: the loop's setup, step
pattern and data path) and gives its MFU against the chip's nominal dense bf16 peak: the
analytic model FLOPs per step (bench.flops_per_token x tokens) over step seconds x chips x
peak, the definition docs/tpu_compile/README.md gives the estimate. On a TPU it then compiles
the same run on the same chips once more with two layers per loop iteration and takes the TPU
compiler's cost model of both (target_compile.compile_on: loop-corrected, the splash kernel
named where the cost model leaves it out), so the measured and the estimated MFU are of one
program. A GPU's compiler gives no step time: no estimate there, and the output says so. On a
CPU there is no nominal peak: MFU is against the dense matmul rate measured in the same
process (bench.matmul_rate), and there is no estimate.
"""

from __future__ import annotations

import dataclasses

from ml_collections import ConfigDict

from resnorm_jax.hardware import gpu_target, target_compile, tpu_target
from resnorm_jax.hardware.target_report import ESTIMATE, Report
from resnorm_jax.hardware.tpu_target import Chip

NO_ESTIMATE = {
  "gpu": "no estimate: the GPU compiler's cost model gives no step time",
  "cpu": "no estimate: the step-time cost model is the TPU compiler's",
}


def local_chip(kind: str) -> Chip | None:
  """The Chip whose JAX device_kind is `kind` (the TPU generations of tpu_target.CHIPS, the
  GPUs of gpu_target.GPUS), or None (a CPU, or a chip without a nominal peak here)."""
  chips = [*tpu_target.CHIPS.values(), *(chip for _, chip in gpu_target.GPUS.values())]
  return next((c for c in chips if c.kind == kind), None)


@dataclasses.dataclass
class Estimate:
  """The cost model's step for the program that was timed, or why there is none."""

  seconds: float | None
  mfu: float | None
  source: str  # target_compile.step_estimate's, or NO_ESTIMATE's reason
  notes: list[str]


def estimate(config: ConfigDict, chip: Chip, devices, platform: str) -> Estimate:
  """The compiler's estimate of `config`'s train step on `devices` (loop-corrected), with
  `chip`'s peak and bandwidth for its roofline; `platform` as target_compile.compile_on."""
  r: Report = target_compile.compile_on(config, chip.name, chip, devices, platform, eval_step=False)
  return Estimate(r.step_seconds, r.mfu, r.seconds_source, list(r.notes))


def measure(config: ConfigDict, steps: int = 20, warmup: int = 3, with_estimate: bool = True):
  """bench.benchmark's result with `measured` (step seconds, tokens/s, MFU and what it is
  against) and `estimate` (an Estimate as a dict) added."""
  import jax

  from resnorm_jax.hardware import bench

  r = bench.benchmark(config, steps=steps, warmup=warmup, sync=False)
  if "skipped" in r:
    return r
  device = jax.devices()[0]
  chip = local_chip(device.device_kind)
  step_s = r["loop_step_s"]["median"]
  chips = jax.device_count()
  if chip is not None:  # the chips' nominal peak
    mfu = r["flops"]["per_step"] / (step_s * chips * chip.bf16_flops)
    against = f"{chip.bf16_flops / 1e12:.0f} TFLOP/s bf16 per chip, nominal ({chip.name})"
  else:  # bench's MFU: against the matmul rate measured in this process
    mm = r["matmul"]
    mfu = r["mfu"]
    against = f"{mm['best_flops_per_s'] / 1e9:.1f} GFLOP/s, the dense matmul rate measured here"
    against += f" ({mm['dtype']})"
  r["measured"] = {
    "step_s": step_s,
    "tokens_per_second": r["tokens_per_second"],
    "mfu": mfu,
    "mfu_against": against,
    "chips": chips,
  }
  platform = device.platform
  if platform != "tpu":
    est = Estimate(None, None, NO_ESTIMATE.get(platform, f"no estimate on {platform}"), [])
  elif chip is None:
    est = Estimate(None, None, f"no estimate: no nominal peak for {device.device_kind}", [])
  elif not with_estimate:
    est = Estimate(None, None, "no estimate: --noestimate", [])
  else:
    est = estimate(config, chip, jax.devices(), platform)
  r["estimate"] = dataclasses.asdict(est)
  return r


def table(r: dict) -> str:
  """bench.table's lines, then the measured step beside the estimate."""
  from resnorm_jax.hardware import bench

  lines = [bench.table(r)]
  if "measured" not in r:
    return lines[0]
  m, e = r["measured"], r["estimate"]
  lines.append(
    f"{'measured':<28}{m['step_s'] * 1e3:9.1f} ms/step  {m['tokens_per_second']:,.0f} tokens/s  "
    f"MFU {m['mfu']:.1%} of {m['mfu_against']}"
  )
  if e["seconds"]:
    lines.append(
      f"{'estimated (cost model)':<28}{e['seconds'] * 1e3:9.1f} ms/step  "
      f"MFU {e['mfu']:.1%}  ({e['source']}; {ESTIMATE})"
    )
    lines.append(f"{'measured / estimated':<28}{m['step_s'] / e['seconds']:9.2f}x step time")
  else:
    lines.append(f"{'estimated (cost model)':<28}{e['source']}")
  lines += [f"note: {n}" for n in e["notes"]]
  return "\n".join(lines)
