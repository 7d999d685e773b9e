"""A run's I/O faults (a full disk, a failed checkpoint save, a file that cannot be written):
caught, kept and told in one line, with metrics.jsonl cut back to the checkpoint the run
resumes from. The single run (loop.py) and the population (population/run.py) share them."""

from __future__ import annotations

import contextlib
import os

from resnorm_jax.runs import metrics_file, record_files
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import io_errors

EXIT_FAILED = 1  # the run failed (an I/O fault); 2 is bad input


class RunFailed(RuntimeError):
  """An I/O fault before training started (writing config.json, the checkpoint folder)."""


class IOFaults:
  """The first I/O fault of a run's training or clean-up (a full disk, a failed save)."""

  def __init__(self):
    self.error: BaseException | None = None

  @contextlib.contextmanager
  def caught(self):
    try:
      yield
    except (ckpt_lib.SaveFailed, OSError) as e:
      if self.error is None:
        self.error = e

  def close(self, close_fn) -> None:
    """Calls close_fn (an ExitStack callback); its I/O fault is kept, not raised."""
    with self.caught():
      close_fn()

  def path(self) -> str | None:
    """The file or folder the fault names: an OSError's file, a failed save's folder."""
    if isinstance(self.error, ckpt_lib.SaveFailed):
      return self.error.directory
    cause = io_errors.os_error(self.error) if self.error is not None else None
    return os.fspath(cause.filename) if cause is not None and cause.filename else None

  def message(self, workdir: str, owner: tuple[str, str] | None = None) -> str:
    """The fault in one line; `owner` (name, workdir): the population member whose file it
    was, when that is not the member `workdir` is (one program stops them all)."""
    if isinstance(self.error, ckpt_lib.SaveFailed):
      text = str(self.error)
    else:
      where = owner[1] if owner else workdir
      text = io_errors.describe_io_error(self.error, where, "writing the run's files")
    if owner:
      text = f"stopped with member {owner[0]} (one program trains the population): {text}"
    return text


def cut_back_to_checkpoint(
  summary: dict, checkpointer, faults, workdir: str, is_main: bool, owner=None
) -> None:
  """After an I/O fault: the summary and metrics.jsonl say what the workdir holds, the newest
  saved checkpoint, and one line says why the run stopped and where it resumes (`owner`: the
  population member whose file the fault was, IOFaults.message)."""
  final_step = summary["steps"]
  saved = checkpointer.committed_steps()
  summary["steps"] = saved[-1] if saved else 0
  summary["failed_at_step"] = final_step
  if is_main:
    with contextlib.suppress(OSError):
      metrics_file.cut_metrics(os.path.join(workdir, record_files.METRICS), summary["steps"])
  print(
    f"error: {faults.message(workdir, owner)}; the run stops at step {final_step}: free space, "
    f"then the same command resumes from step {summary['steps']}",
    flush=True,
  )
