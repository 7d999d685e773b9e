"""What a run's results depend on: whether a recorded config is the current one's experiment.

A record is a config as a run left it: its config.json (a workdir, a sweep point's run) or its
checkpoint's frozen config. `changed_keys` reads the record in today's keys and names every
key on which it and the current config differ, among the keys its `Policy` compares:

  - a key that moved (cli.MOVED_KEYS) is read at its new place;
  - the sections a run adds to config.json (RECORDED_NOT_CONFIG) are not config;
  - a key the record lacks reads as the value that reproduces the runs that predate the key
    (`Policy.added`: the schema's default), so it counts as unchanged while the current
    config keeps that value;
  - keys that only change what a run logs (LOGGING_ONLY), how fast or in how much memory the
    step runs (SPEED_ONLY), how long the run is (RUN_LENGTH) or whether it goes on
    (RUN_CONTROL: a stop rule) are compared or not by policy.

The policies of its users are data below: SWEEP (is a finished run a grid point's run),
WORKDIR (may this run continue the workdir's run) and CHECKPOINT_STATE (the keys named when a
checkpoint's state does not fit); the checkpoint's own, which also reads the variants' keys
from the model's registry, is train/resume_policy.py's CHECKPOINT, built from FROZEN and
CHECKPOINT_ADDED here. No JAX here; the schema is read on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from resnorm_jax.config import cli, model_keys

ABSENT = "<absent>"  # a key one side lacks, as the sweeps and the workdir read it
# Sections the run adds to config.json (run_files.resolved_config): recorded, never config.
RECORDED_NOT_CONFIG = (
  "resolved_model",
  "data_split",
  "data_files",
  "provenance",
  "depth_param_table",  # per-parameter lr/eps/decay/init of a depth or width parametrization
)
# What the members of one program (resnorm_jax/train/population/run.py) may differ in: the peak
# lr (through the schedule) and the seed (init and batches); every other key is one experiment.
VMAPPED_KEYS = ("opt.lr", "seed")
# Keys (a trailing '.': a section) that change what a run logs or where, never its losses.
LOGGING_ONLY = (
  "train.log_every",
  "train.eval_every",
  "train.checkpoint_every",
  "train.keep_checkpoints",
  "diag.",
  "dist.",
)
# Keys that change how the step runs (speed, memory, devices), not what it computes: the model
# keys declared affects_results=False (model_keys.py: remat and scan unroll give the same values,
# tests/test_model.py, tests/test_perf_equivalence.py) and the mesh.
SPEED_ONLY = (*model_keys.speed_only(), "mesh.")
RUN_LENGTH = ("train.steps",)  # a rerun in the same workdir may extend the run
# Keys that decide whether a run goes on, never what a step computes: a run stopped early by
# its stop rule (train.stop_when: resnorm_jax/train/stop_rule.py) resumes to the end with it
# off, and a sweep point's finished run is its run whichever rule the sweep sets.
RUN_CONTROL = ("train.stop_when",)
# What a checkpoint freezes: the model, the data and the batch, compared first and named
# when the state cannot be restored. Written to every checkpoint (resume_policy.run_meta); the
# checkpoint's full config is then compared by the WORKDIR rule (resume_policy.check_same_run),
# so the optimizer's keys (lr, schedule, warmup, betas, weight decay) may not change either.
FROZEN = (
  "model.",
  "seed",
  "data.source",
  "data.path",
  "data.sampling",
  "data.seed",
  "data_fingerprint",  # a prepared token folder's manifest fingerprint (loop.py adds it)
  "train.batch_size",
  "train.seq_len",
)
# Keys added to the frozen config after checkpoints were written: the core model keys declared
# added=True (model_keys.py), and these (besides every variant's own model.<key>: a run that
# predates a variant never selected it).
CHECKPOINT_ADDED = (*model_keys.added(), "data.sampling", "data.seed", "data_fingerprint")
# Recorded keys outside the schema, with the value of the runs that predate them.
OUTSIDE_SCHEMA = {"data_fingerprint": None}  # None: not a prepared token folder


def _json(value: Any) -> Any:
  return json.loads(json.dumps(value, default=str))


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """A config (nested mappings, or already flat) as {dotted.key: JSON value}: tuples become
  lists and anything JSON cannot hold its str, as config.json and checkpoints store them."""
  out: dict[str, Any] = {}
  for k, v in tree.items():
    if isinstance(v, Mapping):
      out.update(flatten(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = _json(v)
  return out


@functools.cache
def schema_defaults() -> dict[str, Any]:
  """{dotted key: default} of the schema (resnorm_jax/config/schema.py)."""
  from resnorm_jax.config.schema import get_config

  return flatten(get_config().to_dict())


class Defaults(Mapping):
  """{key: the schema's default (OUTSIDE_SCHEMA's value for a key outside it)} of the keys
  `names()` lists (None: every key of the schema), `leave_out` left out: read on first use,
  so importing this module reads nothing."""

  def __init__(
    self, names: Callable[[], Iterable[str]] | None = None, leave_out: tuple[str, ...] = ()
  ):
    self._names, self._leave_out = names, leave_out

  @functools.cached_property
  def _table(self) -> dict[str, Any]:
    schema = schema_defaults()
    names = schema if self._names is None else self._names()
    values = {**OUTSIDE_SCHEMA, **schema}
    return {k: values[k] for k in names if k not in self._leave_out}

  def __getitem__(self, key: str) -> Any:
    return self._table[key]

  def __iter__(self) -> Iterator[str]:
    return iter(self._table)

  def __len__(self) -> int:
    return len(self._table)


def matches_key(key: str, patterns: tuple[str, ...]) -> bool:
  """Whether `key` is one of `patterns` or under one of them that ends with a dot."""
  return any(key == p or (p.endswith(".") and key.startswith(p)) for p in patterns)


@dataclasses.dataclass(frozen=True, eq=False)
class Policy:
  """Which keys a comparison looks at and how it reads a record that lacks one.

  only: the keys compared (None: every key); ignored: keys never compared (both as keys or
  sections, 'diag.'); added: {key: the value a record without it is read as}; absent: what a
  key missing on either side (and not in `added`) reads as.
  """

  only: tuple[str, ...] | None = None
  ignored: tuple[str, ...] = ()
  added: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  absent: Any = ABSENT

  def compares(self, key: str) -> bool:
    return (self.only is None or matches_key(key, self.only)) and not matches_key(key, self.ignored)


# A finished run is a grid point's run (scripts/sweep.py skips it): everything but logging,
# the name and the stop rule (whether a stopped_early point is done is sweeps.grid.run_state's
# call); remat, scan unroll and the mesh are compared (a point run with another remat is a
# conflict, as it always was).
SWEEP = Policy(ignored=("name", *LOGGING_ONLY, *RUN_CONTROL), added=Defaults())
# A run may continue the run in its workdir (run_files.completed_run, and against the full config
# its checkpoint recorded: resume_policy.check_same_run): the sweep's rule with the name counted
# (a record without a name is another run's); it may extend the run, change how the step
# runs or turn its stop rule on or off.
WORKDIR = Policy(
  ignored=LOGGING_ONLY + SPEED_ONLY + RUN_LENGTH + RUN_CONTROL,
  added=Defaults(leave_out=("name",)),
)
# A checkpoint's state does not fit the config: the keys named as the likely cause (a hint,
# not a verdict: the leaf table decides), every key but the train section.
CHECKPOINT_STATE = Policy(ignored=("train.",), absent=None)


def in_todays_keys(recorded: Mapping[str, Any]) -> dict[str, Any]:
  """A record flattened, each moved key at its new place, the sections the run added left out."""
  flat = cli.renamed_moved_keys(flatten(recorded))
  return {k: v for k, v in flat.items() if k.split(".")[0] not in RECORDED_NOT_CONFIG}


def _pairs(recorded: Mapping[str, Any], current: Mapping[str, Any], policy: Policy):
  """{key: (recorded value, current value)} over the keys either side has that `policy`
  compares, the recorded one read in today's keys with its added keys' defaults."""
  have, want = in_todays_keys(recorded), flatten(current)
  out = {}
  for key in set(have) | set(want):
    if policy.compares(key):
      was = have[key] if key in have else policy.added.get(key, policy.absent)
      out[key] = (was, want.get(key, policy.absent))
  return out


def changed_keys(
  recorded: Mapping[str, Any], current: Mapping[str, Any], policy: Policy
) -> list[str]:
  """The sorted keys on which a recorded config and the current one differ under `policy`
  (either nested, as in config.json, or flat, as in a checkpoint)."""
  return sorted(k for k, (was, now) in _pairs(recorded, current, policy).items() if was != now)


def describe(
  keys: Iterable[str], recorded: Mapping[str, Any], current: Mapping[str, Any], policy: Policy
) -> str:
  """`model.dtype ('float32' -> 'bfloat16'), seed (0 -> 1)`: each key as `policy` reads it."""
  pairs = _pairs(recorded, current, policy)
  return ", ".join(f"{k} ({pairs[k][0]!r} -> {pairs[k][1]!r})" for k in keys)
