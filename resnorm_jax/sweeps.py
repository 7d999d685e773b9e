"""Sweeps: grids of training runs (configs/sweeps/*.py), their state, jobs and results.

The library half of scripts/sweep.py (its docstring: the command line). A grid file holds
data: `GRID`, a list of points {"config": "configs/x.py[:ARG]", "overrides": {...}, "name":
optional}. A point whose workdir holds a completed or diverged run of the same config is
done: "the same config" compares only what results depend on (`changed_keys`: logging keys
ignored, a key added after the run counts as unchanged while it keeps its default, a key
that moved (cli.MOVED_KEYS) is compared at its new place). Jobs run pinned to their own
cores or devices (`make_slots`), the longest first; results are tabulated with an outcome
per run (resnorm_jax/outcome.py). No JAX here.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax import cli
from resnorm_jax.outcome import STUCK_MARGIN, baseline, classify, is_finite_number

# The repository root: grid and config paths are relative to it, and the grid and config
# files import `configs.base` from it (scripts/sweep.py puts it on sys.path).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MOVED_KEYS = cli.MOVED_KEYS

STATUSES = ("trained", "stuck", "diverged", "interrupted", "failed", "pending", "unknown")
# Keys that change what a run logs or where, never its losses: not compared by run_state.
RESULT_NEUTRAL = (
  "name",
  "train.log_every",
  "train.eval_every",
  "train.checkpoint_every",
  "train.keep_checkpoints",
  "diag.",
  "dist.",
)
RECORDED_NOT_CONFIG = ("resolved_model", "data_split")  # config.json sections the run adds
POINT_KEYS = frozenset({"config", "overrides", "name"})
INTERRUPTED = "__interrupted__"  # key of run_points' result when a signal stopped it
POINT_FILE = "sweep_point.json"  # what the sweep launched in a workdir, and its exit status
Row = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Point:
  """One run of a grid: a config file and its overrides, run in <sweep_dir>/<name>."""

  name: str
  config: str
  overrides: dict[str, Any]
  index: int


# ------------------------------------------------------------------------------------------
# Grid -> points
# ------------------------------------------------------------------------------------------


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
    if name in names or not re.fullmatch(r"[A-Za-z0-9_.=+-]+", name):
      raise ValueError(f"{where}[{i}]: point name {name!r} is repeated or not a plain file name")
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

  Loads the config file the way experiments/train.py does, so a misspelt key, a wrong type
  or a missing file is refused here, before any point runs.
  """
  from ml_collections import ConfigDict

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
  except (OSError, ImportError, ValueError, KeyError, AttributeError, TypeError) as e:
    msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    raise ValueError(f"point {point.name} ({point.config}): {msg}") from None
  return overrides, json.loads(json.dumps(config.to_dict(), default=str))


def train_command(point: Point, workdir: str, overrides: Mapping[str, Any]) -> list[str]:
  """The experiments.train command line of a point (run from the repository root)."""
  args = [sys.executable, "-m", "experiments.train", f"--config={point.config}"]
  args.append(f"--workdir={workdir}")
  return args + [f"--config.{k}={format_value(v)}" for k, v in overrides.items()]


def _read_json(path: str) -> Any:
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError):
    return None


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  out: dict[str, Any] = {}
  for k, v in tree.items():
    if isinstance(v, Mapping):
      out.update(_flatten(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = json.loads(json.dumps(v, default=str))
  return out


def _neutral(key: str) -> bool:
  return any(key == n or (n.endswith(".") and key.startswith(n)) for n in RESULT_NEUTRAL)


def changed_keys(recorded: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
  """Keys whose value a finished run (its config.json) and a point's config disagree on.

  Only what results depend on: logging keys are ignored (RESULT_NEUTRAL); a recorded key
  that moved is read at its new place (MOVED_KEYS); a key the run predates counts as
  unchanged while the point keeps the schema's default, which reproduces the old runs.
  """
  have = {MOVED_KEYS.get(k, k): v for k, v in _flatten(recorded).items()}
  have = {k: v for k, v in have.items() if k.split(".")[0] not in RECORDED_NOT_CONFIG}
  want = _flatten(expected)
  from configs.base import get_config as base_config  # the schema's defaults

  defaults = _flatten(base_config().to_dict())
  changed = []
  for key in sorted(set(have) | set(want)):
    if _neutral(key):
      continue
    if key not in have:
      if key in defaults and want[key] == defaults[key]:
        continue
    if have.get(key, "<absent>") != want.get(key, "<absent>"):
      changed.append(key)
  return changed


def run_state(workdir: str, expected_config: Mapping[str, Any]) -> str:
  """'done' (completed/diverged run of this config), 'conflict' (of another one) or 'todo'."""
  summary = _read_json(os.path.join(workdir, "summary.json"))
  if not isinstance(summary, dict) or summary.get("status") not in ("completed", "diverged"):
    return "todo"  # never started, interrupted or killed: (re)run, resuming its checkpoint
  config = _read_json(os.path.join(workdir, "config.json"))
  if isinstance(config, dict) and changed_keys(config, expected_config):
    return "conflict"
  return "done"


def estimated_cost(config: Mapping[str, Any]) -> float:
  """Relative run time of a resolved config: steps x tokens x per-token FLOPs of the stack."""
  m, t = config.get("model", {}), config.get("train", {})
  d, f, n = m.get("d_model", 64), m.get("d_ff", 4 * m.get("d_model", 64)), m.get("num_layers", 1)
  seq = t.get("seq_len", 128)
  per_token = n * (4 * d * d + 2 * d * f + 2 * seq * d) + d * m.get("vocab_size", 256)
  return float(t.get("steps", 1) * t.get("batch_size", 1) * seq * per_token)


# ------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Slot:
  """Where one job runs: the cores it is pinned to and the environment it adds."""

  label: str
  cpus: tuple[int, ...] | None  # None: not pinned (all cores)
  env: dict[str, str]


ACCELERATORS = ("cpu", "gpu", "tpu")
# One device per job: the variables that make a process see only its own device.
_DEVICE_ENV = {
  "gpu": lambda i: {"CUDA_VISIBLE_DEVICES": str(i)},
  "tpu": lambda i: {
    "TPU_VISIBLE_CHIPS": str(i),
    "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
    "TPU_PROCESS_BOUNDS": "1,1,1",
    "TPU_PROCESS_PORT": str(8476 + i),
    "TPU_MESH_CONTROLLER_PORT": str(8476 + i),
  },
}


def available_cpus() -> list[int]:
  """The cores this process may run on."""
  return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def count_devices(accelerator: str) -> int:
  """Accelerators visible here: CUDA_VISIBLE_DEVICES / nvidia-smi for GPUs, /dev/accel* TPUs."""
  if accelerator == "gpu":
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
      return len([v for v in visible.split(",") if v.strip()])
    try:
      out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
      return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())
  if accelerator == "tpu":
    import glob

    return len(glob.glob("/dev/accel*")) or len(glob.glob("/dev/vfio/[0-9]*"))
  return 0


def make_slots(
  jobs: str, threads_per_job: int, accelerator: str = "cpu", cpus: Sequence[int] | None = None
) -> list[Slot]:
  """The job slots of `--jobs` (a number or 'auto'): pinned core groups, or devices.

  One job on a CPU stays unpinned (it uses every core, as a single run does). Several jobs
  get disjoint groups of `threads_per_job` cores; with one core per job XLA:CPU is made
  single-threaded too (its Eigen pool would otherwise start a thread per machine core).
  """
  if accelerator not in ACCELERATORS:
    raise ValueError(f"--accelerator={accelerator!r} is not one of {', '.join(ACCELERATORS)}")
  if threads_per_job < 1:
    raise ValueError(f"--threads_per_job={threads_per_job} must be >= 1")
  if accelerator != "cpu":
    n_dev = count_devices(accelerator)
    if n_dev < 1:
      raise ValueError(f"--accelerator={accelerator}: no {accelerator.upper()} is visible here")
    n = n_dev if jobs == "auto" else _positive_jobs(jobs)
    if n > n_dev:
      raise ValueError(f"--jobs={jobs}: only {n_dev} {accelerator.upper()}s are visible")
    return [Slot(f"{accelerator}{i}", None, _DEVICE_ENV[accelerator](i)) for i in range(n)]
  cpus = list(available_cpus() if cpus is None else cpus)
  groups = max(1, len(cpus) // threads_per_job)
  n = groups if jobs == "auto" else _positive_jobs(jobs)
  if n == 1:
    return [Slot("all cores", None, {})]
  if n * threads_per_job > len(cpus):
    raise ValueError(
      f"--jobs={jobs} x --threads_per_job={threads_per_job} needs {n * threads_per_job} cores; "
      f"{len(cpus)} are available ({cpus})"
    )
  slots = []
  for i in range(n):
    group = tuple(cpus[i * threads_per_job : (i + 1) * threads_per_job])
    flags = os.environ.get("XLA_FLAGS", "")
    if threads_per_job == 1:
      flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    label = f"cpu{group[0]}" if len(group) == 1 else f"cpu{group[0]}-{group[-1]}"
    slots.append(Slot(label, group, {"XLA_FLAGS": flags}))
  return slots


def _positive_jobs(jobs: str) -> int:
  try:
    n = int(jobs)
  except ValueError:
    n = 0
  if n < 1:
    raise ValueError(f"--jobs={jobs!r} must be 'auto' or a positive integer")
  return n


_STEP_LINE = re.compile(r"step\s+(\d+)/(\d+) \| loss (\S+).*?ETA (\S+)")


def log_progress(log_path: str) -> tuple[int, int, str, str] | None:
  """(step, steps, loss, ETA) of the last step line in a train.log, or None."""
  try:
    with open(log_path, "rb") as f:
      f.seek(max(0, os.path.getsize(log_path) - 8192))
      tail = f.read().decode(errors="replace")
  except OSError:
    return None
  found = _STEP_LINE.findall(tail)
  if not found:
    return None
  step, steps, loss, eta = found[-1]
  return int(step), int(steps), loss, eta


@dataclasses.dataclass
class Job:
  """A point to run: its workdir, command and estimated cost (for order and ETA)."""

  point: Point
  workdir: str
  command: list[str]
  cost: float = 1.0


def progress_lines(
  running: Mapping[str, Any], done_cost: float, total_cost: float, elapsed: float
) -> list[str]:
  """A line per running job and the sweep's overall ETA (cost-weighted throughput)."""
  lines, progress_cost = [], done_cost
  for job, slot, _, _, t0 in running.values():
    info = log_progress(os.path.join(job.workdir, "train.log"))
    if info is None:
      since = cli.format_duration(time.time() - t0)
      lines.append(f"  {slot.label}: {job.point.name} starting ({since})")
      continue
    step, steps, loss, eta = info
    progress_cost += job.cost * step / max(steps, 1)
    lines.append(f"  {slot.label}: {job.point.name} step {step}/{steps} loss {loss} ETA {eta}")
  frac = progress_cost / total_cost if total_cost else 0.0
  eta = cli.format_duration(elapsed * (1 - frac) / frac) if frac > 0.02 else "?"
  lines.insert(
    0, f"sweep {100 * frac:.0f}% of the estimated work in {cli.format_duration(elapsed)}; ETA {eta}"
  )
  return lines


def run_points(
  jobs: Sequence[Job], slots: Sequence[Slot], progress_every: float = 60.0
) -> dict[str, int]:
  """Runs jobs, the costliest first, one per free slot; the exit status per point name.

  Children run in their own session, pinned to their slot's cores, with output in
  <workdir>/train.log. A SIGINT/SIGTERM to the sweep is passed on once to every running
  child (which saves a checkpoint and exits 'interrupted'); no new point starts. Returns
  early in that case.
  """
  pending = sorted(jobs, key=lambda j: -j.cost)
  free, running, codes = list(slots), {}, {}
  total_cost, done_cost = sum(j.cost for j in jobs), 0.0
  stop: list[int] = []
  forwarded = False
  handled = (signal.SIGINT, signal.SIGTERM)
  old = {s: signal.signal(s, lambda signum, _: stop.append(signum)) for s in handled}
  t_start = last_progress = time.time()
  try:
    while (pending and not stop) or running:
      while pending and not stop and free:
        job, slot = pending.pop(0), free.pop(0)
        os.makedirs(job.workdir, exist_ok=True)
        log = open(os.path.join(job.workdir, "train.log"), "a")
        proc = subprocess.Popen(
          job.command,
          cwd=ROOT,
          stdout=log,
          stderr=subprocess.STDOUT,
          start_new_session=True,
          env={**os.environ, **slot.env},
          preexec_fn=(lambda c=slot.cpus: os.sched_setaffinity(0, c)) if slot.cpus else None,
        )
        running[job.point.name] = (job, slot, proc, log, time.time())
        print(f"[{job.point.index + 1}] {job.point.name}: started on {slot.label}", flush=True)
      if stop and not forwarded:
        for _, _, proc, _, _ in running.values():
          proc.send_signal(signal.SIGINT)
        forwarded = True
        print(f"signal {stop[0]}: stopping; waiting for running points to save", flush=True)
      time.sleep(0.2)
      for name, (job, slot, proc, log, t0) in list(running.items()):
        if proc.poll() is None:
          continue
        log.close()
        del running[name]
        free.append(slot)
        done_cost += job.cost
        codes[name] = proc.returncode
        _record_exit(job.workdir, proc.returncode)
        row = run_row(job.workdir)
        print(
          f"[{job.point.index + 1}] {name}: {row['outcome']} (exit {proc.returncode}, eval "
          f"{_fmt(row['final_eval_loss'])}, no-context {_fmt(row['baseline'])}) in "
          f"{cli.format_duration(time.time() - t0)}; log {os.path.join(job.workdir, 'train.log')}",
          flush=True,
        )
      if running and progress_every > 0 and time.time() - last_progress >= progress_every:
        last_progress = time.time()
        lines = progress_lines(running, done_cost, total_cost, last_progress - t_start)
        print("\n".join(lines), flush=True)
  finally:
    for s, handler in old.items():
      signal.signal(s, handler)
  if stop:
    codes[INTERRUPTED] = 128 + stop[0]
  return codes


def _record_exit(workdir: str, returncode: int) -> None:
  path = os.path.join(workdir, POINT_FILE)
  info = _read_json(path) or {}
  info["returncode"] = returncode
  cli.write_json(path, info)


# ------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------


def _dotted(tree: Any, key: str) -> Any:
  for part in key.split("."):
    if not isinstance(tree, Mapping) or part not in tree:
      return None
    tree = tree[part]
  return tree


def _variant(config_path: str, name: str) -> str:
  stem = os.path.splitext(os.path.basename(config_path.split(":")[0]))[0] if config_path else name
  return re.sub(r"_\d+L$", "", stem)


def run_row(workdir: str, margin: float = STUCK_MARGIN) -> Row:
  """One results row of a run folder (point info, resolved depth and seed, summary)."""
  point = _read_json(os.path.join(workdir, POINT_FILE)) or {}
  summary = _read_json(os.path.join(workdir, "summary.json"))
  config = _read_json(os.path.join(workdir, "config.json")) or {}
  status = classify(summary, margin)
  if status == "pending" and point.get("returncode") not in (None, 0):
    status = "failed"
  summary = summary or {}
  loss, plateau = summary.get("final_eval_loss"), baseline(summary)
  num_layers = _dotted(config, "resolved_model.num_layers") or _dotted(config, "model.num_layers")
  return {
    "name": os.path.basename(os.path.normpath(workdir)),
    "config": point.get("config", config.get("name", "")),
    "variant": _variant(point.get("config", ""), config.get("name", "")),
    "num_layers": num_layers,
    "seed": config.get("seed"),
    "outcome": status,
    "final_eval_loss": loss,
    "baseline": plateau,  # held-out unigram cross-entropy (train-split entropy if older)
    "gap": plateau - loss if is_finite_number(loss) and is_finite_number(plateau) else None,
    "unigram_entropy": summary.get("unigram_entropy"),
    "final_eval_tokens": summary.get("final_eval_tokens"),
    "best_eval_loss": summary.get("best_eval_loss"),
    "final_train_loss": summary.get("final_train_loss"),
    "steps": summary.get("steps"),
    "wall_seconds": summary.get("wall_seconds"),
    "_index": point.get("index", 1 << 30),
    "_overrides": point.get("overrides", {}),
    "_config": config,
  }


def collect(sweep_dir: str, margin: float = STUCK_MARGIN) -> list[Row]:
  """Rows of every run folder under `sweep_dir`, in grid order; varied keys as columns.

  A column per override key whose resolved value differs between runs (model.num_layers
  and seed already have theirs).
  """
  dirs = sorted(
    d
    for d in (os.path.join(sweep_dir, n) for n in os.listdir(sweep_dir))
    if os.path.isdir(d)
    and any(os.path.exists(os.path.join(d, f)) for f in (POINT_FILE, "summary.json"))
  )
  rows = sorted((run_row(d, margin) for d in dirs), key=lambda r: (r["_index"], r["name"]))
  keys: list[str] = []
  for r in rows:
    keys += [k for k in r["_overrides"] if k not in keys and k not in ("model.num_layers", "seed")]
  for r in rows:
    r.update({k: _dotted(r["_config"], k) for k in keys})
  varied = [k for k in keys if len({json.dumps(r[k]) for r in rows}) > 1]
  order = ["name", "config", "variant", "num_layers", "seed", *varied]
  return [
    {k: r[k] for k in order + [k for k in r if k not in order and k not in keys]} for r in rows
  ]


def seed_groups(rows: Sequence[Row]) -> list[Row]:
  """Mean and spread of the final eval loss over runs that differ only by seed (n >= 2)."""
  public = [k for k in rows[0] if not k.startswith("_")] if rows else []
  key_cols = [k for k in public[: public.index("outcome")] if k not in ("name", "seed")]
  groups: dict[tuple, list[Row]] = {}
  for r in rows:
    groups.setdefault(tuple(json.dumps(r[k]) for k in key_cols), []).append(r)
  out = []
  for members in groups.values():
    if len(members) < 2:
      continue
    losses = [r["final_eval_loss"] for r in members if is_finite_number(r["final_eval_loss"])]
    statuses = [r["outcome"] for r in members]
    out.append(
      {
        **{k: members[0][k] for k in key_cols},
        "n": len(members),
        "seeds": " ".join(str(r["seed"]) for r in members),
        "statuses": " ".join(f"{s}:{statuses.count(s)}" for s in STATUSES if s in statuses),
        "final_eval_mean": statistics.fmean(losses) if losses else None,
        "final_eval_std": statistics.stdev(losses) if len(losses) > 1 else None,
        "final_eval_min": min(losses, default=None),
        "final_eval_max": max(losses, default=None),
      }
    )
  return out


def _fmt(v: Any) -> str:
  if isinstance(v, float):
    return f"{v:.4f}" if math.isfinite(v) else str(v)
  return "" if v is None else str(v)


def markdown_table(rows: Sequence[Row]) -> str:
  """A Markdown table of the rows' public columns."""
  cols = [k for k in rows[0] if not k.startswith("_")]
  lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
  lines += ["| " + " | ".join(_fmt(r[k]) for k in cols) + " |" for r in rows]
  return "\n".join(lines) + "\n"


def write_results(sweep_dir: str, rows: Sequence[Row]) -> list[str]:
  """results.csv, results.md (and results_seeds.csv when runs differ only by seed)."""
  if not rows:
    return []
  cols = [k for k in rows[0] if not k.startswith("_")]
  paths = [os.path.join(sweep_dir, "results.csv"), os.path.join(sweep_dir, "results.md")]
  with open(paths[0], "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
  counts = ", ".join(f"{s} {sum(r['outcome'] == s for r in rows)}" for s in STATUSES)
  md = f"# {os.path.basename(os.path.normpath(sweep_dir))}\n\n{len(rows)} runs: {counts}\n\n"
  md += markdown_table(rows)
  groups = seed_groups(rows)
  if groups:
    paths.append(os.path.join(sweep_dir, "results_seeds.csv"))
    with open(paths[-1], "w", newline="") as f:
      writer = csv.DictWriter(f, fieldnames=list(groups[0]))
      writer.writeheader()
      writer.writerows(groups)
    md += "\n## Over seeds (final eval loss)\n\n" + markdown_table(groups)
  with open(paths[1], "w") as f:
    f.write(md)
  return paths


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
