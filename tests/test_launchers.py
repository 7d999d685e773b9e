"""Cluster launchers (SLURM GPU, Cloud TPU VM): what they would run, and what survives.

Dry runs show the command; the SLURM script's signal handling runs for real against a fake
`srun` and `scontrol` on PATH: USR1 (the time limit is near) becomes a SIGTERM to the
training processes and, once the run says "interrupted", a requeue of the same job.
"""

import hashlib
import os
import shlex
import signal
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = "configs/postnorm_96L.py:paper"
TRAIN = ["-m", "experiments.train", f"--config={PAPER}"]


def _script(args, env=None):
  return subprocess.run(
    ["bash", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=30,
    env={**os.environ, **(env or {})},
  )


def _suffix(*overrides: str) -> str:
  """The workdir suffix both launchers derive from the overrides."""
  return hashlib.sha256("".join(f"{o}\0" for o in overrides).encode()).hexdigest()[:8]


# --- Cloud TPU VM -----------------------------------------------------------------------------


def _remote(stdout: str) -> tuple[list[str], str]:
  argv = shlex.split(stdout)
  return argv, argv[argv.index("--command") + 1]


def test_tpu_vm_launcher_runs_detached_with_per_worker_logs():
  override = "--config.name=it's a test"  # a space and a quote survive two shells
  proc = _script(
    ["scripts/launch_tpu_vm.sh", "--dry-run", "--name", "my-tpu", "--zone=us-central2-b",
     "--mount=/mnt/shared", "--workdir=/mnt/shared/run", PAPER, "--config.train.steps=10",
     override]
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  argv, remote = _remote(proc.stdout)
  assert argv[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "my-tpu"]
  assert argv[6:9] == ["--zone", "us-central2-b", "--worker=all"]
  head, _, rest = remote.partition(" && (setsid nohup ")
  assert head == "cd ~/resnorm_jax && mkdir -p logs"
  train, _, tail = rest.partition(" >> ")
  assert shlex.split(train) == [
    ".venv/bin/python",
    *TRAIN,
    "--workdir=/mnt/shared/run",
    "--config.dist.initialize=true",
    "--config.train.steps=10",
    override,
  ]
  # Detached: output to a per-worker log (hostname expanded on the worker), no stdin.
  assert tail.startswith("logs/run.$(hostname).log 2>&1 < /dev/null &)")
  assert "pip install" not in remote


def test_tpu_vm_launcher_default_workdir_is_stable_and_shared():
  runs = [
    _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/mnt/s",
             PAPER, "--config.opt.lr=1e-4"])
    for _ in range(2)
  ]  # fmt: skip
  assert runs[0].stdout == runs[1].stdout  # no timestamp: launching again resumes
  workdir = f"/mnt/s/runs/postnorm_96L-paper-{_suffix('--config.opt.lr=1e-4')}"
  assert f"--workdir={workdir}" in _remote(runs[0].stdout)[1]
  gs = _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--setup",
                "--workdir=gs://bucket/runs/a", PAPER])  # fmt: skip
  assert gs.returncode == 0, gs.stderr
  remote = _remote(gs.stdout)[1]
  assert "--workdir=gs://bucket/runs/a" in remote
  assert "python3 -m venv .venv && .venv/bin/pip install -r requirements-tpu.txt" in remote
  tail = _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--tail", "--name=t", "--zone=z",
                  "--workdir=gs://bucket/runs/a", PAPER])  # fmt: skip
  assert _remote(tail.stdout)[1] == "cd ~/resnorm_jax && tail -n 50 -F logs/a.*.log"


@pytest.mark.parametrize(
  "args, message",
  [
    (["--workdir=runs/local", PAPER], "is not shared"),  # a per-worker folder
    (["--mount=/mnt/s", "--workdir=/tmp/x", PAPER], "is not shared"),
    ([PAPER], "--mount"),  # no workdir and no shared mount to put one in
    (["--mount=rel", PAPER], "absolute"),
    (["--mount=/m", "configs/nope.py"], "no config file"),
    (["--mount=/m", PAPER, "steps=3"], "--config.key=value"),
    (["--mount=/m"], "CONFIG is required"),
  ],
)
def test_tpu_vm_launcher_refuses_bad_input(args, message):
  proc = _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", *args])
  assert proc.returncode == 2 and message in proc.stderr, proc.stderr


# --- SLURM ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tasks", ["gpu", "node"])
def test_slurm_dry_run_shows_stable_workdir_requeue_and_signal(tasks):
  env = {"TASKS": tasks, "SLURM_GPUS_ON_NODE": "8"}
  args = ["scripts/slurm_gpu.sbatch", "--dry-run", PAPER, "--config.opt.lr=1e-4"]
  proc = _script(args, {**env, "SLURM_JOB_ID": "77"})
  assert proc.returncode == 0, proc.stderr
  again = _script(args, {**env, "SLURM_JOB_ID": "78"})  # a requeue or a resubmission
  assert again.stdout == proc.stdout
  lines = proc.stdout.strip().splitlines()
  assert "#SBATCH --requeue" in lines and "#SBATCH --signal=B:USR1@600" in lines
  workdir = f"runs/postnorm_96L-paper-{_suffix('--config.opt.lr=1e-4')}"
  assert lines[0].startswith(f"# workdir {workdir} ")
  argv = shlex.split(lines[-1])
  if tasks == "node":  # one process drives the node's 8 GPUs
    assert argv.pop(0) == "JAX_LOCAL_DEVICE_IDS=0,1,2,3,4,5,6,7"
  per_node = {"gpu": "8", "node": "1"}[tasks]
  assert argv[:5] == [
    "srun",
    "--kill-on-bad-exit=1",
    "--open-mode=append",
    f"--output={workdir}/logs/job%j.task%t.log",  # per-task logs, appended across requeues
    f"--ntasks-per-node={per_node}",
  ]
  assert argv[6:] == [
    *TRAIN,
    f"--workdir={workdir}",
    "--config.dist.initialize=true",
    "--config.opt.lr=1e-4",
  ]
  header = open(os.path.join(ROOT, "scripts", "slurm_gpu.sbatch")).read()
  assert "#SBATCH --gpus-per-node=8" in header and "#SBATCH --nodes=2" in header
  plain = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER])
  assert "--workdir=runs/postnorm_96L-paper " in plain.stdout  # no overrides: no hash


def test_slurm_refuses_bad_input():
  outside = _script(["scripts/slurm_gpu.sbatch", PAPER], {"SLURM_JOB_ID": ""})
  assert outside.returncode == 2 and "sbatch" in outside.stderr
  for bad in (["configs/nope.py"], [PAPER, "steps=3"], [], ["--dry_run", PAPER]):
    proc = _script(["scripts/slurm_gpu.sbatch", "--dry-run", *bad])
    assert proc.returncode == 2 and "error" in proc.stderr, bad
  proc = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {"TASKS": "all"})
  assert proc.returncode == 2 and "gpu, node" in proc.stderr


FAKE_SRUN = """#!/usr/bin/env bash
# Stands in for srun: runs until SIGTERM, then writes what the training run would.
trap 'echo "{\\"status\\": \\"interrupted\\"}" > "$WORKDIR/summary.json"; exit 0' TERM
echo "$@" > "$WORKDIR/srun.args"
while :; do sleep 0.05; done
"""
FAKE_SCONTROL = '#!/usr/bin/env bash\necho "$@" > "$WORKDIR/scontrol.args"\n'
FAKE_PYTHON = "#!/usr/bin/env bash\nexit 0\n"  # the GPU check passes


@pytest.mark.parametrize("signum, requeued", [(signal.SIGUSR1, True), (signal.SIGTERM, False)])
def test_slurm_signal_stops_the_run_and_requeues_at_the_time_limit(tmp_path, signum, requeued):
  """USR1 (ahead of the time limit): SIGTERM to srun, then `scontrol requeue` of this job.
  TERM (a preemption: SLURM requeues the job itself): SIGTERM to srun, no requeue here."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL), ("python", FAKE_PYTHON)):
    (bin_dir / name).write_text(text)
    (bin_dir / name).chmod(0o755)
  workdir = tmp_path / "run"
  env = {
    **os.environ,
    "PATH": f"{bin_dir}:{os.environ['PATH']}",
    "PYTHON": str(bin_dir / "python"),
    "WORKDIR": str(workdir),
    "SLURM_JOB_ID": "1234",
    "SLURM_SUBMIT_DIR": ROOT,
  }
  proc = subprocess.Popen(
    ["bash", "scripts/slurm_gpu.sbatch", PAPER],
    cwd=ROOT,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  deadline = time.time() + 20
  while not (workdir / "srun.args").exists():
    assert time.time() < deadline and proc.poll() is None, proc.communicate()[0]
    time.sleep(0.05)
  proc.send_signal(signum)
  out, _ = proc.communicate(timeout=20)
  assert proc.returncode == 0, out
  assert "SIGTERM to the training processes" in out
  assert (workdir / "summary.json").exists()  # srun got the TERM and "saved"
  assert (workdir / "logs").is_dir()
  if requeued:
    assert (workdir / "scontrol.args").read_text().split() == ["requeue", "1234"]
  else:
    assert not (workdir / "scontrol.args").exists()
