"""Running a sweep's jobs (jobs.py): each on a free slot, its own cores or device
(slots.py), the costliest first, with progress lines and signals passed on to the
running children. A point whose process fails gets its reason on its console line and in its
sweep_point.json (runs/sweep_point.py). A point whose workdir a live run holds (another sweep on
the same sweep_dir, a child left by a killed sweep) is running elsewhere, not failed: it waits
for that run to end, then counts as what its folder holds. No JAX here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.config import cli
from resnorm_jax.data import fs
from resnorm_jax.files import nofollow
from resnorm_jax.runs import record_files
from resnorm_jax.runs.sweep_point import (
  failure_reason,
  finished_status,
  record_elsewhere,
  record_exit,
  refresh_record,
  running_elsewhere,
)
from resnorm_jax.runs.sweep_results import format_cell, run_row
from resnorm_jax.sweeps.grid import ROOT
from resnorm_jax.sweeps.jobs import Job
from resnorm_jax.sweeps.slots import Slot, child_env

INTERRUPTED = "__interrupted__"  # key of run_points' result when a signal stopped it
# A point's process refused because a live run holds its workdir (workdir.WorkdirInUse): not a
# failure of the point, which is running elsewhere (another sweep, an orphaned child).
_BUSY = re.compile(r"is in use by another run")


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


def progress_lines(
  running: Mapping[str, Any], done_cost: float, total_cost: float, elapsed: float
) -> list[str]:
  """A line per running job and the sweep's overall ETA (cost-weighted throughput)."""
  lines, progress_cost = [], done_cost
  for job, slot, _, _, t0 in running.values():
    info = log_progress(os.path.join(job.workdir, record_files.LOG))
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
  sweeps on one sweep_dir train each point once and neither calls it failed. A SIGINT or
  SIGTERM is passed on once to every running child (it saves and exits 'interrupted'), and
  the sweep returns early, starting no new point."""
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
        os.makedirs(job.workdir, exist_ok=True)
        try:  # never through a symbolic link: it would append to the file it points to
          log = fs.open_nofollow(os.path.join(job.workdir, record_files.LOG), "a")
        except (nofollow.SymlinkRefused, OSError) as e:
          _not_started(job, e, codes)  # that point fails in one line; the sweep goes on
          continue
        slot = free.pop(0)
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
        log_path = os.path.join(job.workdir, record_files.LOG)
        reason = failure_reason(log_path, proc.returncode) if proc.returncode else None
        if reason and proc.returncode == 2 and _BUSY.search(reason):  # refused: held elsewhere
          done_cost -= job.cost
          _wait_for(job, _busy(job) or "another run", waiting)
          continue
        for point, workdir in job.runs():  # a population: every member's exit and outcome
          codes[point.name] = proc.returncode
          record_exit(workdir, proc.returncode, reason)
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


def _wait_for(job: Job, holder: str, waiting: list[Job]) -> None:
  """Puts a job whose workdir a live run holds aside until that run ends."""
  waiting.append(job)
  for point, workdir in job.runs():
    record_elsewhere(workdir, holder)
    print(
      f"[{point.index + 1}] {point.name}: running elsewhere ({holder}): waiting for it to end",
      flush=True,
    )


def _not_started(job: Job, e: Exception, codes: dict[str, int]) -> None:
  """A job whose train.log cannot be opened (a symbolic link, refused; a folder that cannot
  be written): each of its points fails with exit status 2 and one line, in sweep_point.json
  and the results row, and the sweep goes on with the others."""
  if isinstance(e, nofollow.SymlinkRefused):
    reason = f"not started: {e}"
  else:
    where = getattr(e, "filename", None) or os.path.join(job.workdir, record_files.LOG)
    reason = f"not started: {where} cannot be written: {getattr(e, 'strerror', None) or e}"
  for point, workdir in job.runs():
    codes[point.name] = 2
    record_exit(workdir, 2, reason)
    print(f"[{point.index + 1}] {point.name}: failed ({reason})", flush=True)


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
