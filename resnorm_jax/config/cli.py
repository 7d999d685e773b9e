"""Shared command-line plumbing of the entry points: config files, flag errors, exit 2."""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax.config.config_file import (
  _from_config_file,
  check_config_type,
  config_file_error,
  load_config_file,
)

# Short names of the keys most often overridden, for run folder names (`L12-warmup200`).
_SHORT_KEYS = {
  "num_layers": "L",
  "d_model": "d",
  "num_heads": "heads",
  "d_ff": "ff",
  "warmup_steps": "warmup",
  "batch_size": "bs",
  "seq_len": "T",
}
# Overrides that change where or how a run executes, not what it computes.
_UNNAMED_PREFIXES = ("mesh.", "dist.")
# Config keys that moved: old dotted key -> new one (configs/base.py re-exports it as the
# schema's record). The old key is refused with the new one named; a config.json or
# checkpoint written before the move is read at the new place (scripts/sweep.py's
# skip-finished comparison, resume_policy.check_compatible).
MOVED_KEYS: dict[str, str] = {
  "train.remat": "model.remat",
  "train.scan_unroll": "model.scan_unroll",
  "train.dtype": "model.dtype",
}


def refuse_moved_keys(keys: Iterable[str], where: str = "--config") -> None:
  """ValueError naming the new key if any of `keys` (dotted) is a key that moved."""
  for key in keys:
    if key in MOVED_KEYS:
      raise ValueError(
        f"{where}: config key {key!r} moved to {MOVED_KEYS[key]!r}; "
        f"use --config.{MOVED_KEYS[key]}=... instead"
      )


def renamed_moved_keys(flat: Mapping[str, Any]) -> dict[str, Any]:
  """A flat {dotted key: value} written before a move, with each moved key at its new place."""
  return {MOVED_KEYS.get(k, k): v for k, v in flat.items()}


def check_folder_name(value: Any, what: str) -> None:
  """ValueError unless `value` is one folder name (no `/`, not `.` or `..`): a run or point
  name that becomes a folder under runs/ or a sweep folder never leaves it."""
  bad = not isinstance(value, str) or not value or value in (".", "..")
  if bad or "/" in value or "\\" in value or "\x00" in value:
    raise ValueError(
      f"{what}={value!r} is not a folder name: one path component without '/', "
      "and not '.' or '..' (it names a folder inside the runs or sweep folder)"
    )


def _format_value(value: Any) -> str:
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, float):
    return f"{value:g}"
  if isinstance(value, str) and "/" in value:  # a path: its file name
    return os.path.basename(value.rstrip("/")) or value
  return str(value)


def override_label(overrides: Mapping[str, Any], max_len: int = 60) -> str:
  """`--config.model.num_layers=12 --config.opt.warmup_steps=200` -> `L12-warmup200`.

  Each override as its last key (shortened for a few) and value; numbers follow the key
  directly, words after `_` (`norm_position_pre`). Mesh and distribution keys are left out;
  characters a folder name should not hold become `_`; past `max_len` characters the
  remaining overrides are counted (`-3more`), not named.
  """
  parts = []
  for key, value in overrides.items():
    if key.startswith(_UNNAMED_PREFIXES):
      continue
    last = key.split(".")[-1]
    text = _format_value(value)
    short = _SHORT_KEYS.get(last, last)
    part = f"{short}{text}" if text[:1].isdigit() else f"{short}_{text}"
    parts.append(re.sub(r"[^A-Za-z0-9_.+=-]", "_", part))
  kept: list[str] = []
  for i, part in enumerate(parts):
    if len("-".join([*kept, part])) > max_len:
      kept.append(f"{len(parts) - i}more")
      break
    kept.append(part)
  return "-".join(kept)


def resume_command(args: Sequence[str], workdir: str) -> str:
  """`python -m experiments.train ARGS --workdir=WORKDIR`, any --workdir in ARGS replaced."""
  import shlex

  kept, skip = [], False
  for a in args:
    if skip:
      skip = False
    elif a in ("--workdir", "-workdir"):
      skip = True  # its value is the next argument
    elif not a.startswith(("--workdir=", "-workdir=")):
      kept.append(a)
  return shlex.join(["python", "-m", "experiments.train", *kept, f"--workdir={workdir}"])


def config_label(config: ConfigDict) -> str:
  """A short name for plots: the config name without its depth (`postnorm_96L` -> postnorm)."""
  return re.sub(r"_\d+L(?=$|-)", "", config.name)


def load_configs(
  main: ConfigDict | None, compare: Sequence[str], overrides: Mapping[str, Any]
) -> list[tuple[str, ConfigDict]]:
  """[(label, config)]: `main` and each `compare` FILE[:ARG], all with the same overrides."""
  if main is None:
    raise ValueError("--config=FILE[:ARG] is required (e.g. configs/postnorm_96L.py)")
  refuse_moved_keys(overrides)
  configs = [main]
  for spec in compare:
    c = load_config_file(spec)
    try:
      c.update_from_flattened_dict(dict(overrides))
    except (KeyError, AttributeError, TypeError) as e:
      raise ValueError(f"{spec}: override {e} does not apply") from None
    configs.append(c)
  labels: list[str] = []
  for c in configs:
    label = config_label(c)
    labels.append(label if label not in labels else f"{label}#{len(labels)}")
  return list(zip(labels, configs, strict=True))


def parse_depths(values: Sequence[str]) -> list[int]:
  """['6', '12'] -> [6, 12]; ValueError unless every depth is a positive integer."""
  try:
    depths = [int(v) for v in values]
  except ValueError:
    raise ValueError(f"--depths={','.join(values)}: expected positive integers") from None
  if any(d < 1 for d in depths):
    raise ValueError(f"--depths={','.join(values)}: expected positive integers")
  return depths


def comparison_from_flags(
  main: ConfigDict | None, compare: Sequence[str], depths: Sequence[str]
) -> tuple[list[tuple[str, ConfigDict]], list[int]]:
  """The experiment scripts' inputs: [(label, config)] with --config.* overrides, and depths.

  Every `--config.a.b=v` given on the command line applies to `main` (config_flags did it)
  and to each `--compare` config; ValueError on a bad config, override or depth.
  """
  from absl import flags
  from ml_collections import config_flags

  overrides = config_flags.get_override_values(flags.FLAGS["config"])
  return load_configs(main, compare, overrides), parse_depths(depths)


def parse_flags_or_exit(argv: list[str]) -> list[str]:
  """absl flag parsing where bad input (a flag, a config key or value) exits 2, no traceback."""
  from absl import flags

  try:
    refuse_moved_keys(
      a[len("--config.") :].split("=")[0] for a in argv if a.startswith("--config.")
    )
    _refuse_missing_config_file(argv)
    spec = _config_spec(argv)
    if spec is not None:  # run the file once ourselves: its own error, in one line (config_flags
      # turns get_config() -> None into "--config is required" and loses a JSONDecodeError's)
      load_config_file(spec)
    try:
      rest = flags.FLAGS(argv)
    except flags.Error:
      raise
    except Exception as e:  # noqa: BLE001 - raised by running a --config file (it is Python)
      spec = _config_spec(argv)
      if spec is None or not _from_config_file(e, spec):
        raise
      raise ValueError(config_file_error(spec, e)) from None
    spec = _config_spec(argv)
    if spec is not None and "config" in flags.FLAGS and flags.FLAGS["config"].value is not None:
      check_config_type(spec, flags.FLAGS["config"].value)
    return rest
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    if "Traceback" in msg:  # config_flags wraps errors raised by get_config(arg)
      msg = msg.split("Traceback")[0].strip() + " " + msg.strip().splitlines()[-1]
    if isinstance(e, (KeyError, AttributeError)):  # a misspelt --config.a.b key
      msg = msg.replace("\\n", " ").replace("\\'", "").strip("'")
      keys = [a.split("=")[0] for a in argv if a.startswith("--config.")]
      # the flag whose misspelt part the message names (not the first --config flag)
      named = [k for k in keys if any(_word_in(p, msg) for p in k[len("--config.") :].split("."))]
      key = (named or keys or [""])[0]
      msg = f"unknown config key in {key!r}: {msg}"
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def _word_in(word: str, text: str) -> bool:
  return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None


def run_app(main, module_name: str) -> None:
  """absl's app.run(main) for an entry point, whether it runs as `python -m MODULE` or as its
  console command (pyproject.toml's [project.scripts]). absl's --help lists the flags of the
  module that is sys.argv[0] and prints __main__'s docstring; under a console command that is
  the generated wrapper (no flags, no docstring: only "Try --helpfull"), so the module's own
  flags are made the wrapper's key flags and its docstring the usage text: --help prints what
  `python -m` prints."""
  from absl import app, flags

  wrapper, module = sys.modules["__main__"], sys.modules[module_name]
  if module is not wrapper:
    if not wrapper.__doc__:
      wrapper.__doc__ = module.__doc__
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
      flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  app.run(main, flags_parser=parse_flags_or_exit)


def _config_spec(argv: Sequence[str]) -> str | None:
  """The FILE[:ARG] of --config in `argv`, None without one."""
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      return a[len("--config=") :]
    if a == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def _refuse_missing_config_file(argv: Sequence[str]) -> None:
  """ValueError naming a --config=FILE[:ARG] whose file does not exist (config_flags loads it
  lazily and raises an OSError with a traceback at the first use)."""
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      spec = a[len("--config=") :]
    elif a == "--config" and i + 1 < len(argv):
      spec = argv[i + 1]
    else:
      continue
    path = spec.partition(":")[0]
    if not os.path.isfile(path):
      raise ValueError(f"--config={spec}: config file {path!r} not found")


def _coerce_variant(key: str, old, text: str):
  """`text` as the type of the config's current value `old` (as config_flags parses)."""
  if isinstance(old, bool):
    if text not in ("true", "false"):
      raise ValueError(f"--variant {key}={text}: expected true or false")
    return text == "true"
  if old is None or isinstance(old, str):
    return text
  try:
    return type(old)(text)
  except (TypeError, ValueError):
    raise ValueError(
      f"--variant {key}={text}: expected {type(old).__name__} like {old!r}"
    ) from None


def apply_variant(config, spec: str):
  """A copy of `config` with spec's `k=v` pairs (comma-separated) set; ValueError names a bad
  key or value."""
  out = copy.deepcopy(config)
  pairs = [p for p in spec.split(",") if p]
  if not pairs:
    raise ValueError(f"--variant={spec!r}: expected k=v[,k=v...]")
  for pair in pairs:
    key, sep, text = pair.partition("=")
    if not sep or not key:
      raise ValueError(f"--variant={spec!r}: {pair!r} is not k=v")
    refuse_moved_keys([key], where=f"--variant={spec!r}")
    *path, leaf = key.split(".")
    node = out
    try:
      for part in path:
        node = node[part]
      old = node[leaf]
    except (KeyError, AttributeError, TypeError):
      raise ValueError(f"--variant={spec!r}: no config key {key!r}") from None
    node[leaf] = _coerce_variant(key, old, text)
  return out


def write_json(path: str, obj: Any) -> None:
  """Writes `obj` as indented, key-sorted JSON, then renames into place (a reader never sees
  half a file); a local path or gs://..., through etils.epath. A local path or its
  temporary file that is a symbolic link is refused (nofollow.SymlinkRefused), never followed."""
  from etils import epath

  from resnorm_jax.files import nofollow as fs

  text = json.dumps(obj, indent=2, sort_keys=True, default=str)
  tmp = epath.Path(path + ".tmp")
  tmp.parent.mkdir(parents=True, exist_ok=True)
  if fs.is_remote(path):
    tmp.write_text(text)
  else:  # never through a symbolic link, at the file or its temporary name (ValueError)
    fs.refuse_symlink(path)
    with fs.open_nofollow(tmp) as f:
      f.write(text)
  tmp.replace(path)


def format_duration(seconds: float) -> str:
  """`1h02m03s` or `2m03s`: run times, ETAs and progress lines."""
  seconds = max(0, int(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def fail(msg: str) -> None:
  """Bad input: a one-line message on stderr and exit status 2."""
  print(f"error: {msg}", file=sys.stderr)
  sys.exit(2)
