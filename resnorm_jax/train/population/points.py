"""A population's members as the command line names them: a points file (a JSON list of
{config, overrides, workdir}), each point's locked config, and the checks that the members
may train as one program (one workdir each, configs differing only in the vmapped keys) and
that a member's checkpoint continues bit for bit in it (the program that wrote it)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.config.same_experiment import VMAPPED_KEYS
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import resume_policy
from resnorm_jax.train import run_setup as setup_lib

POINT_KEYS = frozenset({"config", "overrides", "workdir"})
_ABSENT = "<absent>"
PROGRAM = "experiments.train_population"  # what a member's checkpoint records as its writer


def differing_keys(configs: Sequence[ConfigDict]) -> list[str]:
  """Dotted config keys (`name` included) whose values differ between `configs`, apart from
  the vmapped ones (VMAPPED_KEYS)."""
  flats = [resume_policy.flat_config(c.to_dict()) for c in configs]
  keys = set().union(*flats) - set(VMAPPED_KEYS)
  return sorted(
    k for k in keys if any(f.get(k, _ABSENT) != flats[0].get(k, _ABSENT) for f in flats[1:])
  )


def check_members(configs: Sequence[ConfigDict], workdirs: Sequence[str]) -> None:
  """ValueError unless there is one distinct workdir per config and the configs differ only
  in VMAPPED_KEYS (naming the keys that differ)."""
  if not configs or len(configs) != len(workdirs):
    raise ValueError(f"{len(configs)} configs and {len(workdirs)} workdirs: need one per member")
  for workdir in workdirs:
    workdir_lib.check_workdir(workdir, "a member's workdir")
  folders = [ckpt_lib.absolute(w) for w in workdirs]
  repeated = sorted({w for w in folders if folders.count(w) > 1})
  if repeated:
    raise ValueError(f"members share a workdir: {', '.join(repeated)}")
  for config, workdir in zip(configs, workdirs, strict=True):
    try:
      setup_lib.check_seed(config)
    except ValueError as e:
      raise ValueError(f"member {workdir}: {e}") from None
  keys = differing_keys(configs)
  if keys:
    raise ValueError(
      f"population members may differ only in {', '.join(VMAPPED_KEYS)}; these keys differ: "
      + ", ".join(keys)
    )


def member_config(spec: str, overrides: dict[str, Any]) -> ConfigDict:
  """The locked config of FILE[:ARG] with `overrides` ({dotted key: value}); ValueError."""
  config = cli.load_config_file(spec)
  cli.refuse_moved_keys(overrides, where="overrides")
  for key, value in overrides.items():  # one at a time: the error names its key
    try:
      config.update_from_flattened_dict({key: value})
    except (KeyError, AttributeError, TypeError) as e:
      msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
      raise ValueError(f"{spec}: override {key}={value!r}: {msg}") from None
  return config


def load_points(path: str) -> tuple[list[ConfigDict], list[str]]:
  """(configs, workdirs) of a points file: a JSON list of {config, overrides, workdir}."""
  points = read_points(path)
  configs = [member_config(p["config"], p.get("overrides", {})) for p in points]
  return configs, [str(p["workdir"]) for p in points]


def single_run_commands(path: str) -> list[str]:
  """Each point's experiments.train command line: the single run of its config and folder."""
  return [
    single_run_command(p["config"], p.get("overrides", {}), p["workdir"]) for p in read_points(path)
  ]


def single_run_command(spec: str, overrides: dict[str, Any], workdir: str) -> str:
  """`python -m experiments.train --config=SPEC --workdir=DIR --config.k=v ...`."""
  args = ["python", "-m", "experiments.train", f"--config={spec}", f"--workdir={workdir}"]
  return shlex.join(args + [f"--config.{k}={_flag_value(v)}" for k, v in overrides.items()])


def _flag_value(value: Any) -> str:
  """A JSON scalar as `--config.k=` text that config_flags parses back to the same value."""
  if isinstance(value, bool):
    return "true" if value else "false"
  return repr(value) if isinstance(value, float) else str(value)


def read_points(path: str) -> list[dict]:
  """A points file's entries, each checked to be {config, workdir[, overrides]}."""
  try:
    with open(path) as f:
      points = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"--points={path}: {e}") from None
  if not isinstance(points, list) or not points:
    raise ValueError(f"--points={path}: expected a non-empty JSON list of points")
  for i, p in enumerate(points):
    if not isinstance(p, dict) or not {"config", "workdir"} <= set(p) or set(p) - POINT_KEYS:
      raise ValueError(
        f"--points={path}[{i}] = {p!r}: expected {{'config', 'workdir', 'overrides'}} "
        "('overrides' optional)"
      )
    if not isinstance(p.get("overrides", {}), dict):
      raise ValueError(f"--points={path}[{i}]: 'overrides' must be a dict")
  return points


def written_by(size: int, slot: int, command: str | None) -> dict:
  """What member `slot` (from 0) of a population of `size` records as its checkpoints'
  writer (checkpoint.WRITTEN_BY), with the command that continues them (None: unknown)."""
  return {"program": PROGRAM, "members": size, "slot": slot, "command": command}


def writer_refusal(
  writer: dict | None, size: int, slot: int, workdir: str, step: int, single_command: str
) -> str | None:
  """Why member `slot` of a population of `size` may not go on from the checkpoint of `step`
  in `workdir` that `writer` wrote (one line naming the writer and the command that continues
  it), or None. A vmapped program of another size or another slot is another XLA program:
  the member's losses would differ in the last bits from its run never interrupted, so only
  the program that wrote it continues it. `writer` None (a checkpoint from before writers
  were recorded) is unknown and goes on. `single_command`: the member's single run."""
  if not isinstance(writer, dict):
    return None
  program = writer.get("program")
  if program == PROGRAM and (writer.get("members"), writer.get("slot")) == (size, slot):
    return None
  if program == ckpt_lib.SINGLE_RUN["program"]:
    what, command = "a single run (experiments.train)", single_command
  elif program == PROGRAM:
    what = f"a population of {writer.get('members')} as member {_ordinal(writer.get('slot'))}"
    command = writer.get("command") or (
      f"{PROGRAM} with the points file that wrote it ({writer.get('members')} points, this "
      f"one at position {_ordinal(writer.get('slot'))})"
    )
  else:
    what, command = f"{program!r}", "the program that wrote it"
  return (
    f"member {workdir}: its checkpoint of step {step} was written by {what}; as member "
    f"{slot + 1} of this population of {size} it would train as another program, its losses "
    f"no longer those of its run never interrupted. Continue it with: {command} (once it is "
    "completed, this population holds it in its slot)"
  )


def _ordinal(slot: Any) -> str:
  return str(slot + 1) if isinstance(slot, int) else "?"
