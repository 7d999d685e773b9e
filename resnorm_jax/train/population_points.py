"""A population's members as the command line names them: a points file (a JSON list of
{config, overrides, workdir}), each point's locked config, and the check that the members
may train as one program (one workdir each, configs differing only in the vmapped keys)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.config.same_experiment import VMAPPED_KEYS
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import loop, resume_policy

POINT_KEYS = frozenset({"config", "overrides", "workdir"})
_ABSENT = "<absent>"


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
  folders = [ckpt_lib.absolute(w) for w in workdirs]
  repeated = sorted({w for w in folders if folders.count(w) > 1})
  if repeated:
    raise ValueError(f"members share a workdir: {', '.join(repeated)}")
  for config, workdir in zip(configs, workdirs, strict=True):
    try:
      loop.check_seed(config)
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
  try:
    with open(path) as f:
      points = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"--points={path}: {e}") from None
  if not isinstance(points, list) or not points:
    raise ValueError(f"--points={path}: expected a non-empty JSON list of points")
  configs, workdirs = [], []
  for i, p in enumerate(points):
    if not isinstance(p, dict) or not {"config", "workdir"} <= set(p) or set(p) - POINT_KEYS:
      raise ValueError(
        f"--points={path}[{i}] = {p!r}: expected {{'config', 'workdir', 'overrides'}} "
        "('overrides' optional)"
      )
    overrides = p.get("overrides", {})
    if not isinstance(overrides, dict):
      raise ValueError(f"--points={path}[{i}]: 'overrides' must be a dict")
    configs.append(member_config(p["config"], overrides))
    workdirs.append(str(p["workdir"]))
  return configs, workdirs
