"""Orbax checkpoints in <workdir>/ckpt: async save, resume from the latest good one, refuse a
changed experiment.

Each step directory holds `state` (the TrainState pytree: step, params, optimizer state,
non-trainable model state) and `meta` (JSON: the config the state belongs to, the loop's
bookkeeping, and a table of every state leaf with its shape, dtype and a fingerprint). The
data order is a pure function of (seed, step), so the step is the only "RNG state" a
resumed run needs.

Orbax (local disk) writes a step into `<step>.orbax-checkpoint-tmp-*` and renames it when
complete, with `commit_success.txt` inside. Orbax does not checksum array bytes: a flipped
bit in a data file restores silently. So a restore is accepted only if the step directory
holds its commit marker, `meta` parses, and every restored leaf has the fingerprint recorded
at save time; otherwise the step is reported, moved to `ckpt/damaged/`, and the previous
step is tried.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from etils import epath

from resnorm_jax import cli, variants
from resnorm_jax.train_step import TrainState

# Keys whose change makes a checkpoint belong to another experiment. train.steps,
# logging, eval and checkpoint cadence, the learning rate may change on resume; the model,
# the data and the batch may not. (A change that alters the optimizer state's structure,
# e.g. opt.name, is refused by the leaf table check.)
FROZEN_SECTIONS = ("model",)
# Model settings that change how the step runs, not what it computes (remat and scan unroll
# give the same values: tests/test_model.py, tests/test_perf_equivalence.py): a resumed run
# may change them, e.g. to fit memory.
UNFROZEN_KEYS = ("model.remat", "model.scan_unroll")
FROZEN_KEYS = (
  "seed",
  "data.source",
  "data.path",
  "data.sampling",
  "data_fingerprint",  # a prepared token folder's manifest fingerprint (loop.py adds it)
  "train.batch_size",
  "train.seq_len",
)
# Frozen keys added after checkpoints were written, each with the value that reproduces the
# runs that predate it: a checkpoint whose config lacks one is read as having that value, so
# an interrupted run still resumes with the new code while the key keeps that value.
ADDED_KEYS: dict[str, Any] = {
  # Every variant's own keys (resnorm_jax/variants/), at their declared defaults: a run that
  # predates a variant never selected it (mixln_post_fraction, hyperconn_*, ngpt_alpha_init).
  **{f"model.{name}": key.default for name, key in variants.keys().items()},
  "model.attention": "dense",
  "data_fingerprint": None,
  "data.sampling": "random",  # every run before the epoch sampler drew windows at random
}
COMMIT_MARKER = "commit_success.txt"  # orbax's, written before the final rename
TMP_MARKER = ".orbax-checkpoint-tmp"
DAMAGED_DIR = "damaged"


def absolute(path: str) -> str:
  """A local path made absolute; a URL (gs://bucket/...) as given (abspath would mangle it)."""
  return path if "://" in path else os.path.abspath(path)


class CheckpointError(ValueError):
  """Checkpoints exist but none can be used: a bad workdir, reported like bad input."""


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
  out = {}
  for k, v in d.items():
    key = f"{prefix}{k}"
    if isinstance(v, dict):
      out.update(_flatten(v, key + "."))
    else:
      out[key] = v
  return out


def flat_config(config_dict: dict) -> dict[str, Any]:
  """A config (as a plain dict) as {dotted.key: JSON value}."""
  return _flatten(json.loads(json.dumps(config_dict, default=str)))


def frozen_config(config_dict: dict) -> dict[str, Any]:
  """The part of a config (as a plain dict) that a resumed run must not change."""
  flat = flat_config(config_dict)
  keep = {
    k: v for k, v in flat.items() if k.split(".")[0] in FROZEN_SECTIONS and k not in UNFROZEN_KEYS
  }
  keep.update({k: flat.get(k) for k in FROZEN_KEYS})
  return keep


def run_meta(config_dict: dict, interval_losses: list[float], summary: dict) -> dict:
  """What a checkpoint stores about its run besides the state (the leaf table is added by
  Checkpointer.save): the frozen config (refusing another experiment on resume), the full
  config (naming changed keys), the losses of the log interval the checkpoint cuts (exact
  floats: the resumed interval mean is identical) and the summary fields so far."""
  return {
    "frozen_config": frozen_config(config_dict),
    "config": flat_config(config_dict),
    "interval_losses": list(interval_losses),
    "summary": dict(summary),
  }


def resumed_run(meta: dict) -> tuple[dict, list[float]]:
  """(summary fields, interval losses) that run_meta stored, for the resumed run."""
  return dict(meta.get("summary", {})), list(meta.get("interval_losses", []))


def changed_keys(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
  """Keys whose values differ between a checkpoint's frozen config and this run's."""
  return sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))


def _describe(keys: list[str], saved: dict, current: dict) -> str:
  return ", ".join(f"{k} ({saved.get(k)!r} -> {current.get(k)!r})" for k in keys)


# --- fingerprints: detect bytes that orbax restores without complaint ----------------------


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
  (resnorm_jax/preemption.py); saves are forced when it stops.
  """

  def reached_preemption(self, step: int) -> bool:
    return False


class Checkpointer:
  """CheckpointManager wrapper: async save, latest-good restore with fallback."""

  def __init__(self, directory: str, *, keep: int = 2, async_save: bool = True):
    self.directory = absolute(directory)  # a local folder or gs://..., through etils.epath
    self.save_seconds: list[float] = []  # time each save() blocked the caller
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
    """Starts saving `state` at its step: blocks for the device-to-host copy, writes async."""
    start = time.perf_counter()
    step = int(jax.device_get(state.step))
    if step in self.manager.all_steps():
      return False
    meta = {**meta, "leaves": leaf_table(state)}
    saved = self.manager.save(
      step,
      args=ocp.args.Composite(state=ocp.args.PyTreeSave(state), meta=ocp.args.JsonSave(meta)),
      force=force,
    )
    self.save_seconds.append(time.perf_counter() - start)
    return saved

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def _read_meta(self, step: int) -> dict:
    if not (epath.Path(self.directory) / str(step) / COMMIT_MARKER).exists():
      raise FileNotFoundError(f"no {COMMIT_MARKER}: the checkpoint was never committed")
    meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    meta = dict(meta["meta"])
    if not isinstance(meta.get("leaves"), dict):
      raise ValueError("meta has no leaf table")
    return meta

  def restore_latest(self, abstract_state: TrainState, config_dict: dict | None = None):
    """(state, meta, step) of the newest checkpoint that reads back intact, or None if none.

    Raises ValueError when the checkpoint belongs to a different experiment (a changed
    frozen key, or a state whose leaves differ from this config's), naming the changed
    keys. A damaged checkpoint (uncommitted, truncated, corrupted) is reported, moved to
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
    self.manager.wait_until_finished()
    self.manager.close()


def saved_frozen_config(meta: dict) -> dict[str, Any]:
  """A checkpoint's frozen config in today's keys.

  A key the checkpoint predates (ADDED_KEYS) reads as the value that reproduces it; a key
  that moved (cli.MOVED_KEYS) is read at its new place, from the saved full config when the
  old place was not frozen (train.dtype, now model.dtype).
  """
  saved_flat = cli.renamed_moved_keys(meta.get("config", {}))
  moved = {
    new: saved_flat[new]
    for new in cli.MOVED_KEYS.values()
    if new in saved_flat and new.split(".")[0] in FROZEN_SECTIONS and new not in UNFROZEN_KEYS
  }
  return {**ADDED_KEYS, **moved, **cli.renamed_moved_keys(meta.get("frozen_config", {}))}


def check_compatible(meta: dict, config_dict: dict, abstract_state, directory: str) -> None:
  """Raises ValueError, naming the changed keys, if the checkpoint is another experiment's."""
  frozen = frozen_config(config_dict)
  saved_frozen = saved_frozen_config(meta)
  changed = changed_keys(saved_frozen, frozen)
  if changed:
    raise ValueError(
      f"{directory} holds a checkpoint of a different experiment; changed keys: "
      f"{_describe(changed, saved_frozen, frozen)}. Use a new --workdir."
    )
  want = _abstract_table(abstract_state)
  have = {k: v[:2] for k, v in meta["leaves"].items()}
  if want != have:
    diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    saved_cfg, cfg = cli.renamed_moved_keys(meta.get("config", {})), flat_config(config_dict)
    keys = [k for k in changed_keys(saved_cfg, cfg) if k.split(".")[0] != "train"]
    raise ValueError(
      f"{directory} holds a checkpoint whose state does not fit this config (leaves "
      f"{diff[:4]}{' ...' if len(diff) > 4 else ''} differ); changed keys: "
      f"{_describe(keys, saved_cfg, cfg) or 'none found'}. Use a new --workdir."
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
