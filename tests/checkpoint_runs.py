"""What the checkpoint tests share (tests/test_checkpoint_*.py): training the smoke config in
a subprocess (with a signal or a full disk at a chosen step), reading its metrics, summary and
checkpoints back, and restoring its latest checkpoint in this process. The reference run they
compare with, bit for bit, is conftest.py's `checkpoint_reference` (one per session).

The runs use model.norm=batchnorm, so the running averages must come back too: eval/loss is
computed with them. Subprocesses share a persistent compilation cache (conftest.py's
`checkpoint_env`), so each distinct program compiles once per session.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

from batchnorm_smoke import abstract_state as _abstract
from batchnorm_smoke import config as _config

from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.train import checkpoint as ckpt_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 40
# checkpoint_every=7 is not a multiple of log_every=5: resumes start mid log interval.
COMMON = (
  "--config.model.norm=batchnorm",
  "--config.train.log_every=5",
  "--config.train.eval_every=20",
  "--config.train.checkpoint_every=7",
  # A run extended past its end evaluated there as an end-of-run eval (final_eval_tokens:
  # more batches) where the uninterrupted reference's eval is periodic: one size for both.
  "--config.train.final_eval_tokens=1",
)
# Runs experiments.train, sending signal SIGNUM to itself when the batch of step AT is built
# (i.e. while step AT+1 is being prepared): a real signal at a chosen step, no polling race.
# TEST_STEP_SLEEP=S makes each batch take S seconds more (a longer run, same numbers).
# TEST_ENOSPC_FROM=N: every checkpoint save from step N on fails with ENOSPC (a full disk),
# in orbax's background thread, where a real one fails.
HOOKED_TRAIN = """
import errno, os, sys, time
from orbax.checkpoint._src.handlers import json_checkpoint_handler as jch
from resnorm_jax.data import batches
full_from = int(os.environ.get("TEST_ENOSPC_FROM", "0"))
save_fn = jch.JsonCheckpointHandler._save_fn
async def full_disk(self, x, directory):
  step = directory.parent.name.split(".")[0]
  if full_from and step.isdigit() and int(step) >= full_from:
    raise OSError(errno.ENOSPC, "No space left on device", str(directory / "metadata"))
  return await save_fn(self, x, directory)
jch.JsonCheckpointHandler._save_fn = full_disk
at, signum = (int(v) for v in os.environ.get("TEST_SIGNAL_AT", "-1:0").split(":"))
pause = float(os.environ.get("TEST_STEP_SLEEP", "0"))
get_batch = batches.get_batch
def hooked(*args, **kwargs):
  time.sleep(pause)
  if kwargs["step"] == at:
    os.kill(os.getpid(), signum)
  return get_batch(*args, **kwargs)
batches.get_batch = hooked
from absl import app
from experiments import train
from resnorm_jax.config import cli
app.run(train.main, flags_parser=cli.parse_flags_or_exit)
"""


def command(workdir, steps, *extra, hooked=False, common=COMMON):
  args = [
    f"--config={os.path.join(ROOT, 'configs', 'smoke.py')}",
    f"--workdir={workdir}",
    f"--config.train.steps={steps}",
    *common,
    *extra,
  ]
  entry = ["-c", HOOKED_TRAIN] if hooked else ["-m", "experiments.train"]
  return [sys.executable, *entry, *args]


def train(env, workdir, steps, *extra, signal_at=None, enospc_from=None, common=COMMON):
  """Runs a training subprocess to its end; returns the CompletedProcess (text output)."""
  hooked = signal_at is not None or enospc_from is not None
  cmd = command(workdir, steps, *extra, hooked=hooked, common=common)
  env = dict(env)
  if signal_at is not None:
    env["TEST_SIGNAL_AT"] = f"{signal_at[0]}:{int(signal_at[1])}"
  if enospc_from is not None:
    env["TEST_ENOSPC_FROM"] = str(enospc_from)
  return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def ok(proc):
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return proc


def rows(workdir):
  """metrics.jsonl without the wall-clock fields and the end-of-run evals (a run extended
  past its first end has one at that step, which a run to the end at once has not)."""
  rows = read_metrics(os.path.join(workdir, "metrics.jsonl"))
  skip = ("tokens_per_second", "step_seconds", "eval/final_loss")
  return [{k: v for k, v in r.items() if k not in skip} for r in rows]


def summary(workdir):
  with open(os.path.join(workdir, "summary.json")) as f:
    return json.load(f)


def hashes(workdir):
  """{path under workdir: sha256} of every file, and every folder (None)."""
  out = {}
  for folder, dirs, files in os.walk(workdir):
    for name in dirs:
      out[os.path.relpath(os.path.join(folder, name), workdir)] = None
    for name in files:
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, workdir)] = hashlib.sha256(f.read()).hexdigest()
  return out


def ckpt_steps(workdir):
  d = os.path.join(workdir, "ckpt")
  return sorted(int(n) for n in os.listdir(d) if n.isdigit())


def copy(src, dst):
  shutil.copytree(src, dst)
  return str(dst)


def run_dict(config, common=True):
  """The config as the loop hands it to a restore: the run's config with the data's fingerprint
  added (None for the stdlib corpus); with `common`, COMMON's end-of-run eval size. A restore
  checks the full config the checkpoint recorded, so it must be the run's."""
  config = config.copy_and_resolve_references()
  if common:
    config.train.final_eval_tokens = 1
  return {**config.to_dict(), "data_fingerprint": None}


def restore(workdir, config=None, common=True):
  config = config or _config()
  checkpointer = ckpt_lib.Checkpointer(os.path.join(workdir, "ckpt"))
  try:
    return checkpointer.restore_latest(_abstract(config), run_dict(config, common))
  finally:
    checkpointer.close()
