"""The SLURM launcher (scripts/submit_slurm.sh and its job script): dry runs, the check on the
submitting host before sbatch, and the signal handling (USR1 ahead of the time limit becomes a
SIGTERM to the training processes and, once the run says "interrupted", a requeue)."""

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tests.fake_cluster import (
  FAKE_SBATCH,
  FAKE_SCONTROL,
  PAPER,
  RECORD,
  ROOT,
  TRAIN,
  calls,
  fake_bin,
  script,
  suffix,
)

pytestmark = pytest.mark.slow  # every test runs a launcher script in a child process


def _srun_argv(stdout: str) -> list[str]:
  """The srun command of a dry run (its last line), without leading VAR=value words."""
  argv = shlex.split(stdout.strip().splitlines()[-1])
  return argv[argv.index("srun") :]


@pytest.mark.parametrize("tasks", ["gpu", "node"])
def test_slurm_dry_run_shows_stable_workdir_requeue_and_signal(tasks):
  env = {"TASKS": tasks, "SLURM_GPUS_ON_NODE": "8"}
  args = ["scripts/slurm_gpu.sbatch", "--dry-run", PAPER, "--config.opt.lr=1e-4"]
  proc = script(args, {**env, "SLURM_JOB_ID": "77"})
  assert proc.returncode == 0, proc.stderr
  again = script(args, {**env, "SLURM_JOB_ID": "78"})  # a requeue or a resubmission
  assert again.stdout == proc.stdout
  lines = proc.stdout.strip().splitlines()
  assert "#SBATCH --requeue" in lines and "#SBATCH --signal=B:USR1@600" in lines
  workdir = f"runs/postnorm_96L-paper-{suffix('--config.opt.lr=1e-4')}"
  assert lines[0].startswith(f"# workdir {workdir} ")
  argv = shlex.split(lines[-1])
  if tasks == "node":  # one process drives the node's 8 GPUs
    assert argv.pop(0) == "JAX_LOCAL_DEVICE_IDS=0,1,2,3,4,5,6,7"
  # --cpus-per-task is passed on (srun >= 22.05 does not inherit it): the #SBATCH request
  # per GPU task, the whole node's cores (8 tasks' worth) for one process per node.
  per_node, cpus = {"gpu": ("8", "8"), "node": ("1", "64")}[tasks]
  assert argv[:6] == [
    "srun",
    "--kill-on-bad-exit=1",
    "--open-mode=append",
    f"--output={workdir}/logs/job%j.task%t.log",  # per-task logs, appended across requeues
    f"--ntasks-per-node={per_node}",
    f"--cpus-per-task={cpus}",
  ]
  assert argv[6:] == [
    ".venv/bin/python",
    *TRAIN,
    f"--workdir={workdir}",
    "--config.dist.initialize=true",
    "--config.opt.lr=1e-4",
  ]
  header = open(os.path.join(ROOT, "scripts", "slurm_gpu.sbatch")).read()
  assert "#SBATCH --gpus-per-node=8" in header and "#SBATCH --nodes=2" in header
  assert "#SBATCH --cpus-per-task=8" in header
  plain = script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER])
  assert "--workdir=runs/postnorm_96L-paper " in plain.stdout  # no overrides: no hash
  assert "XLA_FLAGS" not in plain.stdout  # the performance flags are off by default


def test_slurm_cpus_per_task_follow_the_allocation():
  gpu = script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {"SLURM_CPUS_PER_TASK": "12"})
  assert "--cpus-per-task=12" in _srun_argv(gpu.stdout)
  node = script(
    ["scripts/slurm_gpu.sbatch", "--dry-run", PAPER],
    {"TASKS": "node", "SLURM_CPUS_ON_NODE": "96", "SLURM_GPUS_ON_NODE": "4"},
  )
  assert {"--ntasks-per-node=1", "--cpus-per-task=96"} <= set(_srun_argv(node.stdout))


def test_slurm_container_mounts_the_repository_workdir_and_data():
  env = {
    "CONTAINER_IMAGE": "/images/jax.sqsh",
    "CONTAINER_MOUNTS": "/cluster/data:/cluster/data",
    "WORKDIR": "/scratch/runs/a",
  }
  proc = script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], env)
  assert proc.returncode == 0, proc.stderr
  argv = _srun_argv(proc.stdout)
  i = argv.index("--container-image=/images/jax.sqsh")
  assert argv[i + 1 : i + 4] == [
    f"--container-mounts={ROOT}:{ROOT},/scratch/runs/a:/scratch/runs/a,/cluster/data:/cluster/data",
    f"--container-workdir={ROOT}",
    "python3",  # the image's Python: the checkout's .venv belongs to the host
  ]
  setup = script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {**env, "SETUP": "1"})
  assert setup.returncode == 2 and "build the image" in setup.stderr


def test_slurm_perf_flags_are_opt_in_and_known_to_the_pinned_jaxlib():
  proc = script(
    ["scripts/slurm_gpu.sbatch", "--dry-run", PAPER],
    {"XLA_GPU_PERF": "1", "XLA_FLAGS": "--xla_gpu_all_reduce_combine_threshold_bytes=1"},
  )
  assert proc.returncode == 0, proc.stderr
  words = shlex.split(proc.stdout.strip().splitlines()[-1])
  (assignment,) = [w for w in words if w.startswith("XLA_FLAGS=")]
  flags = assignment[len("XLA_FLAGS=") :].split()
  assert "--xla_gpu_enable_latency_hiding_scheduler=true" in flags
  assert flags[-1] == "--xla_gpu_all_reduce_combine_threshold_bytes=1"  # the user's come last
  # XLA refuses an unknown flag at start-up, on any backend: each one is parsed here.
  check = subprocess.run(
    [sys.executable, "-c", "import jax.numpy as jnp; jnp.ones(2).sum().block_until_ready()"],
    env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": " ".join(flags)},
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert check.returncode == 0, check.stderr[-2000:]
  custom = script(
    ["scripts/slurm_gpu.sbatch", "--dry-run", PAPER],
    {"XLA_GPU_PERF": "1", "PERF_XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=false"},
  )
  words = shlex.split(custom.stdout.strip().splitlines()[-1])
  assert words[0].startswith("XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=false ")


def test_slurm_refuses_bad_input():
  outside = script(["scripts/slurm_gpu.sbatch", PAPER], {"SLURM_JOB_ID": ""})
  assert outside.returncode == 2 and "sbatch" in outside.stderr
  for bad in (["configs/nope.py"], [PAPER, "steps=3"], [], ["--dry_run", PAPER]):
    proc = script(["scripts/slurm_gpu.sbatch", "--dry-run", *bad])
    assert proc.returncode == 2 and "error" in proc.stderr, bad
  proc = script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {"TASKS": "all"})
  assert proc.returncode == 2 and "gpu, node" in proc.stderr


# The trap is set before the call is recorded: the tests signal the job once they see the call.
FAKE_SRUN = f"""#!/usr/bin/env bash
trap 'echo "{{\\"status\\": \\"interrupted\\"}}" > "$WORKDIR/summary.json"; exit 0' TERM
{RECORD}record "$@"
case " $* " in *" -c "*) exit 0 ;; esac
while :; do sleep 0.05; done
"""
FAKE_PYTHON = "#!/usr/bin/env bash\nexit 0\n"  # the GPU check passes


def _start_job(tmp_path, env: dict[str, str]) -> subprocess.Popen:
  """slurm_gpu.sbatch as SLURM starts it, once the training stand-in is running."""
  proc = subprocess.Popen(
    ["bash", "scripts/slurm_gpu.sbatch", PAPER],
    cwd=ROOT,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  deadline = time.time() + 20
  while not any("experiments.train" in c for c in calls(tmp_path, "srun")):
    assert time.time() < deadline and proc.poll() is None, proc.communicate()[0]
    time.sleep(0.05)
  return proc


@pytest.mark.parametrize("signum, requeued", [(signal.SIGUSR1, True), (signal.SIGTERM, False)])
def test_slurm_signal_stops_the_run_and_requeues_at_the_time_limit(tmp_path, signum, requeued):
  """USR1 (ahead of the time limit): SIGTERM to srun, then `scontrol requeue` of this job.
  TERM (a preemption: SLURM requeues the job itself): SIGTERM to srun, no requeue here."""
  env = fake_bin(tmp_path, srun=FAKE_SRUN, scontrol=FAKE_SCONTROL, python=FAKE_PYTHON)
  workdir = tmp_path / "run"
  env.update(
    PYTHON=str(tmp_path / "bin" / "python"),
    WORKDIR=str(workdir),
    SLURM_JOB_ID="1234",
    SLURM_SUBMIT_DIR=ROOT,
    SLURM_CPUS_PER_TASK="6",
  )
  proc = _start_job(tmp_path, env)
  proc.send_signal(signum)
  out, _ = proc.communicate(timeout=20)
  assert proc.returncode == 0, out
  assert "SIGTERM to the training processes" in out
  assert (workdir / "summary.json").exists()  # srun got the TERM and "saved"
  assert (workdir / "logs").is_dir()
  (srun,) = calls(tmp_path, "srun")
  assert "--cpus-per-task=6" in srun
  if requeued:
    assert calls(tmp_path, "scontrol") == [["requeue", "1234"]]
  else:
    assert not calls(tmp_path, "scontrol")


def test_slurm_container_job_checks_the_gpu_inside_the_image(tmp_path):
  env = fake_bin(tmp_path, srun=FAKE_SRUN, scontrol=FAKE_SCONTROL)
  workdir = tmp_path / "run"
  env.update(WORKDIR=str(workdir), SLURM_JOB_ID="7", SLURM_SUBMIT_DIR=ROOT)
  env.update(CONTAINER_IMAGE="nvcr.io#nvidia/jax:25.04-py3")
  proc = _start_job(tmp_path, env)
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=20)
  assert proc.returncode == 0, out
  check, train = calls(tmp_path, "srun")
  image = "--container-image=nvcr.io#nvidia/jax:25.04-py3"
  assert check[:4] == [
    "--nodes=1",
    "--ntasks=1",
    image,
    f"--container-mounts={ROOT}:{ROOT},{workdir}:{workdir}",
  ]
  assert check[5:7] == ["python3", "-c"]
  assert image in train and "python3" in train


@pytest.mark.long  # the submit script end to end
def test_submit_slurm_validates_on_this_host_before_sbatch(tmp_path):
  env = fake_bin(tmp_path, sbatch=FAKE_SBATCH)
  env.update(PYTHON=sys.executable, TASKS="node", NCCL_DEBUG="WARN")
  good = ["configs/smoke.py", "--config.train.steps=5"]
  proc = subprocess.run(
    ["bash", "scripts/submit_slurm.sh", "--nodes=4", "--time=01:00:00", *good],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  assert "ok: smoke" in proc.stdout and "Submitted batch job 4242" in proc.stdout
  assert calls(tmp_path, "sbatch") == [
    ["--nodes=4", "--time=01:00:00", "scripts/slurm_gpu.sbatch", *good]
  ]
  sbatch_env = (tmp_path / "calls" / "sbatch.env").read_text().splitlines()
  assert {"TASKS=node", "NCCL_DEBUG=WARN"} <= set(sbatch_env)  # what the job inherits
  for bad, message in (
    (["configs/smoke.py", "--config.opt.lrr=1"], "unknown config key"),
    (["configs/smoke.py", "--config.model.norm=layernrom"], "layernrom"),
    (["configs/postnorm_96L.py:paper"], "data.path is empty"),  # no RESNORM_DATA here
    (["configs/nope.py"], "no config file"),
  ):
    proc = subprocess.run(
      ["bash", "scripts/submit_slurm.sh", *bad], cwd=ROOT, env={**env, "RESNORM_DATA": ""},
      capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and message in proc.stderr, (bad, proc.stderr)
  assert len(calls(tmp_path, "sbatch")) == 1  # nothing more was submitted
  dry = subprocess.run(
    ["bash", "scripts/submit_slurm.sh", "--dry-run", "--nodes=4", *good],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert dry.returncode == 0, dry.stderr
  lines = dry.stdout.strip().splitlines()
  assert shlex.split(lines[1]) == ["sbatch", "--nodes=4", "scripts/slurm_gpu.sbatch", *good]
  assert lines[-1].startswith("JAX_LOCAL_DEVICE_IDS=") and " srun " in lines[-1]
  assert len(calls(tmp_path, "sbatch")) == 1
