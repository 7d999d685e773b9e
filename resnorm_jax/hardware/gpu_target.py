"""NVIDIA GPUs as compile-only targets: the devices of N H100s on a host that has none.

The CUDA PJRT plugin (`jax-cuda12-pjrt`, requirements-gpu.txt) builds a topology of GPUs
from a target description instead of asking the local driver: given `target_config` (a
`GpuTargetConfigProto` as text) and `topology="SLICESxHOSTSxGPUS"`,
`jax.experimental.topologies.get_topology_desc(name, "cuda", ...)` returns compile-only
devices, and `run_setup.build(..., platform="gpu")` compiles the train step for them with a
memory analysis per GPU. The XLA GPU compiler gives no cost model here (cost_analysis() is
None) and does not refuse an oversize program at compile time: the verdict is the memory
analysis against what JAX lets a process allocate on the GPU (its default preallocation,
XLA_PYTHON_CLIENT_MEM_FRACTION of the memory, 0.75 unless set; `usable_bytes`).

The description is H100 SXM's as XLA keeps it (openxla/xla,
xla/backends/gpu/target_config/specs/h100_sxm.txtpb), cut to the fields the pinned plugin
reads (its newer rate tables and feature extension are not in jaxlib 0.10.2's proto).
"""

from __future__ import annotations

import importlib.util
import os
import re

from resnorm_jax.hardware.tpu_target import Chip, TargetError

# H100 SXM5 80 GB: 132 SMs, 1.98 GHz boost, 3.35 TB/s HBM3, 50 MB L2, compute capability 9.0.
H100_SXM = """\
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 84942979072
  shared_memory_per_block_optin: 232448
  cuda_compute_capability {
    major: 9
  }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info {
  major: 9
  minor: 8
}
device_description_str: "NVIDIA H100 80GB HBM3"
"""
# name -> (target description, the GPU: memory in bytes, dense bf16 peak FLOP/s, HBM bytes/s)
GPUS = {
  "h100": (
    H100_SXM,
    Chip("h100", "NVIDIA H100 80GB HBM3", 84942979072, 989e12, 3.35e12, 0, "h100", 1),
  )
}
GPUS_PER_HOST = 8
DEFAULT_MEM_FRACTION = 0.75  # JAX's default GPU preallocation
_SPEC = re.compile(r"^(h100):([0-9]+)$")


def is_gpu(spec: str) -> bool:
  """Whether `spec` names GPUs ('h100:8') rather than a TPU slice."""
  return spec.split(":")[0] in GPUS


def topology(spec: str) -> tuple[str, int, str]:
  """(gpu name, count, the plugin's 'SLICESxHOSTSxGPUS') of 'h100:N': up to 8 GPUs on one
  host, more as hosts of 8. TargetError (a ValueError) naming the valid forms."""
  m = _SPEC.match(spec)
  n = int(m.group(2)) if m else 0
  if not m or n < 1 or (n > GPUS_PER_HOST and n % GPUS_PER_HOST):
    raise TargetError(
      f"GPU target {spec!r} is not NAME:N with N in 1..{GPUS_PER_HOST} or a multiple of "
      f"{GPUS_PER_HOST} (hosts of {GPUS_PER_HOST}); GPUs: {', '.join(GPUS)}"
    )
  hosts = max(1, n // GPUS_PER_HOST)
  return m.group(1), n, f"1x{hosts}x{n // hosts}"


def usable_bytes(name: str) -> int:
  """What one process may allocate on the GPU: XLA_PYTHON_CLIENT_MEM_FRACTION of its memory
  (JAX's default preallocation, 0.75 unless the variable is set)."""
  fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", DEFAULT_MEM_FRACTION))
  return int(GPUS[name][1].hbm_bytes * fraction)


def plugin_installed() -> bool:
  """Whether the CUDA PJRT plugin (the GPU compiler) is importable."""
  return (
    importlib.util.find_spec("jax_plugins") is not None
    and importlib.util.find_spec("jax_plugins.xla_cuda12") is not None
  )


def require_plugin() -> None:
  """TargetError (a ValueError) unless the CUDA PJRT plugin is importable."""
  if not plugin_installed():
    raise TargetError(
      "the CUDA PJRT plugin is not installed (the GPU compiler): to compile without a GPU, "
      "pip install -r requirements-gpu-compile.txt (the plugin, ptxas and libdevice; "
      "or pip install -e '.[gpu-compile]'); on a GPU host, requirements-gpu.txt"
    )


def chip_devices(spec: str) -> tuple[Chip, list]:
  """(the GPU, the compile-only devices) of `spec` ('h100:8'); TargetError for a bad spec, no
  plugin, or a topology the plugin refuses."""
  name, _, shape = topology(spec)
  require_plugin()
  import jax
  from jax.experimental import topologies

  try:
    desc = topologies.get_topology_desc(name, "cuda", topology=shape, target_config=GPUS[name][0])
  except jax.errors.JaxRuntimeError as e:
    raise TargetError(f"GPU target {spec!r}: {str(e).splitlines()[0]}") from None
  return GPUS[name][1], list(desc.devices)
