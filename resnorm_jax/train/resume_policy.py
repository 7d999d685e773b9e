"""What a checkpoint records about its run for a resume, and which resumes it refuses: the frozen
config (the keys a resumed run must not change, and how a checkpoint that predates a key is
read), the run's full config by the workdir's rule, a state that does not fit the config, and
changed data."""

from __future__ import annotations

import math
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import ConfigDict

from resnorm_jax.config import cli, same_experiment
from resnorm_jax.data import data_fingerprint
from resnorm_jax.data.fs import is_remote, read_json
from resnorm_jax.model import variants
from resnorm_jax.runs import record_files
from resnorm_jax.train.optimizers.schedules import make_schedule

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


def resumed_run(
  meta: dict, workdir: str | None = None, step: int | None = None
) -> tuple[dict, list[float]]:
  """(summary fields, interval losses) that run_meta stored, for the resumed run from the
  checkpoint of `step`. The checkpoint's wall time was taken when the save began; where the
  workdir's summary.json ended the run at that step (an interrupted or diverged run's last
  save), its later wall time (and checkpoint-blocking time) is kept, so the time spent
  saving and closing that segment is not lost."""
  summary = dict(meta.get("summary", {}))
  # How the saved segment ended (a stop rule's stop: its status and stop_* fields) is the
  # saved run's, not the resumed run's.
  for key in [k for k in summary if k == "status" or k.startswith("stop_")]:
    del summary[key]
  written = None
  if workdir and step is not None:  # local or gs://; missing or damaged: None
    written = read_json(os.path.join(workdir, record_files.SUMMARY))
  written = written if isinstance(written, dict) else {}
  wall = written.get("wall_seconds")
  saved = summary.get("wall_seconds") or 0.0
  if (
    written.get("steps") == step
    and isinstance(wall, int | float) and math.isfinite(wall) and wall > saved
    and wall - saved <= _summary_lag(workdir, step)
  ):  # fmt: skip
    summary["wall_seconds"] = float(wall)
    # that save's own blocking time too (the checkpoint's meta was written before it ran)
    blocking = written.get("checkpoint_blocking_seconds")
    if isinstance(blocking, int | float) and saved_blocking(summary) <= blocking <= wall:
      summary["checkpoint_blocking_seconds"] = float(blocking)
  return summary, list(meta.get("interval_losses", []))


def saved_blocking(summary: dict) -> float:
  """The checkpoint-blocking seconds a checkpoint's summary fields record (0: none)."""
  value = summary.get("checkpoint_blocking_seconds")
  return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _summary_lag(workdir: str | None, step: int | None, slack: float = 60.0) -> float:
  """How much later than the checkpoint of `step` the workdir's summary.json could have been
  written (their files' times, plus `slack`): a summary's wall time further past the
  checkpoint's is not the run's (hand-edited: 1e9 was trusted) and is not taken. Infinite
  where the times cannot be read locally (a gs:// workdir): the summary is trusted as before."""
  if not workdir or step is None or is_remote(workdir):
    return math.inf
  try:
    summary = os.path.getmtime(os.path.join(workdir, record_files.SUMMARY))
    ckpt = os.path.getmtime(os.path.join(workdir, record_files.CHECKPOINTS, str(step)))
  except OSError:
    return math.inf
  return max(0.0, summary - ckpt) + slack


def continued_from(meta: dict, writer: Any, step: int, program: str) -> dict | None:
  """{step, written_by} when `program` goes on from a checkpoint (of `step`, its `meta`) that
  another program, `writer`, wrote (a population member continued by its single run: the
  same experiment, its losses after `step` no longer bit for bit the writer's), else None.
  An earlier `continued_from` the checkpoint carries is kept: the first switch is the one
  that counts. A checkpoint that records no writer is not compared."""
  earlier = meta.get("summary", {}).get("continued_from")
  if earlier is not None:
    return earlier
  if not isinstance(writer, dict) or writer.get("program") == program:
    return None
  return {"step": step, "written_by": writer}


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


def _abstract_table(abstract_state) -> dict[str, list]:
  flat = jax.tree_util.tree_flatten_with_path(abstract_state)[0]
  return {jax.tree_util.keystr(p): [list(x.shape), str(x.dtype)] for p, x in flat}


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


# --- the run's length ----------------------------------------------------------------------


def _schedule_change(opt_cfg: ConfigDict, old: int, new: int) -> tuple[int, float, float] | None:
  """(first step, its lr over `old` steps, over `new`) where the lr schedule of a run of `new`
  steps differs from that of `old` steps on the steps of the shorter, else None (a schedule
  that does not depend on the total: constant, inverse_sqrt, warmup then constant)."""
  steps = jnp.arange(min(old, new))
  lrs = [
    np.broadcast_to(np.asarray(jax.vmap(make_schedule(opt_cfg, n))(steps)), steps.shape)
    for n in (old, new)
  ]
  (differ,) = np.nonzero(lrs[0] != lrs[1])
  if not differ.size:
    return None
  t = int(differ[0])
  return t, float(lrs[0][t]), float(lrs[1][t])


def check_run_length(recorded: dict | None, where: str, config: ConfigDict, directory: str) -> None:
  """Raises ValueError, naming both values, when `config` changes the train.steps the run in
  `directory` recorded (`recorded`: its config as {dotted key: value}, read from `where`) in a
  way that is another experiment: shorter (a run is never shortened, whatever step it
  reached: its files would be a longer run's, its config.json rewritten to a length it never
  had), or longer under a schedule whose lr at a step depends on the total (cosine, linear:
  two schedules in one run). Extending a schedule that does not depend on it is the run
  going on (recorded in summary.json's `extended`: `extension`)."""
  old, new = (recorded or {}).get("train.steps"), config.train.steps
  if not isinstance(old, int) or isinstance(old, bool) or old == new:
    return
  keep = f"train.steps={old} resumes it as it is"
  if new < old:
    raise ValueError(
      f"{directory} holds a run of train.steps={old} (its {where}): train.steps={new} would "
      f"shorten it, and a run is never shortened; {keep}, a {new}-step run needs a new --workdir"
    )
  change = _schedule_change(config.opt, old, new)
  if change is not None:
    t, was, now = change
    raise ValueError(
      f"opt.schedule={config.opt.schedule!r} depends on train.steps: extending the run in "
      f"{directory} from train.steps={old} (its {where}) to {new} changes the lr of the steps "
      f"it ran (step {t}: {was:.4g} -> {now:.4g}); only a schedule that does not depend on "
      f"the total (constant, inverse_sqrt) may be extended; {keep}, a {new}-step run needs a "
      "new --workdir"
    )


def extension(meta: dict, steps: int, start: int) -> list[dict] | None:
  """summary.json's `extended` of a run going on from the checkpoint of `start` (its `meta`)
  as a run of `steps` steps: each time the run was extended, {step, from_steps, to_steps},
  the earlier ones kept from the checkpoint; None when it never was."""
  earlier = list(meta.get("summary", {}).get("extended") or [])
  was = meta.get("config", {}).get("train.steps")
  if isinstance(was, int) and was != steps:
    earlier.append({"step": start, "from_steps": was, "to_steps": steps})
  return earlier or None
