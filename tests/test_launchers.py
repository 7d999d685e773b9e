"""Cluster launchers (SLURM GPU, Cloud TPU VM): what they would run, and what survives.

Dry runs show the commands. The rest runs for real against stand-ins for the cluster's
commands placed first on PATH (sbatch, srun, scontrol, squeue, gcloud, hostname), which
record their arguments: the SLURM script's signal handling (USR1 ahead of the time limit
becomes a SIGTERM to the training processes and, once the run says "interrupted", a requeue
of the same job), the check on the submitting host before sbatch, and a launch, a refused
second launch, a stop and the logs on a fake two-worker TPU slice.
"""

import hashlib
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # every test runs a launcher script in a child process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = "configs/postnorm_96L.py:paper"
TRAIN = ["-m", "experiments.train", f"--config={PAPER}"]


def _script(args, env=None, timeout=30):
  return subprocess.run(
    ["bash", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    env={**os.environ, **(env or {})},
  )


def _suffix(*overrides: str) -> str:
  """The workdir suffix both launchers derive from the overrides."""
  return hashlib.sha256("".join(f"{o}\0" for o in overrides).encode()).hexdigest()[:8]


# Stand-ins for cluster commands: each records its arguments (one line per call, shell
# quoted) and the environment it saw, in $FAKE_LOG/<name>.calls and <name>.env.
RECORD = """record() {
  local log="$FAKE_LOG/$(basename "$0")"
  printf '%q ' "$@" >> "$log.calls"; echo >> "$log.calls"
  env > "$log.env"
}
"""


def _fake_bin(tmp_path, **scripts: str) -> dict[str, str]:
  """Executables named after the keywords, first on PATH; the environment to run with."""
  bin_dir, log = tmp_path / "bin", tmp_path / "calls"
  bin_dir.mkdir(exist_ok=True)
  log.mkdir(exist_ok=True)
  for name, text in scripts.items():
    (bin_dir / name).write_text(text)
    (bin_dir / name).chmod(0o755)
  return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(log)}


def _calls(tmp_path, name: str) -> list[list[str]]:
  path = tmp_path / "calls" / f"{name}.calls"
  return [shlex.split(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- Cloud TPU VM -----------------------------------------------------------------------------


def _ssh_commands(stdout: str) -> list[str]:
  """The --command of each `gcloud ... ssh` line of a dry run, in order."""
  lines = [shlex.split(line) for line in stdout.strip().splitlines()]
  return [a[a.index("--command") + 1] for a in lines if a[:5] == GCLOUD_TPU + ["ssh"]]


GCLOUD_TPU = ["gcloud", "compute", "tpus", "tpu-vm"]


def _started(remote: str) -> tuple[str, str, list[str]]:
  """(run, workdir, command) that a launch's remote command starts on each worker."""
  argv = shlex.split(remote.split("bash scripts/tpu_worker.sh start ")[1])
  return argv[0], argv[1], argv[2:]


def test_tpu_vm_launcher_runs_detached_with_per_worker_logs():
  override = "--config.name=it's a test"  # a space and a quote survive two shells
  proc = _script(
    ["scripts/launch_tpu_vm.sh", "--dry-run", "--name", "my-tpu", "--zone=us-central2-b",
     "--mount=/mnt/shared", "--workdir=/mnt/shared/run", PAPER, "--config.train.steps=10",
     override]
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  lines = [shlex.split(line) for line in proc.stdout.strip().splitlines()]
  assert len(lines) == 2  # the busy check, then the start: no sync or setup asked for
  for argv in lines:
    assert argv[:6] == GCLOUD_TPU + ["ssh", "my-tpu"]
    assert argv[8:] == ["--zone", "us-central2-b", "--worker=all"]
  check, start = _ssh_commands(proc.stdout)
  assert "bash scripts/tpu_worker.sh check" in check
  assert start.startswith("mkdir -p ~/resnorm_jax && cd ~/resnorm_jax && bash ")
  run, workdir, train = _started(start)
  assert (run, workdir) == ("run", "/mnt/shared/run")
  assert train == [
    ".venv/bin/python",
    *TRAIN,
    "--workdir=/mnt/shared/run",
    "--config.dist.initialize=true",
    "--config.train.steps=10",
    override,
  ]
  assert "pip install" not in start and "setup" not in start and "git" not in start


def test_tpu_vm_launcher_dry_runs_of_sync_setup_and_each_mode():
  head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
  bundle = f"resnorm_jax-{head.stdout.strip()[:12]}.bundle"
  proc = _script(
    ["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--project=p", "--sync",
     "--setup", "--python=python3.11", "--workdir=gs://bucket/runs/a", PAPER]
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  lines = [shlex.split(line) for line in proc.stdout.strip().splitlines()]
  local = os.path.join(os.environ.get("TMPDIR", "/tmp"), bundle)
  assert lines[1] == ["git", "bundle", "create", local, "HEAD"]
  assert lines[2] == GCLOUD_TPU + ["scp", local, f"t:{bundle}", "--zone", "z", "--worker=all",
                                   "--project", "p"]  # fmt: skip
  start = _ssh_commands(proc.stdout)[1]
  assert f"git fetch -q ~/{bundle} HEAD && git -c advice.detachedHead=false checkout" in start
  setup = " && bash scripts/tpu_worker.sh setup python3.11 && bash scripts/tpu_worker.sh start"
  assert setup in start and _started(start)[:2] == ("a", "gs://bucket/runs/a")
  for mode in ("stop", "status", "logs", "tail"):
    proc = _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", f"--{mode}"])
    assert proc.returncode == 0, proc.stderr
    assert _ssh_commands(proc.stdout) == [f"cd ~/resnorm_jax && bash scripts/tpu_worker.sh {mode}"]


def test_tpu_vm_launcher_default_workdir_is_stable_and_shared():
  runs = [
    _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/mnt/s",
             PAPER, "--config.opt.lr=1e-4"])
    for _ in range(2)
  ]  # fmt: skip
  assert runs[0].stdout == runs[1].stdout  # no timestamp: launching again resumes
  workdir = f"/mnt/s/runs/postnorm_96L-paper-{_suffix('--config.opt.lr=1e-4')}"
  assert _started(_ssh_commands(runs[0].stdout)[1])[1] == workdir


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
    (["--stop", PAPER], "takes no CONFIG"),
  ],
)
def test_tpu_vm_launcher_refuses_bad_input(args, message):
  proc = _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", *args])
  assert proc.returncode == 2 and message in proc.stderr, proc.stderr


needs_libtpu = pytest.mark.skipif(
  not importlib.util.find_spec("libtpu"), reason="libtpu (the TPU compiler) is not installed"
)
# Logits of 16,384 x 32 tokens x 32,768 ids per step, a quarter per chip (rows split over 4
# chips): 16.07 GiB of temporaries per v5e chip (15.75 GiB allowed); half the batch fits.
TOO_BIG = [
  "--config.model.vocab_size=32768",
  "--config.train.batch_size=16384",
  "--config.model.remat=full",
  "--config.mesh.data=1",
  "--config.mesh.fsdp=-1",
]


@needs_libtpu
@pytest.mark.parametrize("overrides, fits", [([], True), (TOO_BIG, False)])
def test_tpu_vm_launcher_compile_check(overrides, fits):
  """The run is compiled for the slice's chips before anything reaches the workers; a config
  that does not fit their memory is refused with the setting that would."""
  proc = _script(
    ["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/m",
     "--accelerator-type=v5litepod-4", "configs/smoke.py", *overrides],
    env={"COMPILE_PYTHON": sys.executable},
    timeout=900,
  )  # fmt: skip
  assert "compile check: configs/smoke.py on v5litepod-4" in proc.stderr
  if fits:
    assert proc.returncode == 0 and "FITS on v5e:2x2" in proc.stderr, proc.stderr[-2000:]
    assert len(_ssh_commands(proc.stdout)) == 2  # then the busy check and the start
  else:
    assert proc.returncode == 2 and "DOES NOT FIT on v5e:2x2" in proc.stderr
    assert "recommendation: train.batch_size=" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: not launched")
    assert proc.stdout == ""  # no gcloud command: nothing reached the workers


def test_tpu_vm_launcher_dry_run_without_a_type_says_it_skips_the_check():
  proc = _script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/m",
                  PAPER])  # fmt: skip
  assert proc.returncode == 0 and "no compile check" in proc.stderr


# gcloud for a slice of two workers, w0 and w1, whose home folders are $FAKE_TPU/w0 and w1:
# `ssh --worker=all --command C` runs C with bash in each home (hostname: the worker's name),
# `scp SRC NODE:DEST --worker=all` copies into each home, `storage cp SRC gs://B/P` copies to
# $FAKE_GCS/B/P.
FAKE_GCLOUD = """#!{python}
import os, shlex, shutil, subprocess, sys
with open(os.path.join(os.environ["FAKE_LOG"], "gcloud.calls"), "a") as f:
  f.write(shlex.join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args[:2] == ["storage", "cp"]:
  src, dst = [a for a in args[2:] if not a.startswith("-")]
  path = os.path.join(os.environ["FAKE_GCS"], dst.removeprefix("gs://"))
  os.makedirs(os.path.dirname(path), exist_ok=True)
  shutil.copy(src, path)
  sys.exit(0)
assert args[:3] == ["compute", "tpus", "tpu-vm"] and "--worker=all" in args, args
homes = [os.path.join(os.environ["FAKE_TPU"], w) for w in ("w0", "w1")]
if args[3] == "scp":
  for home in homes:
    shutil.copy(args[4], os.path.join(home, args[5].split(":", 1)[1]))
  sys.exit(0)
command, rc = args[args.index("--command") + 1], 0
for home in homes:
  env = dict(os.environ, HOME=home, FAKE_HOST=os.path.basename(home))
  rc = max(rc, subprocess.run(["bash", "-c", command], cwd=home, env=env).returncode)
sys.exit(rc)
"""
FAKE_HOSTNAME = '#!/usr/bin/env bash\necho "$FAKE_HOST"\n'
# The training run on a worker: runs until SIGTERM, then "saves" and exits.
FAKE_TPU_TRAIN = """#!/usr/bin/env bash
echo "training $*"
trap 'echo "saved at step 7"; exit 0' TERM
while :; do sleep 0.05; done
"""
# Interpreters for --setup: 3.10 (refused) and 3.11, whose venv's pip records its calls.
FAKE_PY310 = """#!/usr/bin/env bash
case "$*" in *python_version*) echo 3.10.12 ;; *version_info*) exit 1 ;; esac
"""
FAKE_PY311 = """#!/usr/bin/env bash
case "$*" in
  *python_version*) echo 3.11.9 ;;
  *version_info*) exit 0 ;;
  "-m venv .venv")
    mkdir -p .venv/bin
    printf '#!/usr/bin/env bash\\necho "$HOME pip $*" >> "$FAKE_LOG/pip.calls"\\n' > .venv/bin/pip
    printf '#!/usr/bin/env bash\\nexit 0\\n' > .venv/bin/python
    chmod +x .venv/bin/pip .venv/bin/python ;;
esac
"""


@pytest.fixture
def tpu_slice(tmp_path):
  """(launch(args) -> CompletedProcess, mini repository, worker homes, fake GCS, calls()).

  The launcher runs from a small git repository holding the two TPU scripts and a config,
  so that --sync ships a commit that has them whatever this checkout's state."""
  repo = tmp_path / "repo"
  (repo / "scripts").mkdir(parents=True)
  (repo / "configs").mkdir()
  for f in ("scripts/launch_tpu_vm.sh", "scripts/tpu_worker.sh", "configs/smoke.py"):
    (repo / f).write_text(open(os.path.join(ROOT, f)).read())
  git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
  subprocess.run(git[:3] + ["init", "-q"], check=True)
  subprocess.run(git + ["add", "."], check=True)
  subprocess.run(git + ["commit", "-qm", "x"], check=True)
  homes = [tmp_path / "tpu" / w for w in ("w0", "w1")]
  for home in homes:
    home.mkdir(parents=True)
  env = _fake_bin(
    tmp_path,
    gcloud=FAKE_GCLOUD.format(python=sys.executable),
    hostname=FAKE_HOSTNAME,
    train=FAKE_TPU_TRAIN,
    python3_10=FAKE_PY310,
    python3_11=FAKE_PY311,
  )
  env.update(
    FAKE_TPU=str(tmp_path / "tpu"),
    FAKE_GCS=str(tmp_path / "gcs"),
    PYTHON=str(tmp_path / "bin" / "train"),
    TPU_NAME="slice",
    TPU_ZONE="z",
  )

  def launch(*args):  # the compile check before launching: test_tpu_vm_launcher_compile_check
    return subprocess.run(
      ["bash", str(repo / "scripts" / "launch_tpu_vm.sh"), "--no-compile-check", *args],
      env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

  def calls():
    return [c[3] if c[0] == "compute" else c[0] for c in _calls(tmp_path, "gcloud")]

  yield launch, repo, homes, tmp_path / "gcs", calls
  for home in homes:  # whatever a failed test left running
    active = home / "resnorm_jax" / "logs" / "active"
    if active.exists():
      pid = int(active.read_text().split()[0])
      try:
        os.killpg(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass


def _wait_for(predicate, what: str, timeout: float = 20):
  deadline = time.time() + timeout
  while not predicate():
    assert time.time() < deadline, f"timed out waiting for {what}"
    time.sleep(0.05)


def test_tpu_vm_sync_launch_refuse_stop_logs_relaunch(tpu_slice):
  """Against a fake two-worker slice: --sync ships HEAD and --setup makes the venv, the run
  starts detached on both workers; a second launch is refused while it runs; --status,
  --stop (SIGTERM: it saves), --logs (to the workdir); after --stop a launch starts again."""
  launch, repo, homes, gcs, calls = tpu_slice
  workdir = "gs://bucket/runs/smoke-a"
  args = ["--sync", f"--workdir={workdir}", "configs/smoke.py", "--config.train.steps=5"]
  refused = launch("--setup", "--python=python3_10", *args)
  assert refused.returncode != 0 and "needs >= 3.11: give --python=python3.11" in refused.stderr
  assert not (homes[0] / "resnorm_jax" / "logs" / "active").exists()
  proc = launch("--setup", "--python=python3_11", *args)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  head = subprocess.run(
    ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
  )
  for home in homes:
    checkout = home / "resnorm_jax"
    synced = subprocess.run(
      ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert synced.stdout == head.stdout  # a real checkout of the commit: runs record it
    log = checkout / "logs" / f"smoke-a.{home.name}.log"
    _wait_for(lambda log=log: "training" in log.read_text(), f"{home.name}'s run")
    text = log.read_text()
    assert f"commit {head.stdout.strip()}" in text
    assert "--config.dist.initialize=true --config.train.steps=5" in text
  pips = (repo.parent / "calls" / "pip.calls").read_text().splitlines()
  assert sorted(pips) == [f"{h} pip install -q -r requirements-tpu.txt" for h in homes]
  assert calls() == ["ssh", "scp", "ssh"] * 2  # each launch: check, sync, setup and start

  again = launch(f"--workdir={workdir}", "configs/smoke.py")
  assert again.returncode == 3 and "stop it first" in again.stderr, again.stderr
  assert "busy: w0 runs smoke-a" in again.stdout and "busy: w1 runs smoke-a" in again.stdout
  assert calls()[6:] == ["ssh"]  # the check only: nothing synced or started

  status = launch("--status")
  assert status.stdout.count("running smoke-a") == 2, status.stdout
  stop = launch("--stop")
  assert stop.returncode == 0 and stop.stdout.count("smoke-a stopped") == 2, stop.stdout
  for home in homes:
    copied = gcs / "bucket" / "runs" / "smoke-a" / "logs" / f"{home.name}.log"
    assert "saved at step 7" in copied.read_text()  # the run saved; its log in the workdir
    copied.unlink()
  logs = launch("--logs")
  assert (
    logs.returncode == 0
    and len(list((gcs / "bucket" / "runs" / "smoke-a" / "logs").iterdir())) == 2
  )
  assert "idle; last run smoke-a" in launch("--status").stdout

  relaunch = launch(f"--workdir={workdir}", "configs/smoke.py", "--config.train.steps=5")
  assert relaunch.returncode == 0, relaunch.stderr
  assert launch("--status").stdout.count("running smoke-a") == 2
  assert launch("--stop").returncode == 0


# --- SLURM ------------------------------------------------------------------------------------


def _srun_argv(stdout: str) -> list[str]:
  """The srun command of a dry run (its last line), without leading VAR=value words."""
  argv = shlex.split(stdout.strip().splitlines()[-1])
  return argv[argv.index("srun") :]


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
  plain = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER])
  assert "--workdir=runs/postnorm_96L-paper " in plain.stdout  # no overrides: no hash
  assert "XLA_FLAGS" not in plain.stdout  # the performance flags are off by default


def test_slurm_cpus_per_task_follow_the_allocation():
  gpu = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {"SLURM_CPUS_PER_TASK": "12"})
  assert "--cpus-per-task=12" in _srun_argv(gpu.stdout)
  node = _script(
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
  proc = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], env)
  assert proc.returncode == 0, proc.stderr
  argv = _srun_argv(proc.stdout)
  i = argv.index("--container-image=/images/jax.sqsh")
  assert argv[i + 1 : i + 4] == [
    f"--container-mounts={ROOT}:{ROOT},/scratch/runs/a:/scratch/runs/a,/cluster/data:/cluster/data",
    f"--container-workdir={ROOT}",
    "python3",  # the image's Python: the checkout's .venv belongs to the host
  ]
  setup = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {**env, "SETUP": "1"})
  assert setup.returncode == 2 and "build the image" in setup.stderr


def test_slurm_perf_flags_are_opt_in_and_known_to_the_pinned_jaxlib():
  proc = _script(
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
  custom = _script(
    ["scripts/slurm_gpu.sbatch", "--dry-run", PAPER],
    {"XLA_GPU_PERF": "1", "PERF_XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=false"},
  )
  words = shlex.split(custom.stdout.strip().splitlines()[-1])
  assert words[0].startswith("XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=false ")


def test_slurm_refuses_bad_input():
  outside = _script(["scripts/slurm_gpu.sbatch", PAPER], {"SLURM_JOB_ID": ""})
  assert outside.returncode == 2 and "sbatch" in outside.stderr
  for bad in (["configs/nope.py"], [PAPER, "steps=3"], [], ["--dry_run", PAPER]):
    proc = _script(["scripts/slurm_gpu.sbatch", "--dry-run", *bad])
    assert proc.returncode == 2 and "error" in proc.stderr, bad
  proc = _script(["scripts/slurm_gpu.sbatch", "--dry-run", PAPER], {"TASKS": "all"})
  assert proc.returncode == 2 and "gpu, node" in proc.stderr


FAKE_SRUN = f"""#!/usr/bin/env bash
{RECORD}record "$@"
case " $* " in *" -c "*) exit 0 ;; esac
trap 'echo "{{\\"status\\": \\"interrupted\\"}}" > "$WORKDIR/summary.json"; exit 0' TERM
while :; do sleep 0.05; done
"""
FAKE_SCONTROL = f'#!/usr/bin/env bash\n{RECORD}record "$@"\n'
FAKE_SBATCH = f'#!/usr/bin/env bash\n{RECORD}record "$@"\necho "Submitted batch job 4242"\n'
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
  while not any("experiments.train" in c for c in _calls(tmp_path, "srun")):
    assert time.time() < deadline and proc.poll() is None, proc.communicate()[0]
    time.sleep(0.05)
  return proc


@pytest.mark.parametrize("signum, requeued", [(signal.SIGUSR1, True), (signal.SIGTERM, False)])
def test_slurm_signal_stops_the_run_and_requeues_at_the_time_limit(tmp_path, signum, requeued):
  """USR1 (ahead of the time limit): SIGTERM to srun, then `scontrol requeue` of this job.
  TERM (a preemption: SLURM requeues the job itself): SIGTERM to srun, no requeue here."""
  env = _fake_bin(tmp_path, srun=FAKE_SRUN, scontrol=FAKE_SCONTROL, python=FAKE_PYTHON)
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
  (srun,) = _calls(tmp_path, "srun")
  assert "--cpus-per-task=6" in srun
  if requeued:
    assert _calls(tmp_path, "scontrol") == [["requeue", "1234"]]
  else:
    assert not _calls(tmp_path, "scontrol")


def test_slurm_container_job_checks_the_gpu_inside_the_image(tmp_path):
  env = _fake_bin(tmp_path, srun=FAKE_SRUN, scontrol=FAKE_SCONTROL)
  workdir = tmp_path / "run"
  env.update(WORKDIR=str(workdir), SLURM_JOB_ID="7", SLURM_SUBMIT_DIR=ROOT)
  env.update(CONTAINER_IMAGE="nvcr.io#nvidia/jax:25.04-py3")
  proc = _start_job(tmp_path, env)
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=20)
  assert proc.returncode == 0, out
  check, train = _calls(tmp_path, "srun")
  image = "--container-image=nvcr.io#nvidia/jax:25.04-py3"
  assert check[:4] == [
    "--nodes=1",
    "--ntasks=1",
    image,
    f"--container-mounts={ROOT}:{ROOT},{workdir}:{workdir}",
  ]
  assert check[5:7] == ["python3", "-c"]
  assert image in train and "python3" in train


def test_submit_slurm_validates_on_this_host_before_sbatch(tmp_path):
  env = _fake_bin(tmp_path, sbatch=FAKE_SBATCH)
  env.update(PYTHON=sys.executable, TASKS="node", NCCL_DEBUG="WARN")
  good = ["configs/smoke.py", "--config.train.steps=5"]
  proc = subprocess.run(
    ["bash", "scripts/submit_slurm.sh", "--nodes=4", "--time=01:00:00", *good],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  assert "ok: smoke" in proc.stdout and "Submitted batch job 4242" in proc.stdout
  assert _calls(tmp_path, "sbatch") == [
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
  assert len(_calls(tmp_path, "sbatch")) == 1  # nothing more was submitted
  dry = subprocess.run(
    ["bash", "scripts/submit_slurm.sh", "--dry-run", "--nodes=4", *good],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert dry.returncode == 0, dry.stderr
  lines = dry.stdout.strip().splitlines()
  assert shlex.split(lines[1]) == ["sbatch", "--nodes=4", "scripts/slurm_gpu.sbatch", *good]
  assert lines[-1].startswith("JAX_LOCAL_DEVICE_IDS=") and " srun " in lines[-1]
  assert len(_calls(tmp_path, "sbatch")) == 1


# --- A sweep as a SLURM job array ---------------------------------------------------------------

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
  env = _fake_bin(
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
  from resnorm_jax.tools import sweep_grid

  sweep_dir = tmp_path / "sweep"
  point = sweep_grid.parse_points([{"config": "configs/smoke.py", "overrides": {"seed": 0}}])[0]
  _, expected = sweep_grid.resolve(point, {}, None)
  done = sweep_dir / "smoke__seed=0"  # finished already: not submitted
  done.mkdir(parents=True)
  (done / "summary.json").write_text('{"status": "completed"}')
  (done / "config.json").write_text(json.dumps(expected))
  env = _fake_bin(tmp_path, sbatch=FAKE_SBATCH, squeue=FAKE_SQUEUE)
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
  assert not _calls(tmp_path, "sbatch") and not (sweep_dir / "slurm").exists()
  syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
  assert syntax.returncode == 0, syntax.stderr


def test_sweep_submit_records_the_array_and_skips_points_still_queued(tmp_path):
  sweep_dir = tmp_path / "sweep"
  env = _fake_bin(
    tmp_path, sbatch=FAKE_SBATCH_ARRAY.format(python=sys.executable), squeue=FAKE_SQUEUE
  )
  env["FAKE_SBATCH_RUN"] = "0"  # queued, never run
  args = [f"--grid={_grid(tmp_path)}", f"--sweep_dir={sweep_dir}", "--submit=slurm"]
  first = _sweep(env, *args)
  assert first.returncode == 0, first.stderr
  assert "submitted job array 500: 4 tasks" in first.stdout
  (call,) = _calls(tmp_path, "sbatch")
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
  second = open(_calls(tmp_path, "sbatch")[1][1]).read()
  assert "#SBATCH --array=0-1" in second.splitlines()
  assert names[0] in second and names[2] in second and names[1] not in second
  # A queue that cannot be read refuses: its points might run twice.
  env["PATH"] = env["PATH"].replace(str(tmp_path / "bin"), str(tmp_path / "nobin"))
  blind = _sweep(env, *args)
  assert blind.returncode == 2 and "cannot list the queue" in blind.stderr


def test_sweep_as_a_slurm_array_ends_as_the_local_sweep(tmp_path, read_csv):
  """A 3-point grid submitted as a job array to a fake SLURM that runs its tasks here; the
  time limit comes for two of them mid-run (USR1: they save and are requeued, then resume),
  the first runs through. Every point finishes, and the collected results equal a local
  sweep's of the same grid."""
  env = _array_env(tmp_path)
  grid = _grid(tmp_path, points=3)
  local = _sweep(env, f"--grid={grid}", f"--sweep_dir={tmp_path / 'local'}")
  assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-2000:]
  sweep_dir = tmp_path / "array"
  env["FAKE_PREEMPT"] = "1 2"
  args = [f"--grid={grid}", f"--sweep_dir={sweep_dir}", "--submit=slurm", "--max_concurrent=2"]
  submitted = _sweep(env, *args)
  assert submitted.returncode == 0, submitted.stderr
  _wait_for(lambda: (tmp_path / "calls" / "sbatch.done").exists(), "the array", timeout=600)
  assert _calls(tmp_path, "scontrol") == [["requeue", "500_1"], ["requeue", "500_2"]]
  srun = _calls(tmp_path, "srun")
  assert len(srun) == 5 and all(c[:2] == ["--ntasks=1", "--cpus-per-task=1"] for c in srun)
  names = [f"smoke__seed={s}" for s in range(3)]
  for i, name in enumerate(names):
    summary = json.loads((sweep_dir / name / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 20
    point = json.loads((sweep_dir / name / "sweep_point.json").read_text())
    assert point["returncode"] == 0 and point["slurm_task"] == f"500_{i}"
    batch_log = (sweep_dir / "slurm" / f"500_{i}.out").read_text()
    assert ("requeueing job 500_" in batch_log) == (i in (1, 2)), batch_log
  assert "resuming from step" in (sweep_dir / names[1] / "train.log").read_text()
  collected = _sweep(env, "--collect_only", f"--sweep_dir={sweep_dir}")
  assert collected.returncode == 0, collected.stderr
  rows = {d: read_csv(tmp_path / d / "results.csv") for d in ("local", "array")}
  for row in rows["local"] + rows["array"]:
    row.pop("wall_seconds")
  assert rows["array"] == rows["local"] and len(rows["local"]) == 3
  again = _sweep(env, *args)
  assert again.returncode == 0 and "nothing to submit" in again.stdout, again.stdout
  assert again.stdout.count(": done") == 3 and len(_calls(tmp_path, "sbatch")) == 1
