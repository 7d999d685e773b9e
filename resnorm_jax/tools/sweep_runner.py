"""Running a sweep's points: each job pinned to its own cores or device (`make_slots`), the
costliest first, with progress lines and signals passed on to the running children; points
that differ only in opt.lr and seed as one population job (`population_jobs`). Before any
runs, every pending point's local data files are checked (`missing_data`); a point whose
process fails gets its reason (exit status, last error line of its train.log) on its console
line, in its sweep_point.json and in the results (`with_failures`). A point whose workdir a
live run holds (another sweep on the same sweep_dir, a child left by a killed sweep) is running
elsewhere, not failed: it waits for that run to end, then counts as what its folder holds
(`running_elsewhere`, `refresh_record`). No JAX here.
"""

from __future__ import annotations

import dataclasses
import fcntl
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import time
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
from resnorm_jax.tools.sweep_results import format_cell, run_row

INTERRUPTED = "__interrupted__"  # key of run_points' result when a signal stopped it
LOCK_FILE = ".lock"  # a run's workdir lock (resnorm_jax/train/workdir.py)
# A point's process refused because a live run holds its workdir (workdir.WorkdirInUse): not a
# failure of the point, which is running elsewhere (another sweep, an orphaned child).
_BUSY = re.compile(r"is in use by another run")
FINISHED = ("completed", "diverged")  # a run folder's summary status that ends the point
DATA_SOURCES_WITH_FILES = ("text", "tokens")  # data.source values that read data.path
# The line of a failed run's log that says why: cli.fail's `error: ...`, a traceback's last
# line (`ValueError: ...`, `jax.errors.JaxRuntimeError: ...`), absl's FATAL.
_ERROR_LINE = re.compile(r"^(error: |FATAL|(\w+\.)*\w*(Error|Exception|Interrupt|Exit)\b)")


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


def failure_reason(log_path: str, returncode: int) -> str:
  """Why a point's process ended with `returncode`: `exit N` (`killed by SIGKILL` for a
  signal), then the last error line of its log (else its last line)."""
  if returncode < 0:
    try:
      how = f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
      how = f"killed by signal {-returncode}"
  else:
    how = f"exit {returncode}"
  try:
    with open(log_path, "rb") as f:
      f.seek(max(0, os.path.getsize(log_path) - 16384))
      lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
  except OSError:
    lines = []
  line = next((ln for ln in reversed(lines) if _ERROR_LINE.match(ln)), lines[-1] if lines else "")
  if len(line) > 300:
    line = line[:297] + "..."
  return f"{how}: {line}" if line else how


def estimated_cost(config: Mapping[str, Any]) -> float:
  """Relative run time of a resolved config: steps x tokens x per-token FLOPs of the stack."""
  m, t = config.get("model", {}), config.get("train", {})
  d, f, n = m.get("d_model", 64), m.get("d_ff", 4 * m.get("d_model", 64)), m.get("num_layers", 1)
  seq = t.get("seq_len", 128)
  per_token = n * (4 * d * d + 2 * d * f + 2 * seq * d) + d * m.get("vocab_size", 256)
  return float(t.get("steps", 1) * t.get("batch_size", 1) * seq * per_token)


@dataclasses.dataclass(frozen=True)
class Slot:
  """Where one job runs: the cores it is pinned to and the environment it adds."""

  label: str
  cpus: tuple[int, ...] | None  # None: not pinned (all cores)
  env: dict[str, str]


ACCELERATORS = ("cpu", "gpu", "tpu")
# One device per job: the variables that make a process see only its own device.
_DEVICE_ENV = {
  "gpu": lambda i: {"CUDA_VISIBLE_DEVICES": str(i)},
  "tpu": lambda i: {
    "TPU_VISIBLE_CHIPS": str(i),
    "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
    "TPU_PROCESS_BOUNDS": "1,1,1",
    "TPU_PROCESS_PORT": str(8476 + i),
    "TPU_MESH_CONTROLLER_PORT": str(8476 + i),
  },
}


def available_cpus() -> list[int]:
  """The cores this process may run on."""
  return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def count_devices(accelerator: str) -> int:
  """Accelerators visible here: CUDA_VISIBLE_DEVICES / nvidia-smi for GPUs, /dev/accel* TPUs."""
  if accelerator == "gpu":
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
      return len([v for v in visible.split(",") if v.strip()])
    try:
      out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
      return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())
  if accelerator == "tpu":
    import glob

    return len(glob.glob("/dev/accel*")) or len(glob.glob("/dev/vfio/[0-9]*"))
  return 0


def make_slots(
  jobs: str, threads_per_job: int, accelerator: str = "cpu", cpus: Sequence[int] | None = None
) -> list[Slot]:
  """The job slots of `--jobs` (a number or 'auto'): pinned core groups, or devices.

  One job on a CPU stays unpinned (it uses every core, as a single run does). Several jobs
  get disjoint groups of `threads_per_job` cores; with one core per job XLA:CPU is made
  single-threaded too (its Eigen pool would otherwise start a thread per machine core).
  """
  if accelerator not in ACCELERATORS:
    raise ValueError(f"--accelerator={accelerator!r} is not one of {', '.join(ACCELERATORS)}")
  if threads_per_job < 1:
    raise ValueError(f"--threads_per_job={threads_per_job} must be >= 1")
  if accelerator != "cpu":
    n_dev = count_devices(accelerator)
    if n_dev < 1:
      raise ValueError(f"--accelerator={accelerator}: no {accelerator.upper()} is visible here")
    n = n_dev if jobs == "auto" else _positive_jobs(jobs)
    if n > n_dev:
      raise ValueError(f"--jobs={jobs}: only {n_dev} {accelerator.upper()}s are visible")
    return [Slot(f"{accelerator}{i}", None, _DEVICE_ENV[accelerator](i)) for i in range(n)]
  cpus = list(available_cpus() if cpus is None else cpus)
  groups = max(1, len(cpus) // threads_per_job)
  n = groups if jobs == "auto" else _positive_jobs(jobs)
  if n == 1:
    return [Slot("all cores", None, {})]
  if n * threads_per_job > len(cpus):
    raise ValueError(
      f"--jobs={jobs} x --threads_per_job={threads_per_job} needs {n * threads_per_job} cores; "
      f"{len(cpus)} are available ({cpus})"
    )
  slots = []
  for i in range(n):
    group = tuple(cpus[i * threads_per_job : (i + 1) * threads_per_job])
    flags = os.environ.get("XLA_FLAGS", "")
    if threads_per_job == 1:
      flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    label = f"cpu{group[0]}" if len(group) == 1 else f"cpu{group[0]}-{group[-1]}"
    slots.append(Slot(label, group, {"XLA_FLAGS": flags}))
  return slots


def _positive_jobs(jobs: str) -> int:
  try:
    n = int(jobs)
  except ValueError:
    n = 0
  if n < 1:
    raise ValueError(f"--jobs={jobs!r} must be 'auto' or a positive integer")
  return n


_STEP_LINE = re.compile(r"step\s+(\d+)/(\d+) \| loss (\S+).*?ETA (\S+)")


def log_progress(log_path: str) -> tuple[int, int, str, str] | None:
  """(step, steps, loss, ETA) of the last step line in a train.log, or None."""
  try:
    with open(log_path, "rb") as f:
      f.seek(max(0, os.path.getsize(log_path) - 8192))
      tail = f.read().decode(errors="replace")
  except OSError:
    return None
  found = _STEP_LINE.findall(tail)
  if not found:
    return None
  step, steps, loss, eta = found[-1]
  return int(step), int(steps), loss, eta


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


def progress_lines(
  running: Mapping[str, Any], done_cost: float, total_cost: float, elapsed: float
) -> list[str]:
  """A line per running job and the sweep's overall ETA (cost-weighted throughput)."""
  lines, progress_cost = [], done_cost
  for job, slot, _, _, t0 in running.values():
    info = log_progress(os.path.join(job.workdir, "train.log"))
    if info is None:
      since = cli.format_duration(time.time() - t0)
      lines.append(f"  {slot.label}: {job.label} starting ({since})")
      continue
    step, steps, loss, eta = info
    progress_cost += job.cost * step / max(steps, 1)
    lines.append(f"  {slot.label}: {job.label} step {step}/{steps} loss {loss} ETA {eta}")
  frac = progress_cost / total_cost if total_cost else 0.0
  eta = cli.format_duration(elapsed * (1 - frac) / frac) if frac > 0.02 else "?"
  lines.insert(
    0, f"sweep {100 * frac:.0f}% of the estimated work in {cli.format_duration(elapsed)}; ETA {eta}"
  )
  return lines


def running_elsewhere(workdir: str) -> str | None:
  """Who holds `workdir`'s lock (`pid N on host H, started ...`) while a live run does, else
  None. Probed with a shared flock released at once (a run starting in that instant is
  refused as busy, and its sweep waits for this one)."""
  path = os.path.join(workdir, LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      try:
        info = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
      except (ValueError, TypeError, KeyError, OSError):
        return "a run that has not written its name yet"
    except OSError:  # a filesystem that cannot lock: nothing to wait for
      return None
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally:
    os.close(fd)


def finished_status(workdir: str) -> str | None:
  """The status of a finished run in `workdir` (completed, diverged), else None."""
  summary = read_json(os.path.join(workdir, "summary.json"))
  status = summary.get("status") if isinstance(summary, dict) else None
  return status if status in FINISHED else None


def refresh_record(workdir: str) -> bool:
  """Rewrites a point's sweep_point.json from its folder when the folder holds a finished run
  but the record says otherwise (a failure, "running elsewhere": the run was finished by
  another process, e.g. a child that outlived its sweep); True when it did."""
  path = os.path.join(workdir, POINT_FILE)
  info, status = read_json(path), finished_status(workdir)
  if not isinstance(info, dict) or status is None:
    return False
  stale = info.get("returncode") not in (None, 0) or "running_elsewhere" in info
  if not stale and info.get("status") == status:
    return False
  if stale:  # a failure or "elsewhere" the folder contradicts; a clean exit 0 is kept
    for key in ("returncode", "error", "running_elsewhere"):
      info.pop(key, None)
  info["status"] = status  # what the folder holds, whoever finished it
  cli.write_json(path, info)
  return True


def refresh_records(sweep_dir: str) -> list[str]:
  """refresh_record for every point folder of `sweep_dir`; the names of those rewritten."""
  names = sorted(os.listdir(sweep_dir)) if os.path.isdir(sweep_dir) else []
  return [n for n in names if refresh_record(os.path.join(sweep_dir, n))]


def _record_elsewhere(workdir: str, holder: str) -> None:
  path = os.path.join(workdir, POINT_FILE)
  info = read_json(path) or {}
  for key in ("returncode", "error"):
    info.pop(key, None)
  info["running_elsewhere"] = holder
  cli.write_json(path, info)


def _busy(job: Job) -> str | None:
  """The holder of the first of the job's workdirs a live run holds, else None."""
  return next((h for _, w in job.runs() if (h := running_elsewhere(w))), None)


def run_points(
  jobs: Sequence[Job], slots: Sequence[Slot], progress_every: float = 60.0
) -> dict[str, int]:
  """Runs jobs, the costliest first, one per free slot; the exit status per point name.

  Children run in their own session, pinned to their slot's cores, with output in
  <workdir>/train.log, in the repository root of this code with it first on PYTHONPATH (a
  sweep started from a second checkout runs that checkout's code). A job whose workdir a
  live run holds waits until it is free (before it starts, or when its process was refused
  as busy), then counts as finished if that run finished it, else starts (it resumes): two
  sweeps on one sweep_dir train each point once and neither calls it failed. A
  SIGINT/SIGTERM to the sweep is passed on once to every running child (which saves a
  checkpoint and exits 'interrupted'); no new point starts. Returns early in that case.
  """
  pending = sorted(jobs, key=lambda j: -j.cost)
  waiting: list[Job] = []  # running elsewhere: started again, or counted, once free
  free, running, codes = list(slots), {}, {}
  total_cost, done_cost = sum(j.cost for j in jobs), 0.0
  stop: list[int] = []
  forwarded = False
  handled = (signal.SIGINT, signal.SIGTERM)
  old = {s: signal.signal(s, lambda signum, _: stop.append(signum)) for s in handled}
  t_start = last_progress = time.time()
  try:
    while ((pending or waiting) and not stop) or running:
      for job in [j for j in waiting if not _busy(j)]:  # the other run has ended
        waiting.remove(job)
        if all(finished_status(w) for _, w in job.runs()):
          _count_finished_elsewhere(job, codes)
        else:
          pending.insert(0, job)  # started now: it resumes what the other run left
      while pending and not stop and free:
        job = pending.pop(0)
        holder = _busy(job)
        if holder:
          _wait_for(job, holder, waiting)
          continue
        slot = free.pop(0)
        os.makedirs(job.workdir, exist_ok=True)
        log = open(os.path.join(job.workdir, "train.log"), "a")
        proc = subprocess.Popen(
          job.command,
          cwd=ROOT,
          stdout=log,
          stderr=subprocess.STDOUT,
          start_new_session=True,
          env=child_env(slot),
          preexec_fn=(lambda c=slot.cpus: os.sched_setaffinity(0, c)) if slot.cpus else None,
        )
        running[job.point.name] = (job, slot, proc, log, time.time())
        print(f"[{job.point.index + 1}] {job.label}: started on {slot.label}", flush=True)
      if stop and not forwarded:
        for _, _, proc, _, _ in running.values():
          proc.send_signal(signal.SIGINT)
        forwarded = True
        print(f"signal {stop[0]}: stopping; waiting for running points to save", flush=True)
      time.sleep(0.2)
      for name, (job, slot, proc, log, t0) in list(running.items()):
        if proc.poll() is None:
          continue
        log.close()
        del running[name]
        free.append(slot)
        done_cost += job.cost
        log_path = os.path.join(job.workdir, "train.log")
        reason = failure_reason(log_path, proc.returncode) if proc.returncode else None
        if reason and proc.returncode == 2 and _BUSY.search(reason):  # refused: held elsewhere
          done_cost -= job.cost
          _wait_for(job, _busy(job) or "another run", waiting)
          continue
        for point, workdir in job.runs():  # a population: every member's exit and outcome
          codes[point.name] = proc.returncode
          _record_exit(workdir, proc.returncode, reason)
          took = cli.format_duration(time.time() - t0)
          if reason:  # no results to show: why it failed
            print(
              f"[{point.index + 1}] {point.name}: failed ({reason}) in {took}; log {log_path}",
              flush=True,
            )
            continue
          row = run_row(workdir)
          print(
            f"[{point.index + 1}] {point.name}: {row['outcome']} (exit {proc.returncode}, "
            f"eval {format_cell(row['final_eval_loss'])}, "
            f"no-context {format_cell(row['baseline'])}) in {took}; log {log_path}",
            flush=True,
          )
      if running and progress_every > 0 and time.time() - last_progress >= progress_every:
        last_progress = time.time()
        lines = progress_lines(running, done_cost, total_cost, last_progress - t_start)
        print("\n".join(lines), flush=True)
  finally:
    for s, handler in old.items():
      signal.signal(s, handler)
  if stop:
    codes[INTERRUPTED] = 128 + stop[0]
  return codes


def child_env(slot: Slot) -> dict[str, str]:
  """A child's environment: this one, the slot's, and this code's root first on PYTHONPATH
  (with the root as working folder, `python -m experiments.train` imports this checkout's
  package, not an editable install of another one)."""
  path = os.environ.get("PYTHONPATH", "")
  return {**os.environ, **slot.env, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, path) if p)}


def _wait_for(job: Job, holder: str, waiting: list[Job]) -> None:
  """Puts a job whose workdir a live run holds aside until that run ends."""
  waiting.append(job)
  for point, workdir in job.runs():
    _record_elsewhere(workdir, holder)
    print(
      f"[{point.index + 1}] {point.name}: running elsewhere ({holder}): waiting for it to end",
      flush=True,
    )


def _count_finished_elsewhere(job: Job, codes: dict[str, int]) -> None:
  """A job whose runs another process finished: recorded from the folders, exit status 0."""
  for point, workdir in job.runs():
    refresh_record(workdir)
    codes[point.name] = 0
    row = run_row(workdir)
    print(
      f"[{point.index + 1}] {point.name}: {row['outcome']}, finished elsewhere "
      f"(eval {format_cell(row['final_eval_loss'])})",
      flush=True,
    )


def _record_exit(workdir: str, returncode: int, reason: str | None = None) -> None:
  """sweep_point.json: the exit status and, for a failure, its reason (`failure_reason`)."""
  path = os.path.join(workdir, POINT_FILE)
  info = read_json(path) or {}
  info["returncode"] = returncode
  for key in ("error", "running_elsewhere", "status"):
    info.pop(key, None)
  if reason:
    info["error"] = reason
  cli.write_json(path, info)


def with_failures(rows: Sequence[dict[str, Any]], sweep_dir: str) -> list[dict[str, Any]]:
  """The results rows with, when any run's process failed, two columns after `outcome`:
  `exit_code` and `error` (its reason, from sweep_point.json); such a run without a finished
  summary is `failed`. Rows are returned as they are when none failed."""
  points = [read_json(os.path.join(sweep_dir, r["name"], POINT_FILE)) or {} for r in rows]
  if not any(p.get("returncode") not in (None, 0) for p in points):
    return list(rows)
  out = []
  for row, point in zip(rows, points, strict=True):
    code = point.get("returncode")
    failed = code not in (None, 0)
    new = {}
    for k, v in row.items():
      new[k] = "failed" if k == "outcome" and failed and v in ("pending", "unknown") else v
      if k == "outcome":
        new["exit_code"] = code
        new["error"] = point.get("error") if failed else None
    out.append(new)
  return out
