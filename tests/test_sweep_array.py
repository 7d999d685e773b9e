"""A sweep as a SLURM job array (scripts/sweep.py --submit=slurm): the points and the array
script, records of queued points, and an array that ends as the local sweep does."""

import json
import re
import shlex
import subprocess
import sys

import pytest

from tests.fake_cluster import FAKE_SBATCH, FAKE_SCONTROL, RECORD, ROOT, calls, fake_bin, wait_for

pytestmark = pytest.mark.slow  # every test runs a launcher script in a child process


# sbatch: records its call, answers a job id at once (--parsable), then, detached as SLURM
# would be, runs every array task of the script in turn with the SLURM variables a task sees,
# again after each `scontrol requeue` of it; writes sbatch.done at the end.
FAKE_SBATCH_ARRAY = """#!{python}
import os, re, shlex, subprocess, sys
log = os.environ["FAKE_LOG"]
JOB = "500"

def requeues(task):
  path = os.path.join(log, "scontrol.calls")
  lines = open(path).read().splitlines() if os.path.exists(path) else []
  return sum(shlex.split(line) == ["requeue", f"{{JOB}}_{{task}}"] for line in lines)

def run_tasks(script):
  opts = dict(re.findall(r"^#SBATCH --([\\w-]+)=?(.*)$", open(script).read(), re.M))
  first, last = map(int, opts["array"].split("%")[0].split("-"))
  for task in range(first, last + 1):
    restart = 0
    while True:
      env = dict(os.environ, SLURM_JOB_ID=str(int(JOB) + 1 + task), SLURM_ARRAY_JOB_ID=JOB,
                 SLURM_ARRAY_TASK_ID=str(task), SLURM_RESTART_COUNT=str(restart),
                 SLURM_CPUS_PER_TASK=opts["cpus-per-task"], SLURM_SUBMIT_DIR=os.getcwd())
      out = opts["output"].replace("%A", JOB).replace("%a", str(task))
      with open(out, "a") as f:
        subprocess.run(["bash", script], env=env, stdout=f, stderr=subprocess.STDOUT)
      if requeues(task) <= restart:
        break
      restart += 1
  open(os.path.join(log, "sbatch.done"), "w").close()

if sys.argv[1:2] == ["--run-tasks"]:
  run_tasks(sys.argv[2])
  sys.exit(0)
with open(os.path.join(log, "sbatch.calls"), "a") as f:
  f.write(shlex.join(sys.argv[1:]) + "\\n")
with open(os.path.join(log, "sbatch.env"), "w") as f:
  f.write("\\n".join(f"{{k}}={{v}}" for k, v in os.environ.items()))
print(JOB if "--parsable" in sys.argv else f"Submitted batch job {{JOB}}", flush=True)
if os.environ.get("FAKE_SBATCH_RUN", "1") == "1":
  subprocess.Popen([sys.executable, __file__, "--run-tasks", sys.argv[-1]],
                   start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""
# srun: records its call, takes --output, and runs the command in its own place (exec), so the
# batch script's SIGTERM reaches the training process itself. For the array tasks listed in
# FAKE_PREEMPT, on their first start, the training run is the scheduler's victim: when the
# batch of step 5 is built it sends USR1 to the batch script (the time limit is near), which
# SIGTERMs the run (it saves at that step) and requeues the task.
FAKE_SRUN_TRAIN = """#!{python}
import os, shlex, sys
with open(os.path.join(os.environ["FAKE_LOG"], "srun.calls"), "a") as f:
  f.write(shlex.join(sys.argv[1:]) + "\\n")
args, output = sys.argv[1:], None
while args and args[0].startswith("-"):
  if args[0].startswith("--output="):
    output = args[0].split("=", 1)[1]
  args = args[1:]
first_try = os.environ.get("SLURM_RESTART_COUNT") == "0"
victim = os.environ.get("SLURM_ARRAY_TASK_ID") in os.environ.get("FAKE_PREEMPT", "").split()
if first_try and victim and args[1:3] == ["-m", "experiments.train"]:
  args = [args[0], "-c", {hook!r}, *args[3:]]
if output:
  fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  os.dup2(fd, 1)
  os.dup2(fd, 2)
os.execvp(args[0], args)
"""
PREEMPTING_TRAIN = """
import os, signal, sys, time
from resnorm_jax.data import batches
get_batch = batches.get_batch
def hooked(*args, **kwargs):
  if kwargs["step"] == 5:
    os.kill(os.getppid(), signal.SIGUSR1)  # the batch script: SIGTERM to this run follows
    time.sleep(2)
  return get_batch(*args, **kwargs)
batches.get_batch = hooked
from absl import app
from experiments import train
from resnorm_jax.config import cli
app.run(train.main, flags_parser=cli.parse_flags_or_exit)
"""
FAKE_SQUEUE = f"#!/usr/bin/env bash\n{RECORD}record \"$@\"\nprintf '%s\\n' $FAKE_QUEUE\n"


def _grid_text(points: int) -> str:
  seeds = ", ".join(
    f'{{"config": "configs/smoke.py", "overrides": {{"seed": {s}}}}}' for s in range(points)
  )
  return f"GRID = [{seeds}]\n"


def _array_env(tmp_path) -> dict[str, str]:
  py = sys.executable
  env = fake_bin(
    tmp_path,
    sbatch=FAKE_SBATCH_ARRAY.format(python=py),
    srun=FAKE_SRUN_TRAIN.format(python=py, hook=PREEMPTING_TRAIN),
    scontrol=FAKE_SCONTROL,
    squeue=FAKE_SQUEUE,
  )
  cache = tmp_path / "jax_cache"  # the four points compile one program: compile it once
  env.update(
    JAX_PLATFORMS="cpu",
    XLA_FLAGS="--xla_backend_optimization_level=0",
    JAX_COMPILATION_CACHE_DIR=str(cache),
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
  )
  return env


def _sweep(env, *args, timeout=300) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, "scripts/sweep.py", *args],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
  )  # fmt: skip


def _grid(tmp_path, points: int = 4) -> str:
  grid = tmp_path / "grid.py"
  grid.write_text(_grid_text(points))
  return str(grid)


def test_sweep_submit_dry_run_prints_the_points_and_the_array_script(tmp_path):
  from resnorm_jax.sweeps import grid as sweep_grid

  sweep_dir = tmp_path / "sweep"
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "overrides": {"seed": 0}}])[0]
  _, expected = sweep_grid.resolve(point, {}, None)
  done = sweep_dir / "smoke__seed=0"  # finished already: not submitted
  done.mkdir(parents=True)
  (done / "summary.json").write_text('{"status": "completed"}')
  (done / "config.json").write_text(json.dumps(expected))
  env = fake_bin(tmp_path, sbatch=FAKE_SBATCH, squeue=FAKE_SQUEUE)
  proc = _sweep(
    env, f"--grid={_grid(tmp_path)}", f"--sweep_dir={sweep_dir}", "--submit=slurm", "--dry_run",
    "--max_concurrent=2", "--accelerator=gpu", "--threads_per_job=4",
    "--sbatch_args=--partition=gpu --time=01:00:00",
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  out = proc.stdout
  assert "[1] smoke__seed=0: done" in out
  commands = [shlex.split(line) for line in out.splitlines() if line.startswith("  /")]
  assert len(commands) == 3 and all(c[1:3] == ["-m", "experiments.train"] for c in commands)
  script = out[out.index("#!/usr/bin/env bash") :]
  for line in (
    "#SBATCH --array=0-2%2",
    "#SBATCH --ntasks=1",
    "#SBATCH --cpus-per-task=4",
    "#SBATCH --gpus=1",
    "#SBATCH --requeue",
    "#SBATCH --signal=B:USR1@600",
    f"#SBATCH --output={sweep_dir}/slurm/%A_%a.out",
    "#SBATCH --partition=gpu",
    "#SBATCH --time=01:00:00",
  ):
    assert line in script.splitlines(), line
  # Each array task runs the command the local sweep would run for its point.
  cases = re.findall(r"^     cmd=\((.*)\) ;;$", script, flags=re.M)
  assert [shlex.split(c) for c in cases] == commands
  assert not calls(tmp_path, "sbatch") and not (sweep_dir / "slurm").exists()
  syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
  assert syntax.returncode == 0, syntax.stderr


def test_sweep_submit_records_the_array_and_skips_points_still_queued(tmp_path):
  sweep_dir = tmp_path / "sweep"
  env = fake_bin(
    tmp_path, sbatch=FAKE_SBATCH_ARRAY.format(python=sys.executable), squeue=FAKE_SQUEUE
  )
  env["FAKE_SBATCH_RUN"] = "0"  # queued, never run
  args = [f"--grid={_grid(tmp_path)}", f"--sweep_dir={sweep_dir}", "--submit=slurm"]
  first = _sweep(env, *args)
  assert first.returncode == 0, first.stderr
  assert "submitted job array 500: 4 tasks" in first.stdout
  (call,) = calls(tmp_path, "sbatch")
  assert call[0] == "--parsable" and call[1].startswith(f"{sweep_dir}/slurm/array-")
  names = [f"smoke__seed={s}" for s in range(4)]
  jobs = json.loads((sweep_dir / "slurm" / "jobs.json").read_text())
  assert [(j["job"], j["tasks"]) for j in jobs] == [("500", [[n] for n in names])]
  point = json.loads((sweep_dir / names[2] / "sweep_point.json").read_text())
  assert point["slurm_task"] == "500_2" and point["command"][1:3] == ["-m", "experiments.train"]
  # Tasks 1 and 3 still wait in the queue: only points 0 and 2 go again.
  env["FAKE_QUEUE"] = "500_1 500_3 77_0"
  again = _sweep(env, *args)
  assert again.returncode == 0, again.stderr
  assert f"{names[1]}: queued (SLURM task 500_1)" in again.stdout
  assert f"{names[3]}: queued (SLURM task 500_3)" in again.stdout
  second = open(calls(tmp_path, "sbatch")[1][1]).read()
  assert "#SBATCH --array=0-1" in second.splitlines()
  assert names[0] in second and names[2] in second and names[1] not in second
  # A queue that cannot be read refuses: its points might run twice.
  env["PATH"] = env["PATH"].replace(str(tmp_path / "bin"), str(tmp_path / "nobin"))
  blind = _sweep(env, *args)
  assert blind.returncode == 2 and "cannot list the queue" in blind.stderr


@pytest.mark.long  # a local sweep and an array of its points, in processes
def test_sweep_as_a_slurm_array_ends_as_the_local_sweep(tmp_path, read_csv):
  """A 2-point grid submitted as a job array to a fake SLURM that runs its tasks here; the
  time limit comes for the second mid-run (USR1: it saves and is requeued, then resumes),
  the first runs through. Every point finishes, and the collected results equal a local
  sweep's of the same grid."""
  env = _array_env(tmp_path)
  grid = _grid(tmp_path, points=2)
  local = _sweep(env, f"--grid={grid}", f"--sweep_dir={tmp_path / 'local'}")
  assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-2000:]
  sweep_dir = tmp_path / "array"
  env["FAKE_PREEMPT"] = "1"
  args = [f"--grid={grid}", f"--sweep_dir={sweep_dir}", "--submit=slurm", "--max_concurrent=2"]
  submitted = _sweep(env, *args)
  assert submitted.returncode == 0, submitted.stderr
  wait_for(lambda: (tmp_path / "calls" / "sbatch.done").exists(), "the array", timeout=600)
  assert calls(tmp_path, "scontrol") == [["requeue", "500_1"]]
  srun = calls(tmp_path, "srun")
  assert len(srun) == 3 and all(c[:2] == ["--ntasks=1", "--cpus-per-task=1"] for c in srun)
  names = [f"smoke__seed={s}" for s in range(2)]
  for i, name in enumerate(names):
    summary = json.loads((sweep_dir / name / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 20
    point = json.loads((sweep_dir / name / "sweep_point.json").read_text())
    assert point["returncode"] == 0 and point["slurm_task"] == f"500_{i}"
    batch_log = (sweep_dir / "slurm" / f"500_{i}.out").read_text()
    assert ("requeueing job 500_" in batch_log) == (i == 1), batch_log
  assert "resuming from step" in (sweep_dir / names[1] / "train.log").read_text()
  collected = _sweep(env, "--collect_only", f"--sweep_dir={sweep_dir}")
  assert collected.returncode == 0, collected.stderr
  rows = {d: read_csv(tmp_path / d / "results.csv") for d in ("local", "array")}
  for row in rows["local"] + rows["array"]:
    row.pop("wall_seconds")
  assert rows["array"] == rows["local"] and len(rows["local"]) == 2
  again = _sweep(env, *args)
  assert again.returncode == 0 and "nothing to submit" in again.stdout, again.stdout
  assert again.stdout.count(": done") == 2 and len(calls(tmp_path, "sbatch")) == 1
