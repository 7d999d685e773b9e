"""What a run reports while it trains and when it ends: RunLog keeps the losses, evals,
rates and times of every segment (what a checkpoint keeps and summary.json reports) and writes
each step's record; end_message is the end line. The single run (loop.py) and the population
(population/run.py) share them."""

from __future__ import annotations

import collections
import contextlib
import math
import time
from collections.abc import Sequence

import jax
import numpy as np
from ml_collections import ConfigDict

from resnorm_jax.runs.end_line import progress_line
from resnorm_jax.train.writers import MetricWriter

# The ETA's rate: the logged intervals of at least the last ETA_WINDOW_STEPS steps, so one
# slow or fast interval (another process on the core, a log_every of 10) does not swing it.
ETA_WINDOW_STEPS = 100


def eta_seconds(recent: Sequence[tuple[float, int]], remaining: int) -> float:
  """Seconds for `remaining` steps at the rate of the newest (seconds, steps) intervals that
  hold at least ETA_WINDOW_STEPS steps (all of them when fewer)."""
  seconds = steps = 0
  for dt, k in reversed(recent):
    seconds, steps = seconds + dt, steps + k
    if steps >= ETA_WINDOW_STEPS:
      break
  return remaining * seconds / max(steps, 1)


class RunLog:
  """What a run records as it goes: interval losses, timers, best and last eval, summary.

  Throughput counts training only: time spent in `paused()` (evals, saves, drawing the
  depth images) is taken out of the interval it falls in.
  """

  def __init__(
    self,
    config: ConfigDict,
    schedule,
    writer: MetricWriter,
    resumed: dict,
    interval,
    save_seconds: Sequence[float] = (),
  ):
    self.t = config.train
    self.schedule = schedule
    self.writer = writer
    self.tokens_per_step = self.t.batch_size * self.t.seq_len
    self.interval_losses: list[float] = list(interval)  # exact floats across a resume
    self.last_train = resumed.get("final_train_loss")
    best = resumed.get("best_eval_loss")
    self.best_eval = math.inf if best is None else best
    self.last_eval = resumed.get("final_eval_loss")
    self.last_eval_tokens = resumed.get("final_eval_tokens")
    self.periodic_eval = resumed.get("periodic_eval_loss")  # the last one, beside its best
    self.periodic_eval_tokens = resumed.get("periodic_eval_tokens")
    # Eval losses by step, measured when that step's state exists and written with that
    # step's row; the end-of-run eval (final_eval_tokens) apart.
    self.evals: dict[int, float] = {}
    self.final_evals: dict[int, float] = {}
    self.train_time, self.timed_steps = 0.0, 0
    self.recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=256)
    self.t_last = time.time()
    # Wall and compile time of the whole run: the earlier segments' (from the checkpoint)
    # plus this one's, which the loop sets (wall_start, compile_seconds).
    # Training time and timed steps likewise: the rate of every segment, so a summary rebuilt
    # from a checkpoint at the last step (no step timed now) keeps the run's rate.
    # Likewise the time checkpoint saves blocked the loop: `save_seconds` is this segment's
    # checkpointer's list (Checkpointer.save_seconds), read as it grows.
    earlier = ("wall_seconds", "compile_seconds", "train_seconds", "timed_steps")
    earlier += ("checkpoint_blocking_seconds",)
    self.earlier = {k: resumed.get(k) or 0.0 for k in earlier}
    self.save_seconds = save_seconds
    # The step and writer of a checkpoint another program (a population) wrote, when this
    # run went on from it: its losses after that step are not bit for bit that program's.
    self.continued_from = resumed.get("continued_from")
    # Each time the run was extended to a larger train.steps (resume_policy.extension).
    self.extended = resumed.get("extended")
    self.wall_start, self.compile_seconds = time.time(), 0.0

  @contextlib.contextmanager
  def paused(self):
    """Time spent inside is not training time."""
    t0 = time.time()
    try:
      yield
    finally:
      self.t_last += time.time() - t0

  def record_eval(self, n: int, loss: float, batches: int, *, final: bool = False) -> None:
    """A held-out loss at step n on `batches` batches (final: the end-of-run eval)."""
    (self.final_evals if final else self.evals)[n] = loss
    self.last_eval, self.last_eval_tokens = loss, self.tokens_per_step * batches
    if not final:
      self.best_eval = min(self.best_eval, loss)
      self.periodic_eval, self.periodic_eval_tokens = loss, self.last_eval_tokens

  def record_step(self, n: int, metrics) -> bool:
    """Reads step n's metrics (n steps done); logs at intervals; False on divergence."""
    loss, gnorm = float(metrics["loss"]), float(metrics["grad_norm"])
    if not (math.isfinite(loss) and math.isfinite(gnorm)):
      what = "loss" if not math.isfinite(loss) else "gradient"
      print(f"step {n}: non-finite {what} (loss {loss}, grad norm {gnorm}): diverged", flush=True)
      if self.interval_losses:  # the finite steps since the last logged row: the latest loss
        self.last_train = float(np.mean(self.interval_losses))
      self.writer.write(n, {"train/loss": loss, "grad_norm": gnorm})
      return False
    self.interval_losses.append(loss)
    if n % self.t.log_every == 0 or n in self.evals or n == self.t.steps:
      self._log_interval(n, metrics)
    return True

  def _log_interval(self, n: int, metrics) -> None:
    """Writes step n's row (the interval's mean loss, its speed, step n's metrics)."""
    now = time.time()
    dt, k = now - self.t_last, len(self.interval_losses)
    self.t_last = now
    self.train_time, self.timed_steps = self.train_time + dt, self.timed_steps + k
    self.recent.append((dt, k))
    self.last_train = float(np.mean(self.interval_losses))
    self.interval_losses.clear()
    row = {
      "train/loss": self.last_train,
      "lr": float(self.schedule(n - 1)),
      "tokens_per_second": k * self.tokens_per_step / max(dt, 1e-9),
      "step_seconds": dt / max(k, 1),
      "tokens": n * self.tokens_per_step,
    }
    row.update({key: v for key, v in jax.device_get(metrics).items() if key != "loss"})
    if n in self.evals:
      row["eval/loss"] = self.evals.pop(n)
    if n in self.final_evals:
      row["eval/final_loss"] = self.final_evals.pop(n)
    with (
      self.paused(),
      naming_write_errors(self.writer),
    ):  # drawing the depth images is not training time
      self.writer.write(n, row)
    eta = eta_seconds(self.recent, self.t.steps - n)
    line = progress_line(n, self.t.steps, self.last_train, row.get("eval/loss"), row["lr"],
                         row["tokens_per_second"], eta)  # fmt: skip
    print(line, flush=True)

  def results(self) -> dict:
    """The losses so far: what a checkpoint keeps and the summary reports. final_eval_loss:
    the last eval, at the last step the end-of-run one (final_eval_tokens tokens);
    best_eval_loss and periodic_eval_loss: the best and the last periodic eval (the
    eval/loss curve, periodic_eval_tokens tokens)."""
    return {
      "final_train_loss": self.last_train,
      "final_eval_loss": self.last_eval,
      "best_eval_loss": None if math.isinf(self.best_eval) else self.best_eval,
      "final_eval_tokens": self.last_eval_tokens,
      "periodic_eval_loss": self.periodic_eval,
      "periodic_eval_tokens": self.periodic_eval_tokens,
    }

  def totals(self) -> dict:
    """Wall, compile, train and checkpoint-blocking seconds of the whole run so far, every
    segment of it (and, where a
    segment went on from another program's checkpoint, `continued_from`; where the run was
    extended, `extended`)."""
    totals = {
      "wall_seconds": self.earlier["wall_seconds"] + time.time() - self.wall_start,
      "compile_seconds": self.earlier["compile_seconds"] + self.compile_seconds,
      "train_seconds": self.earlier["train_seconds"] + self.train_time,
      "timed_steps": int(self.earlier["timed_steps"]) + self.timed_steps,
      "checkpoint_blocking_seconds": (
        self.earlier["checkpoint_blocking_seconds"] + sum(self.save_seconds)
      ),
    }
    if self.continued_from is not None:
      totals["continued_from"] = self.continued_from
    if self.extended:
      totals["extended"] = self.extended
    return totals

  def tokens_per_second(self) -> float | None:
    """Training throughput over every segment of the run (evals and saves excluded)."""
    totals = self.totals()
    if not totals["train_seconds"]:
      return None
    return totals["timed_steps"] * self.tokens_per_step / totals["train_seconds"]


@contextlib.contextmanager
def naming_write_errors(writer: MetricWriter):
  """A write error without a file name (a full disk: file.write says only ENOSPC) names
  metrics.jsonl, the file the writer writes on the caller's thread."""
  try:
    yield
  except OSError as e:
    if e.filename is None and getattr(writer, "path", None):
      e.filename = writer.path
    raise
