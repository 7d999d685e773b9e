"""One run per workdir, and one experiment: the workdir lock and what a workdir already holds.

The lock is `fcntl.flock` on <workdir>/.lock, held for the run's life. The kernel releases it
when its process ends, however it ends (kill -9 included), so a lock left by a dead run
never blocks the resume; while held the file names the holder (host, pid, start time) to a
second run, which is refused. flock needs a mounted folder (local, or NFS with lock
support): a URL workdir (gs://...) is not locked. No JAX here: with several processes the
loop has process 0 lock alone.

The experiment a workdir holds is its config.json, compared with this run's config by the
sweeps' rule with the name counted (same_experiment.WORKDIR): a rerun may only extend the
run (train.steps) or change how it executes (the mesh, remat, scan unroll). A completed
run is recognised from summary.json, so a workdir whose ckpt/ is gone is never retrained.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

from etils import epath

from resnorm_jax.config import same_experiment
from resnorm_jax.data import fs
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files, status
from resnorm_jax.runs.workdir_lock import (
  _NO_LOCKING,
  _UNLOCKABLE,
  WorkdirInUse,
  _read_text,
  _try_lock,
  describe_holder,
  holder,
  lockable,
)

LOCK_FILE = record_files.LOCK
# Errors meaning the folder cannot be made or written at all: bad input (exit 2), not a fault.
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST)


class NotWritable(ValueError):
  """The workdir cannot be made or written: bad input (exit status 2), unless it already holds
  the run completed (nothing to write: loop.py says so)."""


def not_writable(workdir: str, e: OSError) -> NotWritable:
  """The bad-input error of a workdir that cannot be made or written (`e` says why)."""
  where = f" ({e.filename})" if e.filename and e.filename != workdir else ""
  return NotWritable(f"--workdir={workdir} cannot be written: {e.strerror or e}{where}")


# What a run's folder may hold: the files and folders a run, its sweep point and its
# population write (record_files), their temporary files, TensorBoard's event files, and the
# curve excerpt docs/runs/ keeps of a run too long to commit.
RUN_ENTRIES = {
  record_files.CONFIG, record_files.SUMMARY, record_files.METRICS, record_files.LOG,
  record_files.POINT, record_files.LOCK, record_files.CHECKPOINTS, record_files.EVENTS,
  "curve.jsonl", "population_points.json",
}  # fmt: skip


def foreign_entries(workdir: str) -> list[str]:
  """The entries of an existing local `workdir` that no run writes, sorted (none for a
  missing folder, a remote one, or a run's own)."""
  if fs.is_remote(workdir) or not os.path.isdir(workdir):
    return []
  return sorted(
    n
    for n in os.listdir(workdir)
    if n not in RUN_ENTRIES and not n.endswith(".tmp") and not n.startswith("events.out.tfevents")
  )


def check_workdir(workdir: str, what: str = "--workdir") -> None:
  """ValueError for a workdir that names no folder of its own: empty or the current folder
  (`--workdir=` wrote the run's files among whatever the current folder holds), or a folder
  holding anything but a run's files (the repository's root, a sweep's folder of points: the
  run's files would be mixed with them)."""
  if not workdir.strip() or os.path.normpath(workdir) == ".":
    raise ValueError(
      f"{what}={workdir!r} names no run folder (the run would be written into the current "
      "folder): give a folder of its own, or leave --workdir out for "
      "runs/<name>-<overrides>-<time>"
    )
  package = fs.missing_filesystem(workdir)
  if package:
    raise ValueError(
      f"{what}={workdir!r}: a {workdir.split('://')[0]}:// folder needs {package}, which is not "
      f"installed (pip install {package})"
    )
  foreign = foreign_entries(workdir)
  if foreign:
    shown = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
    raise ValueError(
      f"{what}={workdir!r} holds what no run writes ({shown}): a run's files would be mixed "
      "with them; give a folder of its own (a new one, or one a run wrote)"
    )


def make_writable(workdir: str) -> None:
  """Creates `workdir` (and its parents); ValueError when it cannot be made: a read-only
  disk, no permission, a file in its place."""
  try:
    epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  except OSError as e:
    if e.errno in _NOT_WRITABLE:
      raise not_writable(workdir, e) from None
    raise


@contextlib.contextmanager
def hold(workdir: str) -> Iterator[str | None]:
  """Holds <workdir>/.lock for the block (yields its path; None where nothing is locked).

  Raises WorkdirInUse, naming the holder, while a live process holds it. The file is
  removed on release (a run that was killed leaves it, unlocked: the next run takes it).
  """
  if not lockable(workdir):
    print(f"note: {workdir} is not a local folder: not locked against a second run", flush=True)
    yield None
    return
  path = os.path.join(workdir, LOCK_FILE)
  try:
    fd = _try_lock(path)
  except OSError as e:
    if e.errno in _NOT_WRITABLE:  # the lock file is the run's first write in the folder
      raise not_writable(workdir, e) from None
    if e.errno == errno.EISDIR:  # something made a folder where the lock file goes
      raise ValueError(
        f"{path} is a folder, not the run's lock file: remove it (nothing of the run is in "
        "it) and run the same command again"
      ) from None
    if e.errno not in _NO_LOCKING:
      raise
    print(f"note: the filesystem of {workdir} cannot lock ({e.strerror}): not locked", flush=True)
    fd = _UNLOCKABLE
  if fd == _UNLOCKABLE:
    yield None
    return
  if fd is None:
    raise WorkdirInUse(
      f"{workdir} is in use by another run ({describe_holder(_read_text(path))}): "
      "wait for it to end, or use another --workdir"
    )
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder()).encode(), 0)
    refuse_linked_run_files(workdir)  # before anything is written or compiled: exit 2
    yield path
  finally:
    # Removed while still locked: a process that opened it meanwhile sees the inode change.
    with contextlib.suppress(OSError):
      os.remove(path)
    os.close(fd)  # releases the flock


# Files a run writes in its workdir, each through fs.open_nofollow (or a temporary file
# renamed): a symbolic link at any of them is refused when the run starts.
RUN_FILES = (
  record_files.CONFIG,
  record_files.CONFIG + ".tmp",
  record_files.SUMMARY,
  record_files.SUMMARY + ".tmp",
  record_files.METRICS,
)


def refuse_linked_run_files(workdir: str) -> None:
  """nofollow.SymlinkRefused (bad input, exit status 2, one line) when a file the run writes in
  `workdir` is a symbolic link: writing through it would overwrite the file it points to."""
  for name in RUN_FILES:
    fs.refuse_symlink(os.path.join(workdir, name))


# --- what the workdir already holds ----------------------------------------------------------


def describe_changes(keys: list[str], recorded: Mapping[str, Any], config: Mapping[str, Any]):
  """`name ('a' -> 'b'), opt.lr (0.001 -> 0.002)`: each key's recorded and new value (a key
  the record lacks: '<absent>')."""
  have = same_experiment.in_todays_keys(recorded)
  want = same_experiment.flatten(config)
  absent = same_experiment.ABSENT
  return ", ".join(f"{k} ({have.get(k, absent)!r} -> {want.get(k, absent)!r})" for k in keys)


def check_same_experiment(workdir: str, config: Mapping[str, Any]) -> None:
  """Raises ValueError, naming the keys, if `workdir` holds another experiment than `config`
  (a plain dict); a workdir without config.json holds none."""
  recorded = read_json(os.path.join(workdir, record_files.CONFIG))
  if not isinstance(recorded, dict):
    return
  keys = same_experiment.changed_keys(recorded, config, same_experiment.WORKDIR)
  if keys:
    raise ValueError(
      f"{workdir} holds another experiment (its config.json); differing keys: "
      f"{describe_changes(keys, recorded, config)}. Use a new --workdir."
    )


def checkpoint_record(workdir: str) -> tuple[int, dict] | None:
  """(step, meta) of the newest committed checkpoint in <workdir>/ckpt whose meta reads back
  as a JSON object recording its step as the folder's (a meta from before steps were recorded
  is taken), else None: what the run there was (its full config, `config`) when config.json
  is lost. Read as JSON, without JAX or orbax (checkpoint.py's layout: <step>/meta/metadata
  and orbax's commit marker); the resume still restores the checkpoint and checks it whole."""
  root = epath.Path(workdir, record_files.CHECKPOINTS)
  try:
    steps = sorted((int(p.name) for p in root.iterdir() if p.name.isdigit()), reverse=True)
  except OSError:
    return None
  for step in steps:
    folder = root / str(step)
    try:
      if not (folder / "commit_success.txt").exists():
        continue
      meta = json.loads((folder / "meta" / "metadata").read_text())
    except (OSError, ValueError):
      continue
    if isinstance(meta, dict) and meta.get("step", step) == step:
      return step, meta
  return None


def recorded_config(workdir: str) -> tuple[dict | None, str]:
  """(the config of the run in `workdir` as {dotted key: value}, where it was read): its
  config.json, else the full config its newest checkpoint recorded; (None, '') when neither
  can be read. The checkpoint's `data_fingerprint` is left out (the data is checked on
  restore, against its files)."""
  recorded = read_json(os.path.join(workdir, record_files.CONFIG))
  if isinstance(recorded, dict):
    return same_experiment.in_todays_keys(recorded), record_files.CONFIG
  record = checkpoint_record(workdir)
  config = record[1].get("config") if record else None
  if not isinstance(config, dict) or not config:
    return None, ""
  flat = same_experiment.in_todays_keys(config)
  flat.pop("data_fingerprint", None)
  return flat, f"checkpoint of step {record[0]}"


def completed_summary(workdir: str, steps: int, *, has_checkpoint: bool) -> dict | None:
  """The summary of the run completed in `workdir` at `steps` (nothing to do), else None.

  Raises ValueError for a completed run to be trained to another length with no checkpoint
  to continue from (never a silent restart from step 0 over its files), and for a shorter
  length than it was completed at (never a config.json rewritten to a length it did not run).
  """
  path = os.path.join(workdir, record_files.SUMMARY)
  summary = read_json(path)
  if not isinstance(summary, dict) or summary.get("status") != status.COMPLETED:
    return None
  check_summary_times(summary, path)
  done = summary.get("steps")
  if done == steps:
    return summary
  if isinstance(done, int) and steps < done:
    # a run is not shortened: its files stay those of the longer run it is
    raise ValueError(
      f"{workdir} holds a run completed at step {done}: train.steps={steps} is shorter and "
      f"cannot shorten it (train.steps={done} reads it as it is, a larger value extends it; "
      "for a shorter run, use a new --workdir)."
    )
  if not has_checkpoint:
    raise ValueError(
      f"{workdir} holds a run completed at step {done} but no checkpoint to train it to "
      f"step {steps} from (its ckpt/ folder is gone or empty): train.steps={done} leaves it "
      "as it is; to train again from step 0, use a new --workdir."
    )
  return None  # extended from its checkpoint


# The times and rate a summary records (seconds, tokens per second): a finished run's are read
# back and printed as they are, so one that is no number >= 0 is refused, not printed.
SUMMARY_TIMES = (
  "wall_seconds", "train_seconds", "compile_seconds", "checkpoint_blocking_seconds",
  "tokens_per_second",
)  # fmt: skip


def check_summary_times(summary: dict, path: str) -> None:
  """ValueError naming the first time of a finished run's `summary` (read from `path`) that
  is not a finite number >= 0 (Infinity, NaN, a string: hand-edited or damaged)."""
  for key in SUMMARY_TIMES:
    value = summary.get(key)
    if value is None:
      continue
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
      raise ValueError(
        f"{path}: {key}={value!r} is not a number >= 0 (hand-edited or damaged): put the "
        "run's summary.json back, or remove it and run the same command again (it is "
        "rebuilt from the newest checkpoint)"
      )


STOPPED_EARLY = status.STOPPED_EARLY  # the status a stop rule's stop ends a run with (stop_rule.py)


def stopped_early_summary(workdir: str) -> dict | None:
  """The summary of the run in `workdir` when a stop rule stopped it and nothing ran since:
  summary.json's, or, when that is lost or older than the newest checkpoint, the checkpoint's
  (the stop saves its status and stop_* fields in the checkpoint's meta, Trainer.save). None
  when the run was not stopped, or went on from a later checkpoint (resumed without the rule,
  then killed)."""
  summary = read_json(os.path.join(workdir, record_files.SUMMARY))
  summary = summary if isinstance(summary, dict) else None
  record = checkpoint_record(workdir)
  if record is not None:
    step, meta = record
    if summary is None or summary.get("steps") != step:  # summary.json lost, or behind
      saved = meta.get("summary") if isinstance(meta.get("summary"), dict) else {}
      return {**saved, "steps": step} if saved.get("status") == STOPPED_EARLY else None
  if summary is not None and summary.get("status") == STOPPED_EARLY:
    return summary
  return None
