"""Orbax checkpoints in <workdir>/ckpt: async save, resume from the latest good one, refuse a
changed experiment.

Each step directory holds `state` (the TrainState pytree: step, params, optimizer state,
non-trainable model state) and `meta` (JSON: the config the state belongs to, the loop's
bookkeeping, and a table of every state leaf with its shape, dtype and a fingerprint). The
data order is a pure function of (seed, step), so the step is the only "RNG state" a
resumed run needs.

Orbax (local disk) writes a step into `<step>.orbax-checkpoint-tmp-*` and renames it when
complete, with `commit_success.txt` inside. Orbax checksums neither array bytes nor JSON: a
flipped bit in a data file restores silently, one in `meta` turns a best eval loss of 4.4561
into 0.4561. So a restore is accepted only if the step directory holds its commit marker,
`meta` parses and matches the sha256 it carries (META_CHECKSUM), the step it and the state
record is the folder's (STEP: a renamed folder is damage), and every restored leaf has
the fingerprint recorded at save time (checkpoint_integrity.py); otherwise the step is
reported, moved to `ckpt/damaged/`, and the previous step is tried. What `meta` records for
the resumed run and which checkpoints a run refuses to resume: resume_policy.py.

`meta` also records the program that wrote the state (WRITTEN_BY): a single run by default,
a population's member with its size and slot (population_points.check_writer: a member goes
on bit for bit only in the program that wrote it). A checkpoint without it was written before
it was recorded: the writer is unknown.
"""

from __future__ import annotations

import os
import time

import jax
import orbax.checkpoint as ocp
from etils import epath

from resnorm_jax.train.checkpoint_integrity import check_meta, leaf_table, sealed
from resnorm_jax.train.io_errors import describe_io_error
from resnorm_jax.train.orbax_quiet import (
  _ORBAX_ERRORS,
  _quiet_orbax_tracebacks,
  one_line,
)
from resnorm_jax.train.resume_policy import check_compatible, check_same_data
from resnorm_jax.train.train_step import TrainState

COMMIT_MARKER = "commit_success.txt"  # orbax's, written before the final rename
TMP_MARKER = ".orbax-checkpoint-tmp"
DAMAGED_DIR = "damaged"
WRITTEN_BY = "written_by"  # meta: the program that wrote the state
SINGLE_RUN = {"program": "experiments.train"}
STEP = "step"  # meta: the step of the state, as saved (the folder's name may have changed)


def absolute(path: str) -> str:
  """A local path made absolute; a URL (gs://bucket/...) as given (abspath would mangle it)."""
  return path if "://" in path else os.path.abspath(path)


class CheckpointError(ValueError):
  """Checkpoints exist but none can be used: a bad workdir, reported like bad input."""


class SaveFailed(RuntimeError):
  """A checkpoint could not be written (a full disk, an I/O error): the run has failed, not
  its input. The message is one line: the step, the file, the reason, the free space."""

  def __init__(self, step: int | None, error: BaseException, directory: str):
    self.step, self.error, self.directory = step, error, directory
    super().__init__(describe_io_error(error, directory, f"saving the checkpoint of step {step}"))


def _handlers() -> ocp.handlers.DefaultCheckpointHandlerRegistry:
  """`state`: a pytree of jax arrays; `meta`: JSON.

  Replica-parallel saving (orbax's default) splits each replicated array into per-device
  slices, compiling a slice op per leaf on the first save (seconds of blocking even for the
  smoke model: docs/benchmarks.md, section 7); it only pays off when several hosts share the
  writing, so it is on only for multi-process runs.
  """
  arrays = ocp.type_handlers.ArrayHandler(use_replica_parallel=jax.process_count() > 1)
  types = ocp.type_handlers.create_type_handler_registry((jax.Array, arrays))
  state = ocp.PyTreeCheckpointHandler(type_handler_registry=types)
  registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
  registry.add("state", ocp.args.PyTreeSave, state)
  registry.add("state", ocp.args.PyTreeRestore, state)
  registry.add("meta", ocp.args.JsonSave, ocp.JsonCheckpointHandler())
  registry.add("meta", ocp.args.JsonRestore, ocp.JsonCheckpointHandler())
  return registry


class _Manager(ocp.CheckpointManager):
  """orbax's manager, minus its own questions to JAX's preemption sync point.

  The protocol takes the last step each process asked about as that process's position;
  orbax asks from its save-finalize thread with the step it just wrote, possibly behind the
  training loop, and the agreed stop step could then be one the loop has already passed
  (no stop, or some processes stop and the others wait). The loop alone asks, every step
  (resnorm_jax/train/preemption.py); saves are forced when it stops.
  """

  def reached_preemption(self, step: int) -> bool:
    return False


class Checkpointer:
  """CheckpointManager wrapper: async save, latest-good restore with fallback."""

  def __init__(
    self,
    directory: str,
    *,
    keep: int = 2,
    async_save: bool = True,
    written_by: dict | None = None,
  ):
    self.directory = absolute(directory)  # a local folder or gs://..., through etils.epath
    self.written_by = dict(written_by or SINGLE_RUN)  # recorded in each save's meta
    self.save_seconds: list[float] = []  # time each save() blocked the caller
    self.saving: int | None = None  # the step of a save started and not yet seen to finish
    self.failed: SaveFailed | None = None
    _refuse_non_folder(self.directory)
    _quiet_orbax_tracebacks()
    self.unfinished = _unfinished(self.directory)  # saves cut short by a kill: removed now
    for name in self.unfinished:
      print(f"removing unfinished checkpoint {name} (its save was cut short)", flush=True)
    self.manager = _Manager(
      self.directory,
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max(1, keep),
        enable_async_checkpointing=async_save,
        create=True,
        cleanup_tmp_directories=True,
      ),
      handler_registry=_handlers(),
    )

  def save(self, state: TrainState, meta: dict, *, force: bool = False) -> bool:
    """Starts saving `state` at its step: blocks for the device-to-host copy, writes async.

    SaveFailed when this save, or the previous one still being written, fails."""
    start = time.perf_counter()
    step = int(jax.device_get(state.step))
    self.wait()  # orbax waits for the previous save anyway: its error is its own
    if step in self.manager.all_steps():
      return False
    meta = {**meta, STEP: step, WRITTEN_BY: self.written_by, "leaves": leaf_table(state)}
    meta = sealed(meta)
    self.saving = step
    try:
      saved = self.manager.save(
        step,
        args=ocp.args.Composite(state=ocp.args.PyTreeSave(state), meta=ocp.args.JsonSave(meta)),
        force=force,
      )
    except Exception as e:  # noqa: BLE001 - a failed write, whatever orbax wraps it in
      self._fail(e)
    self.save_seconds.append(time.perf_counter() - start)
    return saved

  def _fail(self, e: BaseException):
    self.failed = SaveFailed(self.saving, e, self.directory)
    _ORBAX_ERRORS.reported()  # the line SaveFailed makes says it
    self.saving = None
    raise self.failed from e

  def wait(self) -> None:
    """Waits for the save in flight; SaveFailed if it failed."""
    if self.saving is None:
      return
    try:
      self.manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001
      self._fail(e)
    self.saving = None

  def check(self) -> None:
    """SaveFailed if the save in flight has ended and failed; never waits. The loop asks
    after every step, so a failed save stops the run at the step after it ended, not a
    whole checkpoint interval later."""
    if self.saving is not None and not self.manager.is_saving_in_progress():
      self.wait()

  def committed_steps(self) -> list[int]:
    """The steps whose save completed (the ones a resumed run can start from)."""
    root = epath.Path(self.directory)
    return [s for s in saved_steps(self.directory) if (root / str(s) / COMMIT_MARKER).exists()]

  def steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def _read_meta(self, step: int) -> dict:
    if not (epath.Path(self.directory) / str(step) / COMMIT_MARKER).exists():
      raise FileNotFoundError(f"no {COMMIT_MARKER}: the checkpoint was never committed")
    meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    meta = dict(meta["meta"])
    check_meta(meta)
    check_step(meta.get(STEP), step)
    return meta

  def restore_latest(
    self, abstract_state: TrainState, config_dict: dict | None = None, data_files=None
  ):
    """(state, meta, step) of the newest checkpoint that reads back intact, or None if none.

    Raises ValueError when the checkpoint belongs to a different experiment (a changed
    frozen key, or a state whose leaves differ from this config's), naming the changed
    keys, or to other data (`data_files`, this run's data fingerprint, against the one the
    checkpoint recorded: a checkpoint from before fingerprints is not compared). A damaged
    checkpoint (uncommitted, truncated, corrupted) is reported, moved to
    ckpt/damaged/, and the previous one is tried; if checkpoints exist but none is intact,
    raises CheckpointError: never a silent start from scratch.
    """
    steps = self.steps()
    damaged: list[tuple[int, str]] = []

    def report(step: int, e: Exception) -> None:
      _ORBAX_ERRORS.reported()  # the line below says it
      msg = one_line(e)
      print(
        f"WARNING: checkpoint at step {step} is damaged ({msg}); trying the previous one",
        flush=True,
      )
      damaged.append((step, msg))

    for step in reversed(steps):
      try:
        meta = self._read_meta(step)
      except Exception as e:  # noqa: BLE001 - any read failure means "damaged"
        report(step, e)
        continue
      if config_dict is not None:
        check_compatible(meta, config_dict, abstract_state, self.directory)
      if data_files and meta.get("data_files"):
        check_same_data(meta, data_files, self.directory, step)
      try:
        restored = self.manager.restore(
          step,
          args=ocp.args.Composite(
            state=ocp.args.PyTreeRestore(
              abstract_state,
              restore_args=ocp.checkpoint_utils.construct_restore_args(abstract_state),
            ),
            meta=ocp.args.JsonRestore(),
          ),
        )
        state = restored["state"]
        table = leaf_table(state)
        bad = [k for k, v in meta["leaves"].items() if table.get(k) != v]
        if bad:
          raise ValueError(f"{len(bad)} leaves differ from their saved fingerprint: {bad[:3]}")
        check_step(int(jax.device_get(state.step)), step)  # a meta from before STEP
      except Exception as e:  # noqa: BLE001
        report(step, e)
        continue
      if damaged:
        self._quarantine([s for s, _ in damaged])
        print(
          f"resuming from step {step}, the newest intact checkpoint, after skipping damaged "
          f"step(s) {[s for s, _ in damaged]} (moved to {self.directory}/{DAMAGED_DIR}/)",
          flush=True,
        )
      return state, meta, step
    if steps:
      raise CheckpointError(
        f"none of the checkpoints in {self.directory} (steps {steps}) is intact: "
        + "; ".join(f"step {s}: {m}" for s, m in damaged)
        + ". Use a new --workdir to start from scratch."
      )
    return None

  def _quarantine(self, steps: list[int]) -> None:
    """Moves damaged step dirs aside (kept for inspection), so new saves can take the step."""
    self.manager.wait_until_finished()
    if jax.process_index() == 0:
      dest_root = epath.Path(self.directory) / DAMAGED_DIR
      dest_root.mkdir(parents=True, exist_ok=True)
      for step in steps:
        dest = dest_root / f"{step}-{time.strftime('%Y%m%d-%H%M%S')}"
        (epath.Path(self.directory) / str(step)).rename(dest)
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils

      multihost_utils.sync_global_devices("resnorm_jax:checkpoint_quarantine")
    self.manager.reload()

  def close(self) -> None:
    """Waits for the save in flight (SaveFailed if it failed) and closes; after a failed save
    only closes (orbax raises the same error again at every wait)."""
    try:
      if self.failed is None:
        self.wait()
    finally:
      try:
        self.manager.close()
      except Exception:  # noqa: BLE001 - after a failed save, the same error again
        if self.failed is None:
          raise
      finally:
        if self.failed is None:
          _ORBAX_ERRORS.release()  # an error no line of the run's has said
        else:
          _ORBAX_ERRORS.reported()


def _refuse_non_folder(directory: str) -> None:
  """CheckpointError (bad input, exit status 2) when the checkpoint folder's path holds a
  file: the run trained to its first save and then failed advising to free space."""
  if "://" in directory or not os.path.lexists(directory) or os.path.isdir(directory):
    return
  what = "a symbolic link to no folder" if os.path.islink(directory) else "a file"
  raise CheckpointError(
    f"{directory} is {what}, not the run's checkpoint folder: move it away (nothing of the "
    "run is in it) and run the same command again"
  )


def check_step(saved: int | None, folder: int) -> None:
  """ValueError (damage) when the step a checkpoint holds is not its folder's name: a folder
  renamed 30 -> 40 resumed "from step 40" with the state of step 30. None: not recorded."""
  if saved is not None and saved != folder:
    raise ValueError(
      f"it holds the state of step {saved}, not {folder}: the folder was renamed or copied "
      "from another step"
    )


def saved_steps(directory: str) -> list[int]:
  """The step folders in a checkpoint directory (intact or not); nothing is created."""
  path = epath.Path(directory)
  if not path.is_dir():
    return []
  return sorted(int(p.name) for p in path.iterdir() if p.name.isdigit())


def _unfinished(directory: str) -> list[str]:
  path = epath.Path(directory)
  if not path.is_dir():
    return []
  return sorted(p.name for p in path.iterdir() if TMP_MARKER in p.name)
