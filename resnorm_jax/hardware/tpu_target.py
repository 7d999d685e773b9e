"""TPU slices as compile-only targets: the chips, their topology names, their devices.

`jax.experimental.topologies` asks libtpu's compiler for the devices of a TPU topology
("v5e:4x4", or a Cloud accelerator type such as "v5litepod-16") without any TPU; a run built
on them compiles for that slice (target_compile.py). `hbm_limit` reads the HBM the compiler
lets a program use from its refusal of one far too large.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from collections.abc import Sequence

GIB = 2**30


class TargetError(ValueError):
  """Bad input for a target compile: an unknown topology, no compiler for it, a mesh that
  does not fit."""


@dataclasses.dataclass(frozen=True)
class Chip:
  """An accelerator (a TPU generation, or a GPU: gpu_target.py): its name in target specs,
  JAX's device_kind, nominal memory and bf16 peak."""

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


def accelerator_type(chip: Chip, name: str) -> str:
  """The Cloud accelerator type of a topology name: 'v5e:2x2' -> 'v5litepod-4', 'v5p:2x2x2'
  -> 'v5p-16' (v4 and v5p types count TensorCores)."""
  chips = _prod([int(side) for side in name.split(":")[1].split("x")])
  return f"{chip.accelerator}-{chips * chip.cores_per_chip}"


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
  # Off a TPU VM, libtpu asks the cloud metadata for this host's accelerator type and worker
  # hostnames and, finding none, prints "Failed to find host bounds", "WARNING: could not
  # determine TPU accelerator type" and "E0000 ... unexpected worker hostname" before it
  # compiles correctly anyway: told the target's type and one local worker, it says nothing.
  # The values do not change what it compiles (the topology is given), and a TPU VM's own
  # settings are kept. Set only while libtpu reads them: TPU_WORKER_HOSTNAMES left in the
  # environment would tell every later process this one starts (a training run) that it is
  # on a TPU cluster (train/sharding.py's _CLUSTER_ENV).
  told = {"TPU_ACCELERATOR_TYPE": accelerator_type(chip, name), "TPU_WORKER_HOSTNAMES": "localhost"}
  import jax
  from jax.experimental import topologies

  def get(**kwargs) -> list:
    added = [k for k in told if k not in os.environ]
    os.environ.update({k: told[k] for k in added})
    try:
      return list(topologies.get_topology_desc(name, "tpu", **kwargs).devices)
    except jax.errors.JaxRuntimeError as e:
      raise TargetError(f"topology {name!r}: {str(e).splitlines()[0]}") from None
    finally:
      for k in added:
        os.environ.pop(k, None)

  devices = get()
  if any(getattr(d, "core_on_chip", 0) for d in devices):
    devices = get(chip_config_name="megacore")
  return chip, name, devices


_HBM = re.compile(r"available HBM \(([0-9.]+)([KMGT])\)")
HLO_TEMPS = re.compile(r"HLO temporaries \(([0-9.]+)([KMGT])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def bytes_in(pattern: re.Pattern, message: str) -> int | None:
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
    return bytes_in(_HBM, str(e))
  return None
