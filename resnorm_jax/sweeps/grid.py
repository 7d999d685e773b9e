"""Sweep grids: the points of a grid file (configs/sweeps/*.py), resolved, and their run state.

A grid file holds data: `GRID`, a list of points {"config": "configs/x.py[:ARG]", "overrides":
{...}, "name": optional}. A point whose workdir holds a completed or diverged run of the same
config is done (a run its stop rule ended, stopped_early, while the point sets a rule:
run_state): "the same config" compares only what results depend on
(`same_experiment.changed_keys` under the policy same_experiment.SWEEP: logging keys ignored, a
key added after the run counts as unchanged while it keeps its default, a key that moved
(cli.MOVED_KEYS) is compared at its new place). The points' jobs are jobs.py, running
them runner.py, tabulating them runs/sweep_results.py; scripts/sweep.py is the command line.
No JAX here."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import resnorm_jax
from resnorm_jax.config import cli, same_experiment
from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files
from resnorm_jax.runs import status as run_status
from resnorm_jax.runs import workdir as workdir_lib

# The repository root: grid and config paths are relative to it, and the grid and config
# files import `configs.base` from it (scripts/sweep.py puts it on sys.path).
ROOT = resnorm_jax.ROOT
MOVED_KEYS = cli.MOVED_KEYS
POINT_KEYS = frozenset({"config", "overrides", "name"})
POPULATION_FILE = "population_points.json"  # a population's members, in its first's workdir


@dataclasses.dataclass(frozen=True)
class Point:
  """One run of a grid: a config file and its overrides, run in <sweep_dir>/<name>."""

  name: str
  config: str
  overrides: dict[str, Any]
  index: int


def _import_file(path: str, name: str):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def root_path(path: str) -> str:
  """A path as given if it exists, else relative to the repository root."""
  return path if os.path.exists(path) or os.path.isabs(path) else os.path.join(ROOT, path)


def format_value(value: Any) -> str:
  """A Python scalar as `--config.k=` text that config_flags parses back to the same value."""
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, (int, float, str)):
    return repr(value) if isinstance(value, float) else str(value)
  raise ValueError(f"override value {value!r}: only bool, int, float and str can be passed")


def point_name(config: str, overrides: Mapping[str, Any]) -> str:
  """`postnorm_96L__num_layers=12__lr=0.001`: the config's stem and each override's last key."""
  stem = os.path.splitext(os.path.basename(config.split(":")[0]))[0]
  arg = config.partition(":")[2]
  parts = [stem + (f"-{arg}" if arg else "")]
  parts += [f"{k.split('.')[-1]}={format_value(v)}" for k, v in overrides.items()]
  return re.sub(r"[^A-Za-z0-9_.=+-]", "_", "__".join(parts))


def parse_points(grid: Any, where: str = "GRID") -> list[Point]:
  """Validates a GRID list (shape, keys, value types, unique names) into points."""
  if not isinstance(grid, (list, tuple)) or not grid:
    raise ValueError(f"{where} must be a non-empty list of points")
  points, names = [], set()
  for i, entry in enumerate(grid):
    if not isinstance(entry, Mapping) or "config" not in entry or set(entry) - POINT_KEYS:
      raise ValueError(
        f"{where}[{i}] = {entry!r}: expected a dict with 'config' and optional 'overrides', 'name'"
      )
    overrides = dict(entry.get("overrides", {}))
    for value in overrides.values():
      format_value(value)
    name = entry.get("name") or point_name(entry["config"], overrides)
    # its folder is <sweep_dir>/<name>: '.', '..' or a '/' would write outside it
    cli.check_folder_name(name, f"{where}[{i}]: point name")
    if not re.fullmatch(r"[A-Za-z0-9_.=+-]+", name):
      raise ValueError(
        f"{where}[{i}]: point name {name!r} is not a plain file name (letters, digits and "
        "_ . = + - only)"
      )
    if name in names:
      raise ValueError(f"{where}[{i}]: point name {name!r} is repeated")
    names.add(name)
    points.append(Point(name, entry["config"], overrides, i))
  return points


def load_grid(path: str) -> list[Point]:
  """The points of a grid file (a module exposing GRID)."""
  if not os.path.isfile(path):
    raise ValueError(f"--grid={path}: no such file")
  try:
    module = _import_file(path, "_sweep_grid")
  except Exception as e:  # a grid file with an error in it is bad input
    raise ValueError(f"--grid={path}: {type(e).__name__}: {e}") from None
  if not hasattr(module, "GRID"):
    raise ValueError(f"--grid={path} defines no GRID list")
  return parse_points(module.GRID, f"{os.path.basename(path)}: GRID")


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
  """['train.steps=5', 'opt.lr=1e-3'] -> {key: value}: Python literals, else strings."""
  import ast

  out = {}
  for item in items:
    key, sep, text = item.partition("=")
    if not sep or not key:
      raise ValueError(f"--set={item}: expected dotted.key=value")
    if text in ("true", "false"):  # as config_flags spells booleans
      out[key] = text == "true"
      continue
    try:
      out[key] = ast.literal_eval(text)
    except (ValueError, SyntaxError):
      out[key] = text
  return out


def resolve(point: Point, extra: Mapping[str, Any], max_steps: int | None):
  """(overrides to pass, the resolved config as config.json holds it) of a point.

  Loads the config file the way experiments/train.py does and makes the device-free checks
  a run makes (run_setup.validate), so a misspelt key, a wrong type, a missing file or a bad
  value (model.norm='layernrom', train.steps=0) is refused here, before any point runs.
  """
  from ml_collections import ConfigDict

  from resnorm_jax.train import run_setup

  path, _, arg = point.config.partition(":")
  try:
    module = _import_file(root_path(path), f"_sweep_config_{point.index}")
    config = module.get_config(arg) if arg else module.get_config()
    if not isinstance(config, ConfigDict):
      raise ValueError("get_config() did not return a ConfigDict")
    config.lock()
    overrides = {**point.overrides, **extra}
    cli.refuse_moved_keys(overrides, where="overrides")
    config.update_from_flattened_dict(overrides)
    if max_steps is not None and config.train.steps > max_steps:
      overrides["train.steps"] = config.train.steps = max_steps
    rule = config.train.get("stop_when", "")
    if rule and not os.path.isabs(rule):  # a point runs from the repository root
      overrides["train.stop_when"] = config.train.stop_when = os.path.abspath(root_path(rule))
    run_setup.validate(config)
  except (OSError, ImportError, ValueError, KeyError, AttributeError, TypeError) as e:
    msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    raise ValueError(f"point {point.name} ({point.config}): {msg}") from None
  return overrides, json.loads(json.dumps(config.to_dict(), default=str))


def train_command(point: Point, workdir: str, overrides: Mapping[str, Any]) -> list[str]:
  """The experiments.train command line of a point (run from the repository root)."""
  args = [sys.executable, "-m", "experiments.train", f"--config={point.config}"]
  args.append(f"--workdir={workdir}")
  return args + [f"--config.{k}={format_value(v)}" for k, v in overrides.items()]


def vmap_groups(expected: Sequence[Mapping[str, Any]], max_size: int = 0) -> list[list[int]]:
  """Indices of the resolved configs that can train as one program: equal apart from
  same_experiment.VMAPPED_KEYS (same config file and other overrides give that). Grid order
  within and between groups; a group larger than `max_size` (0: no cap) is split into the
  fewest parts of at most that size, their sizes as even as possible."""
  by_rest: dict[str, list[int]] = {}
  for i, config in enumerate(expected):
    vmapped = same_experiment.VMAPPED_KEYS
    rest = {k: v for k, v in same_experiment.flatten(config).items() if k not in vmapped}
    by_rest.setdefault(json.dumps(rest, sort_keys=True), []).append(i)
  groups = []
  for members in by_rest.values():
    parts = -(-len(members) // max_size) if max_size > 0 else 1
    size, extra = divmod(len(members), parts)
    start = 0
    for k in range(parts):
      stop = start + size + (k < extra)
      groups.append(members[start:stop])
      start = stop
  return sorted(groups)


def population_command(points_file: str) -> list[str]:
  """The experiments.train_population command line of a population's points file."""
  return [sys.executable, "-m", "experiments.train_population", f"--points={points_file}"]


def population_points(
  members: Sequence[tuple[Point, str, Mapping[str, Any]]],
) -> list[dict[str, Any]]:
  """experiments.train_population's points: {config, overrides, workdir} per member, from
  (point, workdir, overrides to pass)."""
  return [{"config": p.config, "overrides": dict(o), "workdir": w} for p, w, o in members]


def run_state(workdir: str, expected_config: Mapping[str, Any]) -> str:
  """'done' (completed/diverged run of this config), 'conflict' (of another one, or one whose
  config is recorded nowhere, or an unfinished run of more steps than the point's: a run
  is never shortened, or of another experiment: its run would refuse to continue it) or
  'todo'.

  A run its stop rule ended (status stopped_early, train.stop_when: train/stop_rule.py) was
  stopped on purpose: done while the point sets a stop rule (any rule: which one is not
  compared, as same_experiment.SWEEP ignores train.stop_when), 'todo' when it sets none: the
  sweep run without the rule resumes it from its checkpoint to train.steps."""
  summary = read_json(os.path.join(workdir, record_files.SUMMARY))
  status = summary.get("status") if isinstance(summary, dict) else None
  ruled = bool(dotted_key(expected_config, "train.stop_when"))
  # stopped early and nothing ran since (its summary, or its checkpoint when the summary is
  # lost or behind: resumed without the rule, then killed, it is not done)
  stopped = workdir_lib.stopped_early_summary(workdir) is not None
  finished = status in (run_status.COMPLETED, run_status.DIVERGED) or (stopped and ruled)
  config, _ = workdir_lib.recorded_config(workdir)  # config.json, else its checkpoint's
  if not finished:  # never started, interrupted or killed: (re)run, resuming its checkpoint
    steps = (config or {}).get("train.steps")
    shorter = isinstance(steps, int) and steps > dotted_key(expected_config, "train.steps")
    # another experiment (a --set since the kill): its run would refuse the folder, exit 2
    other = config is not None and same_experiment.changed_keys(
      config, expected_config, same_experiment.WORKDIR
    )
    return "conflict" if shorter or other else "todo"
  if config is None or same_experiment.changed_keys(config, expected_config, same_experiment.SWEEP):
    return "conflict"
  return "done"


def dotted_key(tree: Mapping[str, Any], key: str) -> Any:
  """tree["a"]["b"] of a nested config for key "a.b" (None where a part is missing)."""
  return same_experiment.flatten(tree).get(key)


def conflict_keys(workdir: str, expected: Mapping[str, Any]) -> str:
  """What a point's folder holds in place of its run: the keys on which its recorded config
  (config.json, else its checkpoint's) differs from the point's, or that none is recorded."""
  recorded, where = workdir_lib.recorded_config(workdir)
  if recorded is None:
    return "its config.json is missing or unreadable and no checkpoint records its config"
  policy = same_experiment.SWEEP
  keys = same_experiment.changed_keys(recorded, expected, policy)
  return f"differing keys ({where}): " + same_experiment.describe(keys, recorded, expected, policy)


def constant_lr_point(
  name: str,
  config: str,
  num_layers: int,
  lr: float,
  seed: int,
  steps: int,
  eval_every: int = 50,
  **overrides: Any,
) -> dict[str, Any]:
  """A point of the loss-vs-lr protocol (configs/sweeps/lr_sensitivity.py): `config` at
  `num_layers`, constant `lr` from step 0 (no warmup), `steps` steps, an eval every
  `eval_every`, full remat above 24 layers (speed and memory only), no per-layer diagnostics;
  `overrides` (dotted keys) change or add the rest."""
  return {
    "name": name,
    "config": config,
    "overrides": {
      "model.num_layers": num_layers,
      "opt.lr": lr,
      "opt.warmup_steps": 0,
      "opt.schedule": "constant",
      "train.steps": steps,
      "train.eval_every": eval_every,
      "seed": seed,
      "model.remat": "none" if num_layers <= 24 else "full",
      "diag.per_layer": False,
      **overrides,
    },
  }
