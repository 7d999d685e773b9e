"""Sweeps on a cluster's scheduler: a grid's unfinished points as one SLURM job array.

`scripts/sweep.py --submit=slurm` resolves and checks every point as a local sweep does,
then, instead of running them here, writes <sweep_dir>/slurm/array-<time>.sbatch (array task
i runs point i) and submits it. Each task runs the command the local sweep would run for its
point (grid.train_command: this Python, from the repository root, into
<sweep_dir>/<point>, output appended to its train.log), under the requeue protocol of
scripts/slurm_gpu.sbatch (scripts/slurm_supervise.sh: USR1 ahead of the time limit, or a
preemption, stops the run at a saved step and requeues the task, which resumes). So the
skip-finished rule, the results tables and the plots are the local sweep's:
`scripts/sweep.py --collect_only --sweep_dir=DIR` collects them once the tasks have ended.
With --vmap, a population (one program training several points) is one array task.
Every submission is recorded in <sweep_dir>/slurm/jobs.json; a point whose task is still
pending or running (squeue) is not submitted again. No JAX here.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence

from resnorm_jax.config import cli
from resnorm_jax.data.fs import read_json
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.runs.sweep_point import POINT_FILE
from resnorm_jax.sweeps.grid import ROOT

SLURM_DIR = "slurm"  # under the sweep folder: array scripts, their output, jobs.json
JOBS_FILE = "jobs.json"
# Slurm's default MaxArraySize is 1001: array indices 0-1000.
MAX_ARRAY_TASKS = 1000


@dataclasses.dataclass(frozen=True)
class ArraySpec:
  """What each array task asks SLURM for, and how the array is scheduled."""

  job_name: str
  cpus_per_task: int = 1
  gpus_per_task: int = 0
  max_concurrent: int | None = None  # `%N`: at most N tasks at once
  signal_seconds: int = 600  # USR1 this long before the time limit: save and requeue
  sbatch_args: tuple[str, ...] = ()  # more #SBATCH lines: --partition=..., --time=...


def parse_sbatch_args(text: str) -> tuple[str, ...]:
  """`--partition=gpu --time=4:00:00` -> its options; each must be one --option[=value]."""
  args = tuple(shlex.split(text or ""))
  bad = [a for a in args if not a.startswith("-")]
  if bad:
    raise ValueError(f"--sbatch_args: give each sbatch option as --option=value; got {bad}")
  return args


def _sbatch_lines(n_tasks: int, sweep_dir: str, spec: ArraySpec) -> list[str]:
  array = f"0-{n_tasks - 1}" + (f"%{spec.max_concurrent}" if spec.max_concurrent else "")
  options = [
    f"--job-name={spec.job_name}",
    f"--array={array}",
    "--ntasks=1",
    f"--cpus-per-task={spec.cpus_per_task}",
    *([f"--gpus={spec.gpus_per_task}"] if spec.gpus_per_task else []),
    "--requeue",
    f"--signal=B:USR1@{spec.signal_seconds}",
    "--open-mode=append",
    f"--output={os.path.join(sweep_dir, SLURM_DIR, '%A_%a.out')}",
    *spec.sbatch_args,  # last: sbatch takes the last of a repeated option
  ]
  return [f"#SBATCH {o}" for o in options]


def _runs(job) -> tuple:
  """(point, workdir) of every run a sweep_jobs.Job trains (several for a population)."""
  return job.runs() if hasattr(job, "runs") else ((job.point, job.workdir),)


def array_script(jobs: Sequence, sweep_dir: str, spec: ArraySpec) -> str:
  """The sbatch script of a job array: task i runs jobs[i] (sweep_jobs.Job) as is."""
  if not jobs:
    raise ValueError("no points to submit")
  if len(jobs) > MAX_ARRAY_TASKS:
    raise ValueError(
      f"{len(jobs)} points exceed SLURM's default array size ({MAX_ARRAY_TASKS}): submit "
      "them in parts with --filter=REGEX"
    )
  cases = [
    f"  {i}) name={shlex.quote(job.point.name)}\n"
    f"     runs=({shlex.join(w for _, w in _runs(job))})\n"
    f"     cmd=({shlex.join(job.command)}) ;;"
    for i, job in enumerate(jobs)
  ]
  return "\n".join(
    [
      "#!/usr/bin/env bash",
      *_sbatch_lines(len(jobs), sweep_dir, spec),
      f"# Sweep {sweep_dir}: {len(jobs)} points, written by scripts/sweep.py --submit=slurm.",
      "# Array task i runs point i below exactly as a local sweep would, into",
      "# <sweep_dir>/<point> (train.log appended); USR1 ahead of the time limit or a",
      "# preemption saves the run at one step and requeues the task, which resumes there.",
      "set -euo pipefail",
      f"cd {shlex.quote(ROOT)}",
      'task="${SLURM_ARRAY_TASK_ID:?not a SLURM array task: submit with sbatch}"',
      'case "$task" in',
      *cases,
      '  *) echo "error: no point for array task $task" >&2; exit 2 ;;',
      "esac",
      f'workdir={shlex.quote(sweep_dir)}/"$name"',
      'mkdir -p "$workdir"',
      'echo "$(date +%T) task ${SLURM_ARRAY_JOB_ID}_$task (restart ${SLURM_RESTART_COUNT:-0})'
      ' on $(hostname): $name"',
      "# shellcheck source=scripts/slurm_supervise.sh",
      "source scripts/slurm_supervise.sh",
      "rc=0",
      'supervise "${SLURM_ARRAY_JOB_ID}_$task" "$workdir/summary.json" \\',
      '  srun --ntasks=1 --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" --open-mode=append \\',
      '  --output="$workdir/train.log" "${cmd[@]}" || rc=$?',
      "# The exit status, where the local sweep records it (a failed point shows as failed).",
      '"${cmd[0]}" -m resnorm_jax.sweeps.slurm record-exit "$rc" "${runs[@]}" || true',
      'exit "$rc"',
      "",
    ]
  )


def record_exit(workdir: str, returncode: int) -> None:
  """The run's exit status in its sweep_point.json, as the local sweep writes it."""
  path = os.path.join(workdir, POINT_FILE)
  info = read_json(path) or {}
  info["returncode"] = returncode
  cli.write_json(path, info)


def _jobs_path(sweep_dir: str) -> str:
  return os.path.join(sweep_dir, SLURM_DIR, JOBS_FILE)


def queued_points(sweep_dir: str, squeue: str = "squeue") -> dict[str, str]:
  """{point name: array task id} of the points whose earlier-submitted task is still pending
  or running (squeue), so that they are not submitted twice. ValueError if squeue fails."""
  submitted = read_json(_jobs_path(sweep_dir)) or []
  if not submitted:
    return {}
  cmd = [squeue, "--noheader", "--array", "--format=%i", f"--user={getpass.getuser()}"]
  try:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
  except (OSError, subprocess.SubprocessError) as e:
    raise ValueError(
      f"cannot list the queue ({shlex.join(cmd)}: {e}); jobs of this sweep were submitted "
      f"before ({_jobs_path(sweep_dir)}), and their points must not be submitted twice"
    ) from None
  live = set(re.findall(r"^\s*(\d+)_(\d+)\s*$", out, flags=re.M))
  queued = {}
  for record in submitted:
    for i, names in enumerate(record["tasks"]):
      if (str(record["job"]), str(i)) in live:
        queued.update((name, f"{record['job']}_{i}") for name in names)
  return queued


def _sbatch(script_path: str, sbatch: str) -> str:
  """Submits a script; its job id. ValueError with sbatch's message on failure."""
  cmd = [sbatch, "--parsable", script_path]
  try:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
  except (OSError, subprocess.SubprocessError) as e:
    raise ValueError(f"{shlex.join(cmd)}: {e}") from None
  job = out.stdout.strip().split(";")[0]  # --parsable: "ID" or "ID;CLUSTER"
  if out.returncode != 0 or not job.isdigit():
    raise ValueError(f"{shlex.join(cmd)} failed: {(out.stderr or out.stdout).strip()}")
  return job


def submit(
  jobs: Sequence, sweep_dir: str, spec: ArraySpec, dry_run: bool = False, sbatch: str = "sbatch"
) -> str | None:
  """Writes and submits the job array of `jobs`; its job id (None for a dry run, which
  prints the script instead). Records the submission (jobs.json, each sweep_point.json)."""
  script = array_script(jobs, sweep_dir, spec)
  if dry_run:
    print(f"# the sbatch script of {len(jobs)} points:\n{script}", end="")
    return None
  slurm_dir = os.path.join(sweep_dir, SLURM_DIR)
  os.makedirs(slurm_dir, exist_ok=True)  # SLURM does not create the --output folder
  path = os.path.join(slurm_dir, f"array-{time.strftime('%Y%m%d-%H%M%S')}.sbatch")
  with open_nofollow(path, "w") as f:
    f.write(script)
  job = _sbatch(path, sbatch)
  tasks = [[point.name for point, _ in _runs(j)] for j in jobs]
  records = read_json(_jobs_path(sweep_dir)) or []
  records.append({"job": job, "script": path, "tasks": tasks, "submitted": time.time()})
  cli.write_json(_jobs_path(sweep_dir), records)
  for i, j in enumerate(jobs):
    for _, workdir in _runs(j):
      point_file = os.path.join(workdir, POINT_FILE)
      cli.write_json(point_file, {**(read_json(point_file) or {}), "slurm_task": f"{job}_{i}"})
  return job


def main(argv: Sequence[str]) -> int:
  """`python -m resnorm_jax.sweeps.slurm record-exit STATUS WORKDIR...`: what an array task
  runs."""
  if len(argv) >= 3 and argv[0] == "record-exit" and re.fullmatch(r"-?\d+", argv[1]):
    for workdir in argv[2:]:
      record_exit(workdir, int(argv[1]))
    return 0
  print("usage: python -m resnorm_jax.sweeps.slurm record-exit STATUS WORKDIR...", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
