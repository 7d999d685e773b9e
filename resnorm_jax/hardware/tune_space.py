"""The candidates `compile_for --tune` compiles (tune.py): how one step runs on a slice.

A candidate keeps the experiment (the global batch, float32 master weights, the loss) and
changes only the mesh (pure data parallel, fsdp over the slice, data x fsdp), the remat
policy, the attention implementation (dense, or the splash kernel on a TPU) and the XLA flag
set (xla_flags.py). No JAX here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax.hardware.xla_flags import FLAG_PARTS, flag_parts

MESHES = ("data", "fsdp", "data_fsdp")
ATTENTIONS = ("dense", "splash")


@dataclasses.dataclass(frozen=True)
class Candidate:
  """How one step runs: the mesh, remat policy, attention and XLA flag set."""

  mesh: str  # MESHES
  remat: str  # target_compile.REMAT_ORDER
  attention: str = "dense"  # ATTENTIONS
  flags: str = "default"  # default, or FLAG_PARTS names joined by "+" (maxtext+no_windowed)

  @property
  def label(self) -> str:
    return f"mesh={self.mesh} remat={self.remat} attention={self.attention} flags={self.flags}"


def with_flags(c: Candidate, part: str) -> Candidate:
  """`c` with one more FLAG_PARTS entry, in FLAG_PARTS' order."""
  parts = set(flag_parts(c.flags)) | {part}
  name = "+".join(p for p in FLAG_PARTS if p in parts)
  return dataclasses.replace(c, flags=name)


def mesh_overrides(mesh: str, chips: int) -> dict[str, int]:
  """mesh.data/fsdp/tensor for a MESHES name on `chips` chips (data x fsdp: the fsdp axis
  the square root's power of 2, the rest data: 2 x 2 on 4 chips, 4 x 2 on 8, 4 x 4 on 16)."""
  if mesh == "data":
    return {"mesh.data": -1, "mesh.fsdp": 1, "mesh.tensor": 1}
  if mesh == "fsdp":
    return {"mesh.data": 1, "mesh.fsdp": -1, "mesh.tensor": 1}
  if mesh == "data_fsdp":
    fsdp = 2 ** (max(chips.bit_length() - 1, 0) // 2)
    return {"mesh.data": chips // fsdp, "mesh.fsdp": fsdp, "mesh.tensor": 1}
  raise ValueError(f"mesh {mesh!r}: one of {', '.join(MESHES)}")


def own_candidate(config: ConfigDict, chips: int) -> Candidate:
  """The candidate that runs `config` as it is (its mesh among MESHES, else fsdp; its remat;
  its attention where a candidate, else dense)."""
  m = config.mesh
  shape = tuple(chips if int(v) == -1 else int(v) for v in (m.data, m.fsdp, m.tensor))
  mesh = "fsdp"
  for name in MESHES:
    o = mesh_overrides(name, chips)
    keys = ("mesh.data", "mesh.fsdp", "mesh.tensor")
    if tuple(chips if o[k] == -1 else o[k] for k in keys) == shape:
      mesh = name
  attention = config.model.attention if config.model.attention in ATTENTIONS else "dense"
  return Candidate(mesh, config.model.remat, attention)


def overrides(c: Candidate, chips: int) -> dict[str, Any]:
  """The config keys a candidate sets (flags are compile options, not config)."""
  return {**mesh_overrides(c.mesh, chips), "model.remat": c.remat, "model.attention": c.attention}
