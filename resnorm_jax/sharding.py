"""Mesh, logical-to-mesh axis rules, state and batch shardings, multi-host init.

Weights carry logical axis names (model code); the config's rule table maps them to the
mesh axes (data, fsdp, tensor). Nothing else in the library knows about the mesh.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import optax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")
PyTree = Any


def mesh_shape(mesh_cfg, num_devices: int) -> tuple[int, int, int]:
  """Sizes of (data, fsdp, tensor); one axis may be -1 (the rest of the devices)."""
  sizes = [int(mesh_cfg.data), int(mesh_cfg.fsdp), int(mesh_cfg.tensor)]
  if sizes.count(-1) > 1:
    raise ValueError(
      f"mesh: at most one axis may be -1, got {dict(zip(MESH_AXES, sizes, strict=True))}"
    )
  for name, s in zip(MESH_AXES, sizes, strict=True):
    if s == 0 or s < -1:
      raise ValueError(f"mesh.{name}={s} must be a positive size or -1")
  known = int(np.prod([s for s in sizes if s != -1]))
  if -1 in sizes:
    if num_devices % known:
      raise ValueError(
        f"mesh {dict(zip(MESH_AXES, sizes, strict=True))}: {known} does not divide "
        f"the {num_devices} devices"
      )
    sizes[sizes.index(-1)] = num_devices // known
  if int(np.prod(sizes)) != num_devices:
    raise ValueError(
      f"mesh {dict(zip(MESH_AXES, sizes, strict=True))} needs {int(np.prod(sizes))} "
      f"devices, have {num_devices}"
    )
  return tuple(sizes)


def make_mesh(mesh_cfg, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """The (data, fsdp, tensor) mesh over all devices (or `devices`)."""
  devices = list(devices if devices is not None else jax.devices())
  shape = mesh_shape(mesh_cfg, len(devices))
  return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def logical_to_spec(names: tuple | None, rules: Sequence[tuple[str, Any]]) -> PartitionSpec:
  """Maps logical axis names to a PartitionSpec; unknown names stay replicated."""
  table = dict(rules)
  if names is None:
    return PartitionSpec()
  used: set[str] = set()
  out = []
  for name in names:
    axes = table.get(name) if name is not None else None
    axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
    axes = tuple(a for a in axes if a not in used)  # a mesh axis shards one dim at most
    used.update(axes)
    out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return PartitionSpec(*out)


def _fit(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh) -> PartitionSpec:
  """Drops the mesh axes of any dimension they do not divide (e.g. a 64-row table / 3)."""
  out = []
  for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)), strict=True):
    names = (axes,) if isinstance(axes, str) else tuple(axes or ())
    size = int(np.prod([mesh.shape[a] for a in names])) if names else 1
    out.append(axes if dim % size == 0 else None)
  return PartitionSpec(*out)


def param_shardings(specs: PyTree, shapes: PyTree, mesh: Mesh, rules) -> PyTree:
  """NamedSharding per leaf from logical names (`specs`, tuples) and the rule table."""
  return jax.tree.map(
    lambda names, x: NamedSharding(mesh, _fit(logical_to_spec(names, rules), x.shape, mesh)),
    specs,
    shapes,
    is_leaf=lambda x: isinstance(x, tuple),
  )


def state_shardings(
  abstract_state, model_def, optimizer: optax.GradientTransformation, mesh: Mesh, rules
):
  """Shardings of a TrainState: params by rule, optimizer moments like their params."""
  replicated = NamedSharding(mesh, PartitionSpec())
  params = param_shardings(model_def.param_specs, abstract_state.params, mesh, rules)
  model_state = param_shardings(
    model_def.model_state_specs, abstract_state.model_state, mesh, rules
  )
  opt_state = optax.tree_map_params(
    optimizer,
    lambda _, s: s,
    abstract_state.opt_state,
    params,
    transform_non_params=lambda _: replicated,
  )
  return abstract_state.replace(
    step=replicated, params=params, opt_state=opt_state, model_state=model_state
  )


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Rows over the data-parallel axes (data and fsdp), time replicated."""
  return NamedSharding(mesh, PartitionSpec(("data", "fsdp"), None))


def global_batch(local: np.ndarray, sharding: NamedSharding) -> jax.Array:
  """This process's rows -> one global array (each host passes only its own rows)."""
  return jax.make_array_from_process_local_data(sharding, local)


def maybe_initialize_distributed(dist_cfg) -> bool:
  """Calls jax.distributed.initialize() when asked or when a cluster environment says so."""
  mode = str(dist_cfg.initialize).lower()
  if mode not in ("auto", "true", "false"):
    raise ValueError(f"dist.initialize={mode!r} is not valid; valid values: auto, true, false")
  env_markers = (
    "JAX_COORDINATOR_ADDRESS",
    "SLURM_NTASKS",
    "TPU_WORKER_HOSTNAMES",
    "MEGASCALE_COORDINATOR_ADDRESS",
  )
  multi = dist_cfg.coordinator_address or dist_cfg.num_processes > 1
  if mode == "false" or (mode == "auto" and not multi and not _cluster_env(env_markers)):
    return False
  kwargs = {}
  if dist_cfg.coordinator_address:
    kwargs["coordinator_address"] = dist_cfg.coordinator_address
  if dist_cfg.num_processes > 0:
    kwargs["num_processes"] = dist_cfg.num_processes
  if dist_cfg.process_id >= 0:
    kwargs["process_id"] = dist_cfg.process_id
  jax.distributed.initialize(**kwargs)
  return True


def _cluster_env(markers: Sequence[str]) -> bool:
  if os.environ.get("SLURM_NTASKS") not in (None, "", "1"):
    return True
  return any(os.environ.get(m) for m in markers if m != "SLURM_NTASKS")
