"""Runs a grid of training runs (configs/sweeps/*.py) and tabulates how each one ended.

python scripts/sweep.py --grid=configs/sweeps/stability_map.py [--sweep_dir=DIR]
    [--jobs=auto|N] [--threads_per_job=1] [--accelerator=cpu|gpu|tpu] [--dry_run]
    [--max_steps=N] [--set=train.eval_every=10 ...] [--filter=REGEX] [--collect_only]
    [--stuck_margin=0.1] [--progress_every=60] [--vmap [--vmap_max=M]]
    [--submit=slurm [--max_concurrent=N] [--sbatch_args='--partition=gpu --time=4:00:00']]

A grid file holds data: `GRID`, a list of points {"config": "configs/x.py[:ARG]",
"overrides": {"dotted.key": value, ...}, "name": optional}. Each point runs as
`python -m experiments.train --config=... --workdir=<sweep_dir>/<name> --config.k=v ...`.

Jobs: `--jobs=N` runs N points at once, each pinned to its own `--threads_per_job` cores
(`os.sched_setaffinity` in the child, and single-threaded XLA:CPU when a job has one core),
so runs do not fight over cores: unpinned, two runs at once on 2 cores are each several times
slower; pinned, small runs finish ~1.7x sooner in all (docs/benchmarks.md, section 6).
`--jobs=auto` is one job per group of `--threads_per_job` available cores. With
`--accelerator=gpu` (or `tpu`) jobs are spread over devices instead, one device per job via
CUDA_VISIBLE_DEVICES (TPU_VISIBLE_CHIPS). The longest points (estimated from depth, width,
batch and steps) start first, so the last minutes of a sweep are not one core working alone.
Every `--progress_every` seconds a line per running job (step, loss, ETA) and an overall ETA.

`--vmap`: points that differ only in opt.lr and seed (same config file, same other overrides)
run as one program, `python -m experiments.train_population --points=<first>/population_points.json`
(resnorm_jax/train/population/run.py: one vmapped step trains them all), at most `--vmap_max` per
program; each still writes its own ordinary run folder, and a point with no such neighbour
runs as an ordinary job. A program is one job (with --jobs, programs run side by side); its
log is its first point's train.log. On a 2-core CPU it is no faster than pinned jobs
(docs/benchmarks.md, "A sweep as one program"): it is made for accelerators.

A point whose workdir holds a completed or diverged run of the same config is skipped, so a
stopped sweep continues where it was, and an interrupted point resumes from its checkpoint; a
run its stop rule ended (`stopped_early`, train.stop_when: resnorm_jax/train/stop_rule.py) is
skipped while the sweep sets a rule, and resumed to the end by a sweep that sets none.
"The same config" compares only what a run's results depend on (`same_experiment.changed_keys`,
its SWEEP policy): keys that only change logging are ignored, a key added to the schema after
the run counts as unchanged while it keeps its default, and a key that moved
(configs/base.MOVED_KEYS) is compared at its new place. Every point is checked (config file,
keys, types) before anything runs, and every pending point's local data files (data.path,
data.val_path: a file, folder or glob that matches a file; gs:// paths are left to the run):
one missing refuses the sweep (exit status 2) naming each such point and path, before anything
starts. A point whose process fails says why on its line (exit status, the last error line of
its train.log), in its sweep_point.json, and in results.csv (columns exit_code and error, there
when a run failed). At the end, and with --collect_only, every run's summary.json goes into
<sweep_dir>/results.csv and results.md, with an outcome per run: trained, stuck (final eval
loss not --stuck_margin nats below the held-out unigram cross-entropy), diverged, stopped_early,
interrupted, failed or pending; and, when points differ only by seed, the mean and spread over seeds
(results_seeds.csv). No JAX here.

`--submit=slurm`: the unfinished points go to SLURM as one job array instead of running here
(resnorm_jax/sweeps/slurm.py): array task i runs point i's command above, into its folder, with
--cpus-per-task=--threads_per_job (and one GPU with --accelerator=gpu), at most
--max_concurrent at once, requeued ahead of the time limit and after a preemption (it
resumes). Points still queued from an earlier submission are not submitted again. With
--dry_run it prints the sbatch script. Once the tasks have ended, `--collect_only` builds
the same results as a local sweep.
"""

from __future__ import annotations

import os
import re
import shlex
import sys

import resnorm_jax
from resnorm_jax.config import cli  # (no JAX)
from resnorm_jax.data.fs import read_json
from resnorm_jax.files.nofollow import SymlinkRefused, refuse_symlink
from resnorm_jax.runs.outcome import STUCK_MARGIN
from resnorm_jax.runs.sweep_point import POINT_FILE, refresh_records, with_failures
from resnorm_jax.runs.sweep_results import collect, write_results
from resnorm_jax.sweeps import slurm
from resnorm_jax.sweeps.grid import (
  conflict_keys,
  load_grid,
  parse_sets,
  resolve,
  root_path,
  run_state,
  train_command,
)
from resnorm_jax.sweeps.jobs import (
  Job,
  dry_run_total,
  estimated_cost,
  missing_data,
  population_jobs,
  seconds_per_cost,
)
from resnorm_jax.sweeps.runner import INTERRUPTED, run_points
from resnorm_jax.sweeps.slots import ACCELERATORS, make_slots

# The checkout this script is in: its points run this checkout's code.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_REEXEC = "RESNORM_JAX_SWEEP_CHECKOUT"


def run_this_checkout() -> None:
  """Runs this script again on this checkout's package when the one imported is another
  checkout's (an editable install made in a first checkout): its config files, its children
  (sweep_runner runs them from the package's root) and their provenance then all come from
  the checkout the sweep was started in."""
  if os.path.realpath(resnorm_jax.ROOT) == os.path.realpath(HERE):
    return
  if not os.path.isfile(os.path.join(HERE, "resnorm_jax", "__init__.py")):
    return  # a copy of the script alone: the installed package is the only one
  if os.environ.get(_REEXEC) == HERE:
    cli.fail(f"{HERE}'s package cannot be imported before {resnorm_jax.ROOT}'s")
  path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH", "")) if p)
  env = {**os.environ, "PYTHONPATH": path, _REEXEC: HERE}
  os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


def _define_flags() -> None:
  from absl import flags

  flags.DEFINE_string("grid", None, "Grid file exposing GRID (configs/sweeps/*.py).")
  flags.DEFINE_string(
    "sweep_dir", None, "Runs go to <sweep_dir>/<point>; default runs/sweeps/<grid>."
  )
  flags.DEFINE_string(
    "jobs",
    "1",
    "Points run at once, each pinned to its own cores (or device); 'auto': one "
    "per --threads_per_job available cores (or per device).",
  )
  flags.DEFINE_integer("threads_per_job", 1, "Cores per job when --jobs > 1.")
  flags.DEFINE_enum("accelerator", "cpu", list(ACCELERATORS), "What --jobs spreads over.")
  flags.DEFINE_integer("parallel", None, "Old spelling of --jobs (refused with --jobs).")
  flags.DEFINE_float("progress_every", 60.0, "Seconds between progress reports; 0: none.")
  flags.DEFINE_bool(
    "vmap",
    False,
    "Points that differ only in opt.lr and seed run as one program (one vmapped step).",
  )
  flags.DEFINE_integer("vmap_max", 0, "Most points in one program (memory); 0: no cap.")
  flags.DEFINE_bool("dry_run", False, "Print the commands and what would be skipped; run nothing.")
  flags.DEFINE_integer("max_steps", None, "Cap train.steps of every point (quick runs).")
  flags.DEFINE_multi_string("set", [], "dotted.key=value applied to every point (repeatable).")
  flags.DEFINE_string("filter", None, "Only points whose name matches this regex.")
  flags.DEFINE_bool("collect_only", False, "Only collect results of the runs in --sweep_dir.")
  flags.DEFINE_enum("submit", None, ["slurm"], "Submit the points to a scheduler: a job array.")
  flags.DEFINE_integer("max_concurrent", None, "--submit=slurm: array tasks running at once.")
  flags.DEFINE_string("sbatch_args", "", "--submit=slurm: more sbatch options, --opt=value each.")
  flags.DEFINE_float(
    "stuck_margin",
    STUCK_MARGIN,
    "Stuck: final eval loss > held-out unigram cross-entropy - margin (nats).",
  )


def _submit(jobs: list[Job], sweep_dir: str, conflicts: list) -> int:
  """--submit=slurm: the jobs as one SLURM job array, in the local sweep's order."""
  from absl import flags

  f = flags.FLAGS
  if not jobs:
    print("nothing to submit: every point is finished or queued")
    return 1 if conflicts else 0
  if f.accelerator == "tpu":
    cli.fail("--submit=slurm runs on CPU or GPU nodes (--accelerator=cpu|gpu)")
  if f.max_concurrent is not None and f.max_concurrent < 1:
    cli.fail("--max_concurrent must be >= 1")
  try:
    spec = slurm.ArraySpec(
      job_name=f"sweep-{os.path.basename(sweep_dir)}",
      cpus_per_task=f.threads_per_job,
      gpus_per_task=1 if f.accelerator == "gpu" else 0,
      max_concurrent=f.max_concurrent,
      sbatch_args=slurm.parse_sbatch_args(f.sbatch_args),
    )
    job = slurm.submit(sorted(jobs, key=lambda j: -j.cost), sweep_dir, spec, f.dry_run)
  except ValueError as e:
    cli.fail(str(e))
  if job is not None:
    print(
      f"submitted job array {job}: {len(jobs)} tasks; watch: squeue -j {job}; results once "
      f"they end: python scripts/sweep.py --collect_only --sweep_dir={sweep_dir}"
    )
  return 1 if conflicts else 0


def main(argv: list[str]) -> int:
  from absl import flags

  f = flags.FLAGS
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if not f.grid and not (f.collect_only and f.sweep_dir):
    cli.fail("--grid=FILE is required (or --collect_only with --sweep_dir)")
  stem = os.path.splitext(os.path.basename(f.grid or ""))[0]
  sweep_dir = os.path.abspath(f.sweep_dir or os.path.join("runs", "sweeps", stem))
  if not f.collect_only:
    if f.max_steps is not None and f.max_steps < 1:
      cli.fail("--max_steps must be >= 1")
    if f.vmap_max < 0:
      cli.fail("--vmap_max must be >= 0 (0: no cap)")
    jobs_flag = f.jobs
    if f.parallel is not None:
      if f["jobs"].present:
        cli.fail("--parallel is the old spelling of --jobs: give one of them")
      jobs_flag = str(f.parallel)
    try:
      slots = [] if f.submit else make_slots(jobs_flag, f.threads_per_job, f.accelerator)
      queued = slurm.queued_points(sweep_dir) if f.submit else {}
      points = load_grid(root_path(f.grid))
      points = [p for p in points if not f.filter or re.search(f.filter, p.name)]
      extra = parse_sets(f.set)
      resolved = [resolve(p, extra, f.max_steps) for p in points]
      for p in points:  # a point's record that is a link: refused before any is written
        refuse_symlink(os.path.join(sweep_dir, p.name, POINT_FILE))
    except (ValueError, re.error) as e:
      cli.fail(str(e))
    # A pending point whose data is not there would fail only when its turn comes: refused
    # now, before any point starts (or a folder is written).
    missing = [
      (p, paths)
      for p, (_, expected) in zip(points, resolved, strict=True)
      if (paths := missing_data(expected))
      and run_state(os.path.join(sweep_dir, p.name), expected) == "todo"
    ]
    for p, paths in missing:
      print(f"[{p.index + 1}] {p.name}: missing data: {'; '.join(paths)}", file=sys.stderr)
    if missing:
      cli.fail(
        f"{len(missing)} pending point(s) name data that is not there "
        f"({', '.join(p.name for p, _ in missing)}); nothing was started"
      )
    todo, conflicts = [], []  # todo: (job, overrides, resolved config) per point to run
    states, timed = [], []  # every point's state; (cost, wall seconds) of the finished ones
    for p, (overrides, expected) in zip(points, resolved, strict=True):
      workdir = os.path.join(sweep_dir, p.name)
      state = run_state(workdir, expected)
      states.append(state)
      if state == "done":
        summary = read_json(os.path.join(workdir, "summary.json")) or {}
        wall = summary.get("wall_seconds")
        if isinstance(wall, (int, float)) and wall > 0:
          timed.append((estimated_cost(expected), float(wall)))
      if state == "todo" and p.name in queued:  # its task of an earlier submission is waiting
        state = f"queued (SLURM task {queued[p.name]})"
      cmd = train_command(p, workdir, overrides)
      if state == "conflict":
        conflicts.append((workdir, conflict_keys(workdir, expected)))
      print(
        f"[{p.index + 1}] {p.name}: {state}" + ("" if state != "todo" else f"\n  {shlex.join(cmd)}")
      )
      info = {"name": p.name, "index": p.index, "config": p.config, "overrides": p.overrides}
      if state == "todo":
        todo.append((Job(p, workdir, cmd, estimated_cost(expected)), overrides, expected))
      if state == "todo" and not f.dry_run:
        os.makedirs(workdir, exist_ok=True)
        cli.write_json(os.path.join(workdir, POINT_FILE), {**info, "command": cmd})
      elif (
        state == "done" and not f.dry_run and not os.path.isfile(os.path.join(workdir, POINT_FILE))
      ):
        cli.write_json(os.path.join(workdir, POINT_FILE), info)  # for collect: its grid place
    for w, keys in conflicts:
      print(
        f"conflict: {w} holds a run of a different config ({keys}); not rerun",
        file=sys.stderr,
      )
    jobs = [job for job, _, _ in todo]
    if f.vmap:  # points that differ only in opt.lr and seed: one program per group
      jobs = population_jobs(todo, f.vmap_max, write=not f.dry_run)
    if f.submit:
      return _submit(jobs, sweep_dir, conflicts)
    if f.dry_run:
      costs = [job.cost for job, _, _ in todo]
      print(dry_run_total(states, costs, seconds_per_cost(timed)))
      return 1 if conflicts else 0
    print(
      f"{len(todo)} points in {len(jobs)} jobs to run on {len(slots)} slots: "
      + ", ".join(s.label for s in slots),
      flush=True,
    )
    codes = run_points(jobs, slots, f.progress_every)
  else:
    codes, conflicts = {}, []
  if not os.path.isdir(sweep_dir):
    cli.fail(f"--sweep_dir={sweep_dir}: no such folder")
  # A point finished by another process (a child that outlived a killed sweep, another sweep
  # on this sweep_dir) is recorded from its folder, not as the failure last seen.
  try:
    for name in refresh_records(sweep_dir):
      print(f"{name}: finished by another process; its record rewritten from its folder")
    rows = with_failures(collect(sweep_dir, f.stuck_margin), sweep_dir)
    written = write_results(sweep_dir, rows)
  except SymlinkRefused as e:  # a record or results file is a link: its target is left as it is
    print(f"error: {e}", file=sys.stderr)
    return 2
  for path in written:
    print(path)
  if INTERRUPTED in codes:
    return codes[INTERRUPTED]
  return 1 if conflicts or any(c != 0 for c in codes.values()) else 0


if __name__ == "__main__":
  from absl import app

  run_this_checkout()
  _define_flags()
  app.run(main)
