"""A sweep's jobs: a point to run with its workdir, command and estimated cost (`Job`,
`estimated_cost`, which orders them), points that differ only in opt.lr and seed as one
population job (`population_jobs`; a point a population has checkpointed goes on in that
population, `recorded_population`), and the local data files a pending point names that are
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
from resnorm_jax.runs import record_files
from resnorm_jax.runs.sweep_point import POINT_FILE
from resnorm_jax.sweeps.grid import (
  POPULATION_FILE,
  ROOT,
  Point,
  population_command,
  population_points,
  read_json,
  vmap_groups,
)

DATA_SOURCES_WITH_FILES = ("text", "tokens")  # data.source values that read data.path
# A checkpoint's metadata as orbax writes it (resnorm_jax/train/checkpoint.py: its commit
# marker, the `meta` item, WRITTEN_BY), read here as plain JSON.
COMMIT_MARKER, META_FILE, WRITTEN_BY = "commit_success.txt", ("meta", "metadata"), "written_by"


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


def seconds_per_cost(timed: Sequence[tuple[float, float]]) -> float | None:
  """The median of wall seconds over estimated_cost of finished runs [(cost, seconds)]: what a
  unit of cost took on the machine that ran them; None without a timed run."""
  ratios = sorted(sec / cost for cost, sec in timed if cost > 0 and sec and sec > 0)
  if not ratios:
    return None
  mid = len(ratios) // 2
  return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


def dry_run_total(
  states: Sequence[str], todo_costs: Sequence[float], per_cost: float | None
) -> str:
  """The line a dry run ends with: how many points each state holds and what the pending ones
  would cost (in core-hours at one core a point, the rate of the finished runs)."""
  counts: dict[str, int] = {}
  for s in states:
    key = s.split(" ")[0]  # 'queued (SLURM task 3)' counts as queued
    counts[key] = counts.get(key, 0) + 1
  told = ", ".join(f"{n} {k}" for k, n in counts.items())
  line = f"{len(states)} points: {told}."
  if not todo_costs:
    return line + " Nothing to run."
  if per_cost is None:
    return line + " No finished run here to time a point by: no estimate of the cost."
  hours = sum(todo_costs) * per_cost / 3600
  return (
    line + f" The {len(todo_costs)} to run: about {hours:.1f} core-hours at the rate of the "
    "finished runs here (a point a core)."
  )


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


def recorded_population(workdir: str) -> str | None:
  """The points file of the population that wrote the newest committed checkpoint in
  `workdir` (the command its metadata records), when that file is there and lists `workdir`
  at the member's slot; else None (no checkpoint, a single run's, or a writer not recorded).
  The member goes on bit for bit only in that program (population_points.writer_refusal)."""
  ckpt = os.path.join(workdir, record_files.CHECKPOINTS)
  steps = [
    int(n)
    for n in (os.listdir(ckpt) if os.path.isdir(ckpt) else [])
    if n.isdigit() and os.path.exists(os.path.join(ckpt, n, COMMIT_MARKER))
  ]
  if not steps:
    return None
  meta = read_json(os.path.join(ckpt, str(max(steps)), *META_FILE))
  writer = meta.get(WRITTEN_BY) if isinstance(meta, dict) else None
  if not isinstance(writer, dict) or not writer.get("command"):
    return None
  path = _points_arg(shlex.split(writer["command"]))
  points = read_json(path) if path else None
  slot = writer.get("slot")
  if not isinstance(points, list) or len(points) != writer.get("members"):
    return None
  if not isinstance(slot, int) or not 0 <= slot < len(points):
    return None
  listed = points[slot].get("workdir") if isinstance(points[slot], dict) else None
  return path if listed and _same_folder(listed, workdir) else None


def _points_arg(args: Sequence[str]) -> str | None:
  """The --points=FILE of an experiments.train_population command, from the repository root
  (where the runs start) when relative."""
  for i, a in enumerate(args):
    value = a.split("=", 1)[1] if a.startswith("--points=") else None
    if a == "--points" and i + 1 < len(args):
      value = args[i + 1]
    if value:
      return value if os.path.isabs(value) else os.path.join(ROOT, value)
  return None


def _same_folder(a: str, b: str) -> bool:
  full = [x if os.path.isabs(x) else os.path.join(ROOT, x) for x in (a, b)]
  return os.path.realpath(full[0]) == os.path.realpath(full[1])


def _pinned(todo: Sequence[tuple[Job, Mapping[str, Any], Mapping[str, Any]]]):
  """{points file: indices of the todo points it lists} for every population that has
  checkpointed one of them (recorded_population): those points go on in it, whatever else
  finished or changed since (vmap_max included)."""
  files = {f for job, _, _ in todo if (f := recorded_population(job.workdir))}
  pinned: dict[str, list[int]] = {}
  for path in sorted(files):
    workdirs = [p.get("workdir", "") for p in read_json(path) if isinstance(p, dict)]
    for i, (job, _, _) in enumerate(todo):
      taken = any(i in v for v in pinned.values())
      if not taken and any(_same_folder(w, job.workdir) for w in workdirs):
        pinned.setdefault(path, []).append(i)
  return pinned


def population_jobs(
  todo: Sequence[tuple[Job, Mapping[str, Any], Mapping[str, Any]]],
  max_size: int = 0,
  *,
  write: bool = True,
) -> list[Job]:
  """The jobs of `todo` ((ordinary job, overrides, resolved config) per point) with the
  points that differ only in opt.lr and seed merged into population jobs
  (experiments.train_population, grid.vmap_groups), at most `max_size` members each
  (0: no cap); a point alone in its group, or with a stop rule (train.stop_when), stays an
  ordinary job. A point a population has
  checkpointed goes on in that population's points file, as it was written (its finished
  members held in their slots). Prints each population's command; `write`: writes its
  points file and each member's sweep_point.json."""
  jobs = []
  pinned = _pinned(todo)
  for path, indices in pinned.items():
    members = [todo[i] for i in indices]
    names = [os.path.basename(os.path.normpath(p["workdir"])) for p in read_json(path)]
    print(f"population of {len(names)} as its checkpoints were written: {', '.join(names)}")
    jobs.append(_population_job(members, path, names, write=write, write_points=False))
  rest = [i for i in range(len(todo)) if not any(i in v for v in pinned.values())]
  # A point with a stop rule (train.stop_when) is a single run: a population applies none.
  ruled = [i for i in rest if ((todo[i][2].get("train") or {}).get("stop_when") or "")]
  jobs += [todo[i][0] for i in ruled]
  rest = [i for i in rest if i not in ruled]
  for group in vmap_groups([todo[i][2] for i in rest], max_size):
    members = [todo[rest[i]] for i in group]
    if len(members) == 1:
      jobs.append(members[0][0])
      continue
    names = [job.point.name for job, _, _ in members]
    points_file = os.path.join(members[0][0].workdir, POPULATION_FILE)
    print(f"population of {len(names)}: {', '.join(names)}")
    jobs.append(_population_job(members, points_file, names, write=write, write_points=True))
  return jobs


def _population_job(members, points_file: str, names: list[str], *, write, write_points) -> Job:
  """The job of a population: `members` (job, overrides, resolved config) to train, its
  `points_file` (written from them when `write_points`), every member's name in `names`."""
  first = members[0][0]
  command = population_command(points_file)
  print(f"  {shlex.join(command)}")
  if write:
    if write_points:
      entries = [(job.point, job.workdir, overrides) for job, overrides, _ in members]
      cli.write_json(points_file, population_points(entries))
    log = os.path.join(first.workdir, record_files.LOG)
    for job, _, _ in members:
      info = read_json(os.path.join(job.workdir, POINT_FILE)) or {}
      info.update(command=command, population=names, log=log)
      cli.write_json(os.path.join(job.workdir, POINT_FILE), info)
  runs = tuple((job.point, job.workdir) for job, _, _ in members)
  cost = sum(job.cost for job, _, _ in members)
  return Job(first.point, first.workdir, command, cost, members=runs)
