"""Stand-ins for a cluster's commands, shared by the launcher tests (test_launch_tpu_vm.py,
test_launch_slurm.py, test_sweep_array.py).

The launchers run for real against executables placed first on PATH (sbatch, srun, scontrol,
squeue, gcloud, hostname) that record their arguments (one line per call, shell quoted) and
the environment they saw, in $FAKE_LOG/<name>.calls and <name>.env.
"""

import hashlib
import os
import shlex
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = "configs/postnorm_96L.py:paper"
TRAIN = ["-m", "experiments.train", f"--config={PAPER}"]


def script(args, env=None, timeout=30):
  return subprocess.run(
    ["bash", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    env={**os.environ, **(env or {})},
  )


def suffix(*overrides: str) -> str:
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


def fake_bin(tmp_path, **scripts: str) -> dict[str, str]:
  """Executables named after the keywords, first on PATH; the environment to run with."""
  bin_dir, log = tmp_path / "bin", tmp_path / "calls"
  bin_dir.mkdir(exist_ok=True)
  log.mkdir(exist_ok=True)
  for name, text in scripts.items():
    (bin_dir / name).write_text(text)
    (bin_dir / name).chmod(0o755)
  return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(log)}


def calls(tmp_path, name: str) -> list[list[str]]:
  path = tmp_path / "calls" / f"{name}.calls"
  return [shlex.split(line) for line in path.read_text().splitlines()] if path.exists() else []


# Stand-ins that only record their calls (sbatch also answers with a job id).
FAKE_SCONTROL = f'#!/usr/bin/env bash\n{RECORD}record "$@"\n'
FAKE_SBATCH = f'#!/usr/bin/env bash\n{RECORD}record "$@"\necho "Submitted batch job 4242"\n'


def wait_for(predicate, what: str, timeout: float = 20):
  deadline = time.time() + timeout
  while not predicate():
    assert time.time() < deadline, f"timed out waiting for {what}"
    time.sleep(0.05)
