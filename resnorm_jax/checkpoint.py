"""Orbax checkpoints in <workdir>/ckpt: save, resume from the latest good one, refuse a
changed model.

Each step directory holds `state` (the TrainState as a pytree) and `meta` (JSON: the model
config and data seed the state belongs to). The data order is a pure function of (seed,
step), so the step is the only "RNG state" a resumed run needs.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp

from resnorm_jax.train_step import TrainState

# Keys whose change makes a checkpoint belong to another experiment. train.steps,
# logging and eval cadence may change on resume; the model and the data may not.
FROZEN_SECTIONS = ("model",)
FROZEN_KEYS = ("seed", "data.source", "data.path", "train.batch_size", "train.seq_len")


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
  out = {}
  for k, v in d.items():
    key = f"{prefix}{k}"
    if isinstance(v, dict):
      out.update(_flatten(v, key + "."))
    else:
      out[key] = v
  return out


def frozen_config(config_dict: dict) -> dict[str, Any]:
  """The part of a config (as a plain dict) that a resumed run must not change."""
  flat = _flatten(json.loads(json.dumps(config_dict, default=str)))
  keep = {k: v for k, v in flat.items() if k.split(".")[0] in FROZEN_SECTIONS}
  keep.update({k: flat.get(k) for k in FROZEN_KEYS})
  return keep


def changed_keys(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
  """Keys whose values differ between a checkpoint's frozen config and this run's."""
  return sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))


class Checkpointer:
  """CheckpointManager wrapper: async save, latest-good restore with fallback."""

  def __init__(self, directory: str, *, keep: int = 2, async_save: bool = True):
    self.directory = os.path.abspath(directory)
    self.manager = ocp.CheckpointManager(
      self.directory,
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max(1, keep),
        enable_async_checkpointing=async_save,
        create=True,
      ),
      item_names=("state", "meta"),
    )

  def save(self, state: TrainState, meta: dict, *, force: bool = False) -> bool:
    """Starts saving `state` at its step (returns at once when async)."""
    step = int(jax.device_get(state.step))
    if step in self.manager.all_steps():
      return False
    return self.manager.save(
      step,
      args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
      force=force,
    )

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def restore_latest(self, abstract_state: TrainState):
    """(state, meta, step) of the newest checkpoint that reads back, or None if none.

    A damaged newest checkpoint (half-written, truncated, corrupted) is reported and the
    previous one is tried; the run never silently starts from scratch when checkpoints
    exist but none can be read: that raises.
    """
    steps = self.steps()
    errors = []
    for step in reversed(steps):
      try:
        restored = self.manager.restore(
          step,
          args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()
          ),
        )
        state = restored["state"]
        bad = [x for x in jax.tree.leaves(state) if not _finite(x)]
        if bad:
          raise ValueError("checkpoint holds non-finite values")
        if errors:
          logging.warning(
            "resumed from step %d after skipping damaged checkpoints: %s", step, "; ".join(errors)
          )
        return state, dict(restored["meta"]), step
      except Exception as e:  # noqa: BLE001 - any read failure means "damaged"
        msg = f"step {step}: {type(e).__name__}: {str(e)[:200]}"
        logging.warning("checkpoint %s is damaged, trying the previous one (%s)", step, msg)
        print(
          f"WARNING: checkpoint at step {step} is damaged ({msg}); trying the previous one",
          flush=True,
        )
        errors.append(msg)
    if steps:
      raise RuntimeError(
        f"none of the checkpoints in {self.directory} (steps {steps}) could be read: "
        + "; ".join(errors)
        + ". Move the ckpt/ folder away to start from scratch."
      )
    return None

  def close(self) -> None:
    self.manager.wait_until_finished()
    self.manager.close()


def _finite(x) -> bool:
  """True unless a floating array holds NaN or inf (works on sharded global arrays)."""
  if not jnp.issubdtype(x.dtype, jnp.floating):
    return True
  return bool(jnp.all(jnp.isfinite(x)))
