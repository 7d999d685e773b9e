"""A point's record, its sweep_point.json, and what its folder holds: the exit status and, for
a failed process, why (`failure_reason`: exit status, last error line of its train.log;
`record_exit`); a live run holding its workdir, so the point is running elsewhere, not failed
(`running_elsewhere`, `record_elsewhere`); a record rewritten when the folder holds a run
another process finished (`finished_status`, `refresh_record`); the results rows with the
failures (`with_failures`). No JAX here.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
from collections.abc import Sequence
from typing import Any

from resnorm_jax.config import cli
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files
from resnorm_jax.runs import status as run_status

POINT_FILE = record_files.POINT  # what the sweep launched in a workdir, and its exit status
LOCK_FILE = record_files.LOCK  # a run's workdir lock (resnorm_jax/runs/workdir.py)
# A run folder's summary status that ends the point (stopped_early: by its stop rule; a sweep
# without the rule resumes it, sweeps.grid.run_state).
FINISHED = (run_status.COMPLETED, run_status.DIVERGED, run_status.STOPPED_EARLY)
# The line of a failed run's log that says why: cli.fail's `error: ...`, a traceback's last
# line (`ValueError: ...`, `jax.errors.JaxRuntimeError: ...`), absl's FATAL.
_ERROR_LINE = re.compile(r"^(error: |FATAL|(\w+\.)*\w*(Error|Exception|Interrupt|Exit)\b)")


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
  """The status of a finished run in `workdir` (completed, diverged, stopped_early), else
  None."""
  summary = read_json(os.path.join(workdir, record_files.SUMMARY))
  status = summary.get("status") if isinstance(summary, dict) else None
  return status if status in FINISHED else None


def refresh_record(workdir: str) -> bool:
  """Writes the finished run's status into a point's sweep_point.json; True when the record
  said otherwise (a failure, "running elsewhere": the run was finished by another process,
  e.g. a child that outlived its sweep) and was rewritten from the folder. A record of a clean
  exit only gains its status: False."""
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
  return stale


def refresh_records(sweep_dir: str) -> list[str]:
  """refresh_record for every point folder of `sweep_dir`; the names of those rewritten."""
  names = sorted(os.listdir(sweep_dir)) if os.path.isdir(sweep_dir) else []
  return [n for n in names if refresh_record(os.path.join(sweep_dir, n))]


def record_elsewhere(workdir: str, holder: str) -> None:
  path = os.path.join(workdir, POINT_FILE)
  info = read_json(path) or {}
  for key in ("returncode", "error"):
    info.pop(key, None)
  info["running_elsewhere"] = holder
  cli.write_json(path, info)


def record_exit(workdir: str, returncode: int, reason: str | None = None) -> None:
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
      new[k] = run_status.FAILED if k == "outcome" and failed and v in ("pending", "unknown") else v
      if k == "outcome":
        new["exit_code"] = code
        new["error"] = point.get("error") if failed else None
    out.append(new)
  return out
