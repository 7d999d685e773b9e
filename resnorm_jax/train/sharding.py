"""Mesh, logical-to-mesh axis rules, state and batch shardings, multi-host init.

Weights carry logical axis names (model code); the config's rule table maps them to the
mesh axes (data, fsdp, tensor). Nothing else in the library knows about the mesh.

Multi-host: every process runs the same program over the global mesh; each one builds only
the batch rows its own devices hold (`global_batch` checks that they are the block the data
pipeline gave it), and only process 0 writes files other than checkpoints.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import optax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from resnorm_jax.model import stream_sharding

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
  axis_types = (AxisType.Auto,) * 3
  coords = [tuple(getattr(d, "coords", ())) for d in devices]
  if all(coords) and len(set(coords)) < len(coords):
    # Several devices per chip (a TPU v4's two cores, libtpu's default chip config): the
    # topology-aware order of jax.make_mesh refuses them ("requires one device per chip");
    # the given order keeps a chip's cores adjacent, on the innermost axes.
    return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=axis_types)
  return jax.make_mesh(shape, MESH_AXES, axis_types=axis_types, devices=devices)


def _mesh_axes(axes) -> tuple[str, ...]:
  return (axes,) if isinstance(axes, str) else tuple(axes or ())


def logical_to_spec(names: tuple | None, rules: Sequence[tuple[str, Any]]) -> PartitionSpec:
  """Maps logical axis names to a PartitionSpec; None stays replicated.

  A name missing from the rule table is refused: a misspelt name would otherwise
  replicate a weight silently (list a name with None to replicate it on purpose).
  """
  table = dict(rules)
  if names is None:
    return PartitionSpec()
  used: set[str] = set()
  out = []
  for name in names:
    if name is not None and name not in table:
      raise ValueError(
        f"logical axis {name!r} has no entry in mesh.rules; known: {', '.join(sorted(table))}"
      )
    axes = _mesh_axes(table.get(name) if name is not None else None)
    bad = [a for a in axes if a not in MESH_AXES]
    if bad:
      raise ValueError(f"mesh.rules maps {name!r} to {bad}; mesh axes are {MESH_AXES}")
    axes = tuple(a for a in axes if a not in used)  # a mesh axis shards one dim at most
    used.update(axes)
    out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return PartitionSpec(*out)


def _fit(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh) -> PartitionSpec:
  """Drops the mesh axes of any dimension they do not divide (e.g. a 64-row table / 3)."""
  out = []
  for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)), strict=True):
    size = int(np.prod([mesh.shape[a] for a in _mesh_axes(axes)]))
    out.append(axes if dim % size == 0 else None)
  return PartitionSpec(*out)


def param_shardings(specs: PyTree, shapes: PyTree, mesh: Mesh, rules) -> PyTree:
  """NamedSharding per leaf from logical names (`specs`, tuples) and the rule table."""

  def one(path, names, x):
    if names is not None and len(names) != len(x.shape):
      raise ValueError(
        f"{jax.tree_util.keystr(path)}: logical names {names} do not match its shape {x.shape}"
      )
    return NamedSharding(mesh, _fit(logical_to_spec(names, rules), x.shape, mesh))

  return jax.tree.map_with_path(one, specs, shapes, is_leaf=lambda x: isinstance(x, tuple))


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


def stream_rows(batch_sh: NamedSharding) -> NamedSharding | None:
  """The residual stream's sharding: rows as the batch's, every other axis whole; None
  (no constraint, the program unchanged) when the batch is not split."""
  rows = batch_sh.spec[0] if len(batch_sh.spec) else None
  if int(np.prod([batch_sh.mesh.shape[a] for a in _mesh_axes(rows)])) == 1:
    return None
  return NamedSharding(batch_sh.mesh, PartitionSpec(rows))


def jit_model_fn(fn, batch_sh: NamedSharding, **jit_kwargs):
  """jax.jit of a function that runs the model on batches of `batch_sh`, traced with the
  residual stream pinned to the batch's rows (resnorm_jax/model/stream_sharding.py)."""
  return jax.jit(stream_sharding.constrained(fn, stream_rows(batch_sh)), **jit_kwargs)


def jit_train_step(step_fn, shardings, batch_sh: NamedSharding):
  """jit of step_fn(state, batch) -> (state, metrics): state donated, metrics on every host."""
  replicated = NamedSharding(batch_sh.mesh, PartitionSpec())
  return jit_model_fn(
    step_fn,
    batch_sh,
    in_shardings=(shardings, (batch_sh, batch_sh)),
    out_shardings=(shardings, replicated),
    donate_argnums=0,
  )


def batch_sharding(mesh: Mesh, rules) -> NamedSharding:
  """Rows by the rule for logical axis "batch" (data-parallel axes), time replicated."""
  return NamedSharding(mesh, logical_to_spec(("batch", None), rules))


def batch_shards(mesh: Mesh, rules) -> int:
  """Number of row shards of a batch (the data-parallel size): it must divide the batch."""
  return int(np.prod([mesh.shape[a] for a in _mesh_axes(batch_sharding(mesh, rules).spec[0])]))


@functools.lru_cache(maxsize=64)
def _process_rows(sharding: NamedSharding, global_rows: int) -> tuple[int, int]:
  """[start, stop) of the global rows this process's devices hold (one contiguous block)."""
  index_map = sharding.addressable_devices_indices_map((global_rows, 1))
  rows = sorted({idx[0].indices(global_rows)[:2] for idx in index_map.values()})
  start, stop = rows[0][0], rows[0][1]
  for a, b in rows[1:]:
    if a != stop:
      raise ValueError(
        f"process {jax.process_index()} holds batch rows {rows}: not one block (this "
        "mesh's device order interleaves hosts along the batch)"
      )
    stop = b
  return start, stop


def global_batch(local: np.ndarray, sharding: NamedSharding) -> jax.Array:
  """This process's rows -> one global array (each host passes only its own rows).

  Process p of P passes rows [p*b, (p+1)*b) of the global batch (batches.get_batch does);
  refused if this process's devices hold other rows, e.g. when a tensor axis spans hosts
  (then hosts would have to feed identical rows).
  """
  b, nproc, p = local.shape[0], jax.process_count(), jax.process_index()
  global_shape = (b * nproc, *local.shape[1:])
  if nproc > 1:
    start, stop = _process_rows(sharding, global_shape[0])
    if (start, stop) != (p * b, (p + 1) * b):
      raise ValueError(
        f"process {p} of {nproc} holds batch rows [{start}, {stop}) but built rows "
        f"[{p * b}, {(p + 1) * b}); the mesh {dict(sharding.mesh.shape)} must split the "
        "batch over hosts (data x fsdp a multiple of the process count, tensor within a host)"
      )
  return jax.make_array_from_process_local_data(sharding, local, global_shape)


def device_info(devices: Sequence[jax.Device] | None = None) -> dict:
  """What the run got: platform, device kind(s), device count and process count.

  A job that silently fell back to CPU (no CUDA plugin, a TPU runtime that did not start)
  shows it here, in the start-up line and in summary.json.
  """
  devices = list(devices if devices is not None else jax.devices())
  kinds = sorted({d.device_kind for d in devices})
  return {
    "platform": devices[0].platform,
    "device_kind": ", ".join(kinds),
    "device_count": len(devices),
    "process_count": len({d.process_index for d in devices}),
  }


def describe_devices(info: dict) -> str:
  """'gpu: 16 x NVIDIA H100 80GB HBM3 in 2 processes'."""
  n = info["process_count"]
  return (
    f"{info['platform']}: {info['device_count']} x {info['device_kind']} in {n} "
    f"process{'es' if n > 1 else ''}"
  )


# Environment variables that say "this process is one of several" (jax auto-detects the rest).
_CLUSTER_ENV = ("JAX_COORDINATOR_ADDRESS", "TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS")
_COUNT_ENV = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")  # multi-process only when > 1


def cluster_env() -> bool:
  """True under a multi-process launcher jax.distributed.initialize() can auto-detect."""
  if any(os.environ.get(k) for k in _CLUSTER_ENV):
    return True
  slurm_step = "SLURM_PROCID" in os.environ and "SLURM_STEP_NODELIST" in os.environ
  counts = [os.environ.get(k, "") for k in _COUNT_ENV]
  return any(c.isdigit() and int(c) > 1 for c in counts) and (
    slurm_step or "OMPI_COMM_WORLD_RANK" in os.environ
  )


def maybe_initialize_distributed(dist_cfg) -> bool:
  """Calls jax.distributed.initialize() when asked or when a cluster environment says so.

  dist.initialize: "true" always (no address/count/id: auto-detected on TPU VMs, SLURM,
  Open MPI), "false" never, "auto" when an address or a process count is given or a
  cluster environment is detected. Returns True if jax.distributed is initialized. Must run
  before anything touches a JAX backend. CPU processes talk through gloo collectives
  (jax_cpu_collectives_implementation, the default in this JAX).
  """
  mode = str(dist_cfg.initialize).lower()
  if mode not in ("auto", "true", "false"):
    raise ValueError(f"dist.initialize={mode!r} is not valid; valid values: auto, true, false")
  heartbeat = dist_cfg.get("heartbeat_timeout_seconds", 0)
  if not isinstance(heartbeat, int) or heartbeat < 0:
    raise ValueError(
      f"dist.heartbeat_timeout_seconds={heartbeat!r} must be an integer >= 0 (0: JAX's, 100 s)"
    )
  if jax.distributed.is_initialized():
    return True
  asked = bool(dist_cfg.coordinator_address) or dist_cfg.num_processes > 1
  if mode == "false" or (mode == "auto" and not asked and not cluster_env()):
    return False
  kwargs = {}
  if dist_cfg.coordinator_address:
    kwargs["coordinator_address"] = dist_cfg.coordinator_address
  if dist_cfg.num_processes > 0:
    kwargs["num_processes"] = dist_cfg.num_processes
  if dist_cfg.process_id >= 0:
    kwargs["process_id"] = dist_cfg.process_id
  if kwargs.keys() == {"coordinator_address", "num_processes", "process_id"}:
    # All given explicitly (e.g. several CPU processes on one machine): do not let a stray
    # cluster environment (a SLURM shell) override them or restrict the local devices.
    kwargs["cluster_detection_method"] = "deactivate"
  if heartbeat:
    kwargs["heartbeat_timeout_seconds"] = heartbeat
  jax.distributed.initialize(**kwargs)
  return True
