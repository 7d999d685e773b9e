"""Records or checks the exact losses of every named config at smoke scale (a refactor guard).

  python scripts/golden_losses.py --write   # record tests/data/golden_losses.json
  python scripts/golden_losses.py --write ngpt_96L:smoke   # add or re-record one entry
  python scripts/golden_losses.py           # train again, exit 1 on any difference

Each config trains through `loop.run` (6 steps, 2 layers, width 32) on CPU; every logged
train, eval and final-eval loss and gradient norm is compared bit for bit. A few extra
points cover the model settings (remat, scan unroll, bfloat16). Losses are
those of this CPU build of XLA: on another machine record your own first. The script runs
under the XLA_FLAGS constant below, as the file was recorded: one CPU device, and LLVM without its
optimizations, which compiles each point in about a third of the time (postnorm_96L:smoke's
and prenorm_96L:smoke's values sit up to 3.3 and 5 float32 ulps from those of the default
flags).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GOLDEN = os.path.join(ROOT, "tests", "data", "golden_losses.json")
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
  for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.py"))):
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
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
  out = {str(r["step"]): {k: r[k] for k in KEYS if k in r} for r in rows}
  out["summary"] = {
    k: summary[k] for k in ("final_train_loss", "final_eval_loss", "best_eval_loss", "steps")
  }
  return out


def main(argv: list[str]) -> int:
  os.environ["XLA_FLAGS"] = XLA_FLAGS  # before JAX is imported (losses() imports it)
  write = "--write" in argv
  only = [a for a in argv if not a.startswith("--")]
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  results = {}
  for label, spec, overrides in points():
    if only and label not in only:
      continue
    results[label] = losses(spec, overrides)
  if write:  # with names: those entries are added or replaced, the others kept
    from resnorm_jax.config import cli

    kept = json.load(open(GOLDEN)) if only and os.path.exists(GOLDEN) else {}
    cli.write_json(GOLDEN, {**kept, **results})
    print(f"wrote {len(results)} configs to {GOLDEN}")
    return 0
  golden = json.load(open(GOLDEN))
  bad = [label for label in results if results[label] != golden.get(label)]
  for label in bad:
    print(f"DIFFERENT {label}:\n  now    {results[label]}\n  golden {golden.get(label)}")
  print(f"{len(results) - len(bad)}/{len(results)} configs bit-identical to {GOLDEN}")
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
