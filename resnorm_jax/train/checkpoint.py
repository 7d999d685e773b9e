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
`meta` parses and matches the sha256 it carries (META_CHECKSUM), and every restored leaf has
the fingerprint recorded at save time; otherwise the step is reported, moved to
`ckpt/damaged/`, and the previous step is tried.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from etils import epath

from resnorm_jax.config import cli, same_experiment
from resnorm_jax.data import data_fingerprint
from resnorm_jax.model import variants
from resnorm_jax.train.train_step import TrainState

# What a checkpoint freezes (the model, the data, the batch; remat and scan unroll may change
# on resume, e.g. to fit memory) and how a checkpoint that predates a frozen key is read: the
# policy CHECKPOINT. ADDED_KEYS: the frozen keys added after checkpoints were
# written, each with the schema's default, the value that reproduces the runs that
# predate it (every variant's own key, model.attention, data.sampling, data_fingerprint).
FROZEN_KEYS = tuple(k for k in same_experiment.FROZEN if not k.endswith("."))


def _variant_keys() -> list[str]:
  return [f"model.{name}" for name in variants.keys()]


# A run may resume a checkpoint: its frozen keys. A key the checkpoint predates reads as its
# default only for the keys listed (CHECKPOINT_ADDED and the variants' own); any other key a
# side lacks reads as None, as an unset placeholder (model.residual_alpha) does.
CHECKPOINT = same_experiment.Policy(
  only=same_experiment.FROZEN,
  ignored=same_experiment.SPEED_ONLY,
  added=same_experiment.Defaults(lambda: [*_variant_keys(), *same_experiment.CHECKPOINT_ADDED]),
  absent=None,
)
ADDED_KEYS = CHECKPOINT.added
# meta's own sha256 (over its canonical JSON without this key), and the version that has one:
# a meta without the version predates checksums and is read as before; one with the version
# but no checksum lost it (a flipped bit in the key's name) and is damaged.
META_CHECKSUM = "meta_sha256"
META_VERSION = ("meta_version", 2)
COMMIT_MARKER = "commit_success.txt"  # orbax's, written before the final rename
TMP_MARKER = ".orbax-checkpoint-tmp"
DAMAGED_DIR = "damaged"


def absolute(path: str) -> str:
  """A local path made absolute; a URL (gs://bucket/...) as given (abspath would mangle it)."""
  return path if "://" in path else os.path.abspath(path)


class CheckpointError(ValueError):
  """Checkpoints exist but none can be used: a bad workdir, reported like bad input."""


class SaveFailed(RuntimeError):
  """A checkpoint could not be written (a full disk, an I/O error): the run has failed, not
  its input. The message is one line: the step, the file, the reason, the free space."""

  def __init__(self, step: int | None, error: BaseException, directory: str):
    self.step, self.error = step, error
    super().__init__(describe_io_error(error, directory, f"saving the checkpoint of step {step}"))


def os_error(e: BaseException) -> OSError | None:
  """The OSError in an exception's chain (orbax wraps its threads' errors), if any."""
  seen = set()
  while e is not None and id(e) not in seen:
    if isinstance(e, OSError):
      return e
    seen.add(id(e))
    e = e.__cause__ or e.__context__
  return None


def free_space(path: str) -> str:
  """`12.3 MB free of 300.0 MB` on the filesystem of `path` (its nearest existing folder)."""
  if "://" in path:
    return "free space unknown (not a local folder)"
  path = os.path.abspath(path)
  while not os.path.exists(path) and os.path.dirname(path) != path:
    path = os.path.dirname(path)
  try:
    usage = shutil.disk_usage(path)
  except OSError:
    return "free space unknown"
  return f"{usage.free / 1e6:,.1f} MB free of {usage.total / 1e6:,.1f} MB"


def describe_io_error(e: BaseException, directory: str, doing: str) -> str:
  """`<doing> failed: No space left on device (writing FILE); 0.0 MB free of 1.0 MB on DIR`."""
  cause = os_error(e)
  if cause is None:
    reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
  else:
    reason = cause.strerror or str(cause)
    if cause.filename:
      reason += f" (writing {cause.filename})"
  return f"{doing} failed: {reason}; {free_space(directory)} on the disk of {directory}"


class _NoTracebacks(logging.Filter):
  """Orbax logs every failure of a background save or restore with its traceback (hundreds
  of lines per fault, TensorStore's longer still); the run reports the fault in one line of
  its own, so orbax's records keep their message and lose the traceback."""

  def filter(self, record: logging.LogRecord) -> bool:
    if "orbax" in record.pathname and record.exc_info:
      record.exc_info, record.exc_text = None, None
    return True


def _quiet_orbax_tracebacks() -> None:
  absl_logger = logging.getLogger("absl")
  if not any(isinstance(f, _NoTracebacks) for f in absl_logger.filters):
    absl_logger.addFilter(_NoTracebacks())


def flat_config(config_dict: dict) -> dict[str, Any]:
  """A config (as a plain dict) as {dotted.key: JSON value}."""
  return same_experiment.flatten(config_dict)


def frozen_config(config_dict: dict) -> dict[str, Any]:
  """The part of a config (as a plain dict) that a resumed run must not change (each frozen
  key present, None where the config lacks it)."""
  flat = flat_config(config_dict)
  compared = CHECKPOINT.compares
  keep = {k: v for k, v in flat.items() if k not in FROZEN_KEYS and compared(k)}
  keep.update({k: flat.get(k) for k in FROZEN_KEYS})
  return keep


def run_meta(
  config_dict: dict,
  interval_losses: list[float],
  summary: dict,
  data_files: dict | None = None,
) -> dict:
  """What a checkpoint stores about its run besides the state (the leaf table is added by
  Checkpointer.save): the frozen config (refusing another experiment on resume), the full
  config (naming changed keys), the losses of the log interval the checkpoint cuts (exact
  floats: the resumed interval mean is identical), the summary fields so far and the data's
  fingerprint (data_fingerprint.py: a resume on changed data is refused)."""
  meta = {
    "frozen_config": frozen_config(config_dict),
    "config": flat_config(config_dict),
    "interval_losses": list(interval_losses),
    "summary": dict(summary),
  }
  if data_files:
    meta["data_files"] = data_files
  return meta


def resumed_run(meta: dict) -> tuple[dict, list[float]]:
  """(summary fields, interval losses) that run_meta stored, for the resumed run."""
  return dict(meta.get("summary", {})), list(meta.get("interval_losses", []))


# --- fingerprints: detect bytes that orbax restores without complaint ----------------------


def meta_checksum(meta: dict) -> str:
  """sha256 of a meta's canonical JSON, its checksum key left out."""
  body = {k: v for k, v in meta.items() if k != META_CHECKSUM}
  return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def sealed(meta: dict) -> dict:
  """`meta` with its version and checksum: what a checkpoint stores."""
  meta = {**meta, META_VERSION[0]: META_VERSION[1]}
  return {**meta, META_CHECKSUM: meta_checksum(meta)}


def check_meta(meta: dict) -> None:
  """ValueError unless a read meta matches its checksum (a meta from before checksums, with
  neither version nor checksum, is taken as it is)."""
  if not isinstance(meta.get("leaves"), dict):
    raise ValueError("meta has no leaf table")
  if META_CHECKSUM not in meta and META_VERSION[0] not in meta:
    return
  if meta.get(META_CHECKSUM) != meta_checksum(meta):
    raise ValueError("meta does not match its sha256 (changed after it was written)")


def _leaf_fingerprint(x: jax.Array) -> jax.Array:
  """uint32 sum (mod 2^32) of a bijective mix of each element's bits.

  The mix is one-to-one, so any changed element (a flipped bit, zeroed bytes) changes the
  sum unless another change cancels it exactly (~2^-32); integer sums are exact in any
  order, so the value does not depend on sharding. Elementwise + one reduction: cheap to
  run and to compile, no reshape of a sharded array.
  """
  if x.dtype == jnp.bool_:
    x = x.astype(jnp.uint8)
  width = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[x.dtype.itemsize]
  u = jax.lax.bitcast_convert_type(x, width).astype(jnp.uint32)  # 8-byte: adds a dim of 2
  u = (u ^ (u >> 16)) * jnp.uint32(0x45D9F3B)  # xorshift-multiply (odd): bijective
  u = (u ^ (u >> 16)) * jnp.uint32(0x45D9F3B)
  return jnp.sum(u ^ (u >> 16), dtype=jnp.uint32)


@jax.jit
def _fingerprints(state) -> list[jax.Array]:
  return [_leaf_fingerprint(x) for x in jax.tree.leaves(state)]


def leaf_table(state) -> dict[str, list]:
  """{leaf path: [shape, dtype, fingerprint]} of a state (a sync with the device)."""
  prints = jax.device_get(_fingerprints(state))
  flat = jax.tree_util.tree_flatten_with_path(state)[0]
  return {
    jax.tree_util.keystr(path): [list(x.shape), str(x.dtype), int(fp)]
    for (path, x), fp in zip(flat, prints, strict=True)
  }


def _abstract_table(abstract_state) -> dict[str, list]:
  flat = jax.tree_util.tree_flatten_with_path(abstract_state)[0]
  return {jax.tree_util.keystr(p): [list(x.shape), str(x.dtype)] for p, x in flat}


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

  def __init__(self, directory: str, *, keep: int = 2, async_save: bool = True):
    self.directory = absolute(directory)  # a local folder or gs://..., through etils.epath
    self.save_seconds: list[float] = []  # time each save() blocked the caller
    self.saving: int | None = None  # the step of a save started and not yet seen to finish
    self.failed: SaveFailed | None = None
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
    meta = sealed({**meta, "leaves": leaf_table(state)})
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
      msg = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
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


def saved_frozen_config(meta: dict) -> dict[str, Any]:
  """A checkpoint's frozen config in today's keys (same_experiment reads a key it predates
  as its default). A key that moved (cli.MOVED_KEYS) is read at its new place, from the
  saved full config when the old place was not frozen (train.dtype, now model.dtype)."""
  saved_flat = cli.renamed_moved_keys(meta.get("config", {}))
  checkpoint = CHECKPOINT
  moved = {
    new: saved_flat[new]
    for new in cli.MOVED_KEYS.values()
    if new in saved_flat and checkpoint.compares(new)
  }
  return {**moved, **cli.renamed_moved_keys(meta.get("frozen_config", {}))}


def check_compatible(meta: dict, config_dict: dict, abstract_state, directory: str) -> None:
  """Raises ValueError, naming the changed keys, if the checkpoint is another experiment's."""
  frozen, saved_frozen = frozen_config(config_dict), saved_frozen_config(meta)
  checkpoint = CHECKPOINT
  changed = same_experiment.changed_keys(saved_frozen, frozen, checkpoint)
  if changed:
    raise ValueError(
      f"{directory} holds a checkpoint of a different experiment; changed keys: "
      f"{same_experiment.describe(changed, saved_frozen, frozen, checkpoint)}. "
      "Use a new --workdir."
    )
  want = _abstract_table(abstract_state)
  have = {k: v[:2] for k, v in meta["leaves"].items()}
  if want != have:
    diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    saved_cfg, state = meta.get("config", {}), same_experiment.CHECKPOINT_STATE
    keys = same_experiment.changed_keys(saved_cfg, config_dict, state)
    raise ValueError(
      f"{directory} holds a checkpoint whose state does not fit this config (leaves "
      f"{diff[:4]}{' ...' if len(diff) > 4 else ''} differ); changed keys: "
      f"{same_experiment.describe(keys, saved_cfg, config_dict, state) or 'none found'}. "
      "Use a new --workdir."
    )
  check_same_run(meta, config_dict, directory)


def check_same_run(meta: dict, config_dict: dict, directory: str) -> None:
  """Raises ValueError, naming the keys, if the full config the checkpoint recorded is
  another experiment than `config_dict` by the workdir's rule (same_experiment.WORKDIR: only
  the run's length, logging and how the step runs may change). The checkpoint carries the
  run's identity itself: a resume whose config.json was lost or truncated cannot change
  opt.lr, the schedule or the warmup unseen. A checkpoint from before the full config was
  recorded is not compared."""
  saved = meta.get("config")
  if not isinstance(saved, dict) or not saved:
    return
  policy = same_experiment.WORKDIR
  keys = same_experiment.changed_keys(saved, config_dict, policy)
  if keys:
    raise ValueError(
      f"{directory} holds a checkpoint of another experiment (the config it recorded); "
      f"differing keys: {same_experiment.describe(keys, saved, config_dict, policy)}. "
      "Use a new --workdir."
    )


def check_same_data(meta: dict, data_files: dict, directory: str, step: int) -> None:
  """Raises ValueError naming the files whose content changed since the checkpoint."""
  changed = data_fingerprint.changes(meta["data_files"], data_files)
  if changed:
    shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
    raise ValueError(
      f"the data changed since the checkpoint of step {step} in {directory} was written: "
      f"{shown}. Resuming would train one run on two corpora: restore the data, or use a "
      "new --workdir."
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
