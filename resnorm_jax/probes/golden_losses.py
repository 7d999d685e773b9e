"""The exact losses of every named config at smoke scale, a refactor guard
(tests/data/golden_losses.json; scripts/golden_losses.py records or checks them,
tests/test_golden_losses.py compares them within a few ulps).

Each config trains through `loop.run` (6 steps, 2 layers, width 32) on CPU; every logged
train, eval and final-eval loss and gradient norm is kept. A few extra points cover the model
settings (remat, scan unroll, bfloat16). Losses are those of one CPU build of XLA: on another
machine record your own first. The file is recorded and checked under XLA_FLAGS below: one CPU
device, and LLVM without its optimizations, which compiles each point in about a third of the
time (postnorm_96L:smoke's and prenorm_96L:smoke's values sit up to 3.3 and 5 float32 ulps from
those of the default flags).
"""

from __future__ import annotations

import glob
import json
import os
import tempfile

import resnorm_jax
from resnorm_jax.runs import record_files

GOLDEN = os.path.join(resnorm_jax.ROOT, "tests", "data", "golden_losses.json")


XLA_FLAGS = "--xla_backend_optimization_level=0"  # what the file is recorded and checked with


KEYS = ("train/loss", "eval/loss", "eval/final_loss", "grad_norm")


# Extra points: (label, config spec, overrides) with the model settings that are not defaults.
EXTRA = (
  ("postnorm_96L:smoke+remat", "configs/postnorm_96L.py:smoke", {"model.remat": "full"}),
  ("prenorm_96L:smoke+unroll", "configs/prenorm_96L.py:smoke", {"model.scan_unroll": 2}),
  ("prenorm_96L:smoke+bf16", "configs/prenorm_96L.py:smoke", {"model.dtype": "bfloat16"}),
  ("smoke+muon", "configs/smoke.py", {"opt.name": "muon"}),
  ("smoke+adam_atan2", "configs/smoke.py", {"opt.name": "adam_atan2"}),
  (
    "nanogpt_char:2",
    "configs/nanogpt_char.py:2",
    {
      "train.steps": 6,
      "train.log_every": 3,
      "train.eval_every": 3,
      "train.checkpoint_every": 3,
      "train.eval_batches": 1,
      "train.final_eval_tokens": 1024,
      "opt.warmup_steps": 2,
    },
  ),
)


def points() -> list[tuple[str, str, dict]]:
  """(label, config spec, overrides) of every named config at smoke scale, then EXTRA."""
  out = [("smoke", "configs/smoke.py", {})]
  for path in sorted(glob.glob(os.path.join(resnorm_jax.ROOT, "configs", "*.py"))):
    name = os.path.basename(path)[:-3]
    if name in ("base", "smoke", "nanogpt_char", "__init__"):
      continue
    out.append((f"{name}:smoke", f"configs/{name}.py:smoke", {}))
  return out + list(EXTRA)


def set_key(config, dotted: str, value) -> None:
  *parents, leaf = dotted.split(".")
  node = config
  for p in parents:
    node = node[p]
  node[leaf] = value


def losses(spec: str, overrides: dict) -> dict:
  """Every logged loss of one short run, by step, plus the summary's final losses."""
  from resnorm_jax.config import cli
  from resnorm_jax.train import loop

  config = cli.load_config_file(spec)
  config.diag.depth_images = "none"  # figures only: no loss depends on them
  for key, value in overrides.items():
    set_key(config, key, value)
  with tempfile.TemporaryDirectory() as workdir:
    summary = loop.run(config, workdir)
    rows = [json.loads(line) for line in open(os.path.join(workdir, record_files.METRICS))]
  out = {str(r["step"]): {k: r[k] for k in KEYS if k in r} for r in rows}
  out["summary"] = {
    k: summary[k] for k in ("final_train_loss", "final_eval_loss", "best_eval_loss", "steps")
  }
  return out
