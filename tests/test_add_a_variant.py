"""CONTRIBUTING.md's "Add a variant", walked on a throwaway variant in a copy of the repository.

The tracked files are copied into a folder of their own (a git repository of one commit), the
recipe's files are added there (a variant module with one config key of its own, its named
config, its test file) and its smoke config's golden losses written, every command running
that copy's code (PYTHONPATH, not the editable install). Then: the variant trains at smoke
scale with its key set on the command line, `python -m resnorm_jax.config` lists the key,
the registry's guards and the variant's test pass without editing any other file, and git
sees only the files the recipe names changed or added.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

NAME = "throwaway"
KEY = "throwaway_scale"
# The recipe's files, and the one file a step of it rewrites (the golden losses).
ADDED = (
  f"resnorm_jax/model/variants/{NAME}.py",
  f"configs/{NAME}_96L.py",
  f"tests/test_{NAME}.py",
)
CHANGED = ("tests/data/golden_losses.json",)

VARIANT = f'''
"""A throwaway residual for the recipe's test: x + s F, s = model.{KEY}."""

from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model.variants.hooks import Key, Residual


def _positive(value):
  return None if value > 0 else "must be > 0"


VARIANTS = (
  Residual(
    "{NAME}",
    "x + s F, s = model.{KEY}",
    keys={{"{KEY}": Key(0.5, "the branch's factor s", _positive)}},
    make=lambda cfg, *, rngs, **_: residual_lib.Residual(
      "scaled", cfg.d_model, scale=cfg.{KEY}, rngs=rngs
    ),
  ),
)
'''

CONFIG = f'''
"""The throwaway variant of the recipe's test: Pre-LN, x + s F."""

from configs import base

LABEL = "throwaway"  # its name in tables
COLOR = "#00ff00"  # its colour in every figure


def get_config(arg=None):
  c = base.experiment("{NAME}_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "{NAME}"
  return c
'''

TEST = f'''
"""The throwaway variant's formula against NumPy."""

import numpy as np
from flax import nnx

from conftest import tiny_config
from resnorm_jax.model import variants


def test_the_residual_is_skip_plus_scaled_branch():
  cfg = tiny_config(residual="{NAME}", norm_position="pre", {KEY}=0.25)
  module = variants.residual(cfg.residual).make(
    cfg, slot="attn", num_slots=2, layer_index=0, norm=None, rngs=nnx.Rngs(0)
  )
  x, f = np.ones((2, 3, 8), np.float32), np.full((2, 3, 8), 2.0, np.float32)
  np.testing.assert_allclose(np.asarray(module(x, f)), x + 0.25 * f, rtol=1e-6)
'''


def _run(argv, cwd, env, timeout=600):
  proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
  return proc.returncode, proc.stdout + proc.stderr


def _git(repo, *args):
  out = subprocess.run(
    ["git", "-c", "user.name=recipe", "-c", "user.email=recipe@test", *args],
    cwd=repo, capture_output=True, text=True, check=True,
  )  # fmt: skip
  return out.stdout


@pytest.mark.slow  # a copy of the repository, a golden-loss run, a smoke run, a pytest run
@pytest.mark.long  # the recipe's commands end to end
def test_the_add_a_variant_recipe_on_a_throwaway_variant(tmp_path):
  repo = tmp_path / "repo"
  tracked = subprocess.run(
    ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
  ).stdout.split("\0")
  for rel in filter(None, tracked):
    if os.path.isfile(os.path.join(ROOT, rel)):  # a tracked file deleted here is not copied
      (repo / rel).parent.mkdir(parents=True, exist_ok=True)
      shutil.copy2(os.path.join(ROOT, rel), repo / rel)
  _git(repo, "init", "-q")
  _git(repo, "add", "-A")
  _git(repo, "commit", "-q", "-m", "the repository as copied")
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONPATH=str(repo), JAX_PLATFORMS="cpu")
  code, out = _run(
    [sys.executable, "-c", "import resnorm_jax; print(resnorm_jax.__file__)"], repo, env
  )
  assert code == 0 and out.startswith(str(repo)), out  # the copy's code, not the checkout's

  # The recipe: a module, a named config, a test file, the smoke config's golden losses.
  for rel, text in zip(ADDED, (VARIANT, CONFIG, TEST), strict=True):
    (repo / rel).write_text(text.lstrip())
  code, out = _run(
    [sys.executable, "scripts/golden_losses.py", "--write", f"{NAME}_96L:smoke"], repo, env
  )
  assert code == 0 and "wrote 1 configs" in out, out[-3000:]
  golden = json.loads((repo / CHANGED[0]).read_text())
  assert f"{NAME}_96L:smoke" in golden and "smoke" in golden  # added, the others kept

  # (a) It trains at smoke scale, its key set on the command line; a bad value is refused.
  run = tmp_path / "run"
  code, out = _run(
    [
      sys.executable, "-m", "experiments.train", f"--config=configs/{NAME}_96L.py:smoke",
      f"--config.model.{KEY}=0.25", f"--workdir={run}",
    ],
    repo, env,
  )  # fmt: skip
  assert code == 0, out[-3000:]
  summary = json.loads((run / "summary.json").read_text())
  assert summary["status"] == "completed", summary
  config = json.loads((run / "config.json").read_text())
  assert config["model"]["residual"] == NAME and config["model"][KEY] == 0.25
  assert config["resolved_model"][KEY] == 0.25
  code, out = _run(
    [
      sys.executable, "-m", "experiments.train", f"--config=configs/{NAME}_96L.py:smoke",
      f"--config.model.{KEY}=-1.0", f"--workdir={tmp_path / 'refused'}",
    ],
    repo, env,
  )  # fmt: skip
  assert code != 0 and f"model.{KEY}=-1.0 must be > 0" in out, out[-3000:]

  # (b) The schema lists the key with its default and description.
  code, out = _run([sys.executable, "-m", "resnorm_jax.config", "model."], repo, env)
  assert code == 0, out
  row = [line for line in out.splitlines() if line.startswith(f"model.{KEY} ")]
  assert len(row) == 1 and "0.5" in row[0] and f"{NAME}: the branch's factor s" in row[0], out

  # The variant's test and the registry's guards pass with no other file edited.
  code, out = _run(
    [
      sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
      f"tests/test_{NAME}.py", "tests/test_registry.py", "tests/test_schema.py",
    ],
    repo, env,
  )  # fmt: skip
  assert code == 0, out[-3000:]

  # (c) Git sees the recipe's files and nothing else.
  status = _git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
  assert sorted(line[3:] for line in status) == sorted(ADDED + CHANGED), status
  assert sorted(line[:2] for line in status) == sorted(["??"] * len(ADDED) + [" M"] * len(CHANGED))
