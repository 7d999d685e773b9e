"""The Cloud TPU VM launcher (scripts/launch_tpu_vm.sh): dry runs of each mode, its checks, and
a launch, a refused second launch, a stop and the logs on a fake two-worker slice."""

import importlib.util
import os
import shlex
import signal
import subprocess
import sys

import pytest

from resnorm_jax.hardware import tuned_table
from tests.fake_cluster import PAPER, ROOT, TRAIN, fake_bin, script, suffix, wait_for
from tests.fake_cluster import calls as recorded_calls

pytestmark = pytest.mark.slow  # every test runs a launcher script in a child process


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
  proc = script(
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
  proc = script(
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
    proc = script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", f"--{mode}"])
    assert proc.returncode == 0, proc.stderr
    assert _ssh_commands(proc.stdout) == [f"cd ~/resnorm_jax && bash scripts/tpu_worker.sh {mode}"]


def test_tpu_vm_launcher_default_workdir_is_stable_and_shared():
  runs = [
    script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/mnt/s",
             PAPER, "--config.opt.lr=1e-4"])
    for _ in range(2)
  ]  # fmt: skip
  assert runs[0].stdout == runs[1].stdout  # no timestamp: launching again resumes
  workdir = f"/mnt/s/runs/postnorm_96L-paper-{suffix('--config.opt.lr=1e-4')}"
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
  proc = script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", *args])
  assert proc.returncode == 2 and message in proc.stderr, proc.stderr


needs_libtpu = pytest.mark.skipif(
  not importlib.util.find_spec("libtpu"), reason="libtpu (the TPU compiler) is not installed"
)
# What compile_for prints and exits with for a config too big for the slice (tests/
# test_compile_for.py compiles one: 16.07 GiB of temporaries per v5e chip, 15.75 allowed).
REFUSING_COMPILE = """#!/bin/bash
[[ "$1" == -c ]] && exec "{python}" "$@"  # the launcher's check of the accelerator type
printf '%s\\n' "$@" > "{argv}"
echo "DOES NOT FIT on v5e:2x2"
echo "recommendation: train.batch_size=8192 (per-chip batch 2048) fits (8.10 GiB per chip)"
echo "error: smoke does not fit on v5e:2x2: train.batch_size=8192" >&2
exit 2
"""


def _dry_run(*overrides: str, env: dict[str, str]) -> subprocess.CompletedProcess:
  return script(
    ["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/m",
     "--accelerator-type=v5litepod-4", "configs/smoke.py", *overrides],
    env=env,
    timeout=300,
  )  # fmt: skip


@needs_libtpu
@pytest.mark.long  # a real TPU compile; compile_for itself: test_compile_for
def test_tpu_vm_launcher_compiles_the_run_for_the_slice_first():
  """The run is compiled for the slice's chips (the real compile_for, deviceless) before
  anything reaches the workers."""
  proc = _dry_run(env={"COMPILE_PYTHON": sys.executable})
  assert "compile check: configs/smoke.py on v5litepod-4" in proc.stderr
  assert proc.returncode == 0 and "FITS on v5e:2x2" in proc.stderr, proc.stderr[-2000:]
  assert len(_ssh_commands(proc.stdout)) == 2  # then the busy check and the start


def test_tpu_vm_launcher_stops_where_the_compile_check_refuses(tmp_path):
  """A config the compile check refuses is not launched: compile_for's refusal and its
  recommendation reach the user, no gcloud command is printed. compile_for here is a stand-in
  that refuses as the real one does (the real refusal: tests/test_compile_for.py)."""
  fake = tmp_path / "python"
  fake.write_text(REFUSING_COMPILE.format(argv=tmp_path / "argv", python=sys.executable))
  fake.chmod(0o755)
  proc = _dry_run("--config.train.batch_size=16384", env={"COMPILE_PYTHON": str(fake)})
  argv = (tmp_path / "argv").read_text().splitlines()
  assert argv[:2] == ["-m", "experiments.compile_for"] and "--topology=v5litepod-4" in argv
  assert "--config=configs/smoke.py" in argv and "--config.train.batch_size=16384" in argv
  assert proc.returncode == 2 and "DOES NOT FIT on v5e:2x2" in proc.stderr
  assert "recommendation: train.batch_size=" in proc.stderr
  assert proc.stderr.strip().splitlines()[-1].startswith("error: not launched")
  assert proc.stdout == ""  # no gcloud command: nothing reached the workers


def test_tpu_vm_launcher_dry_run_without_a_type_says_it_skips_the_check():
  proc = script(["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/m",
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
  env = fake_bin(
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
    return [c[3] if c[0] == "compute" else c[0] for c in recorded_calls(tmp_path, "gcloud")]

  yield launch, repo, homes, tmp_path / "gcs", calls
  for home in homes:  # whatever a failed test left running
    active = home / "resnorm_jax" / "logs" / "active"
    if active.exists():
      pid = int(active.read_text().split()[0])
      try:
        os.killpg(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass


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
    wait_for(lambda log=log: "training" in log.read_text(), f"{home.name}'s run")
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


def test_a_paper_launch_runs_the_tuned_winner_for_its_slice_and_untuned_its_own_settings():
  """On a slice docs/tpu_compile/tuned.csv tuned the config for, the launch adds the winner's
  keys after the user's (a key the user gave is kept) and its XLA flags as LIBTPU_INIT_ARGS;
  the run folder is the one the untuned launch uses. --untuned adds nothing."""
  args = ["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", "--mount=/m",
          "--accelerator-type=v5p-16", "--no-compile-check"]  # fmt: skip
  mine = ["--config.train.steps=10", "--config.model.remat=dots"]
  tuned = script([*args, PAPER, *mine], env={"COMPILE_PYTHON": sys.executable})
  untuned = script([*args, "--untuned", PAPER, *mine])
  assert tuned.returncode == 0 and untuned.returncode == 0, tuned.stderr + untuned.stderr
  run, workdir, train = _started(_ssh_commands(tuned.stdout)[-1])
  run_u, workdir_u, train_u = _started(_ssh_commands(untuned.stdout)[-1])
  assert (run, workdir) == (run_u, workdir_u)  # the same folder: a relaunch resumes
  assert train_u == [".venv/bin/python", *TRAIN, "--workdir=" + workdir,
                     "--config.dist.initialize=true", *mine]  # fmt: skip
  row, _ = tuned_table.lookup(PAPER, "v5p-16", tuned_table.read())
  _, libtpu = tuned_table.launch_keys(row, mine)
  assert train[0] == "env" and train[1] == f"LIBTPU_INIT_ARGS={libtpu}" and libtpu
  assert train[2:] == [*train_u, "--config.mesh.data=1", "--config.mesh.fsdp=-1",
                       "--config.mesh.tensor=1", "--config.model.attention=splash"]  # fmt: skip
  assert "tuned: postnorm_96L on v5p:2x2x2" in tuned.stderr and "tuned:" not in untuned.stderr
  smaller = script([*args[:-2], "--accelerator-type=v5p-8", "--no-compile-check", PAPER])
  assert smaller.returncode == 0 and "not on 4 chips" in smaller.stderr
  assert "LIBTPU_INIT_ARGS" not in smaller.stdout and "attention=splash" not in smaller.stdout


@pytest.mark.parametrize(
  "args, message",
  [
    (["--accelerator-type=v5p-7"], "--accelerator-type=v5p-7 is not valid: accelerator type"),
    (["--accelerator-type=h100:8"], "--accelerator-type=h100:8 is not a Cloud TPU accelerator"),
    (["--mount=/"], "--mount=/ is the root folder, not a shared mount"),
    (["--workdir=gs://"], "--workdir=gs:// names no bucket"),
    (
      ["--workdir=/mnt/shared/../../etc/x"],
      "--workdir=/mnt/shared/../../etc/x (/etc/x) is not shared",
    ),
  ],
)
def test_a_bad_accelerator_type_mount_or_workdir_is_named_in_one_line(args, message):
  """v5p-7 and h100:8 were said not to compile within the memory; --mount=/ asked for a
  --mount; gs:// (no bucket) and a workdir that leaves the mount by '..' were launched."""
  mount = [] if args[0].startswith("--mount") else ["--mount=/mnt/shared"]
  proc = script(
    ["scripts/launch_tpu_vm.sh", "--dry-run", "--name=t", "--zone=z", *mount, *args,
     "configs/smoke.py"],
    env={"COMPILE_PYTHON": sys.executable},
  )  # fmt: skip
  assert proc.returncode == 2, proc.stdout + proc.stderr
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith(f"error: {message}"), line
  assert proc.stdout == ""
