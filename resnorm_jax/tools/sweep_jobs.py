"""A sweep's jobs: a point to run with its workdir, command and estimated cost (`Job`,
`estimated_cost`, which orders them), points that differ only in opt.lr and seed as one
population job (`population_jobs`), and the local data files a pending point names that are
not there (`missing_data`), checked before any runs. No JAX here.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.config import cli
from resnorm_jax.tools.sweep_grid import (
  POINT_FILE,
  POPULATION_FILE,
  ROOT,
  Point,
  population_command,
  population_points,
  read_json,
  vmap_groups,
)

DATA_SOURCES_WITH_FILES = ("text", "tokens")  # data.source values that read data.path


def missing_data(config: Mapping[str, Any]) -> list[str]:
  """The data a resolved config names that is not there: `data.path=...` / `data.val_path=...`
  for a local file, folder or glob that matches no file (relative paths from the repository
  root, where the runs start), `data.path` empty for a source that reads it. URLs (gs://) are
  not checked: the run checks them."""
  data = config.get("data") or {}
  if data.get("source") not in DATA_SOURCES_WITH_FILES:
    return []
  out = []
  for key in ("path", "val_path"):
    value = str(data.get(key) or "")
    if not value:
      if key == "path":
        out.append(f"data.path is empty (data.source={data.get('source')!r} reads it)")
      continue
    if "://" in value:
      continue
    full = os.path.join(ROOT, os.path.expanduser(value))
    if os.path.exists(full) or any(os.path.isfile(p) for p in glob.iglob(full, recursive=True)):
      continue
    out.append(
      f"data.{key}={value} ({'matches no file' if glob.has_magic(value) else 'no such file'})"
    )
  return out


def estimated_cost(config: Mapping[str, Any]) -> float:
  """Relative run time of a resolved config: steps x tokens x per-token FLOPs of the stack."""
  m, t = config.get("model", {}), config.get("train", {})
  d, f, n = m.get("d_model", 64), m.get("d_ff", 4 * m.get("d_model", 64)), m.get("num_layers", 1)
  seq = t.get("seq_len", 128)
  per_token = n * (4 * d * d + 2 * d * f + 2 * seq * d) + d * m.get("vocab_size", 256)
  return float(t.get("steps", 1) * t.get("batch_size", 1) * seq * per_token)


@dataclasses.dataclass
class Job:
  """A point to run: its workdir, command and estimated cost (for order and ETA).

  A population (sweep --vmap) is one job whose `members` are every point it trains with its
  workdir, the first being `point` and `workdir` (where the job's train.log goes).
  """

  point: Point
  workdir: str
  command: list[str]
  cost: float = 1.0
  members: tuple[tuple[Point, str], ...] = ()

  def runs(self) -> tuple[tuple[Point, str], ...]:
    """(point, workdir) of every run the job trains."""
    return self.members or ((self.point, self.workdir),)

  @property
  def label(self) -> str:
    n = len(self.runs())
    return self.point.name if n == 1 else f"{self.point.name} and {n - 1} more (one program)"


def population_jobs(
  todo: Sequence[tuple[Job, Mapping[str, Any], Mapping[str, Any]]],
  max_size: int = 0,
  *,
  write: bool = True,
) -> list[Job]:
  """The jobs of `todo` ((ordinary job, overrides, resolved config) per point) with the
  points that differ only in opt.lr and seed merged into population jobs
  (experiments.train_population, sweep_grid.vmap_groups), at most `max_size` members each
  (0: no cap); a point alone in its group stays an ordinary job. Prints each population's
  command; `write`: writes its points file and each member's sweep_point.json."""
  jobs = []
  for group in vmap_groups([expected for _, _, expected in todo], max_size):
    members = [todo[i] for i in group]
    first = members[0][0]
    if len(members) == 1:
      jobs.append(first)
      continue
    points_file = os.path.join(first.workdir, POPULATION_FILE)
    command = population_command(points_file)
    names = [job.point.name for job, _, _ in members]
    print(f"population of {len(names)}: {', '.join(names)}\n  {shlex.join(command)}")
    if write:
      entries = [(job.point, job.workdir, overrides) for job, overrides, _ in members]
      cli.write_json(points_file, population_points(entries))
      log = os.path.join(first.workdir, "train.log")
      for job, _, _ in members:
        info = read_json(os.path.join(job.workdir, POINT_FILE)) or {}
        info.update(command=command, population=names, log=log)
        cli.write_json(os.path.join(job.workdir, POINT_FILE), info)
    runs = tuple((job.point, job.workdir) for job, _, _ in members)
    cost = sum(job.cost for job, _, _ in members)
    jobs.append(Job(first.point, first.workdir, command, cost, members=runs))
  return jobs
