"""Stability map: every variant at 6, 24 and 96 layers (and 12 and 1000 for Post-LN, Pre-LN
and DeepNorm) under one fixed setting: Adam lr 1e-3, b2 0.98, no warmup, constant schedule.

Each point is the variant's configs/<variant>_96L.py at N layers with the CPU-scale training
settings base.experiment gives N layers (200 steps, batch 16 x 128; 150 steps of 8 x 64 at
1000 layers), so a cell differs from its neighbours only by variant and depth: 57 runs (39
before the six post-DeepNet variants were added; the sweep skips finished points).

  python scripts/sweep.py --grid=configs/sweeps/stability_map.py
  python scripts/plot_curves.py --stability_map=runs/sweeps/stability_map/results.csv

Cost on 2 cores (measured, one run at a time): ~1 min per 6- or 12-layer run, ~2.5 min at
24, 7-8.5 min at 96 (~2.2 h for the 36 runs below 1000 layers), plus ~20-25 min per
1000-layer run. Points run depth by depth, so a
stopped sweep has whole columns of the map.
"""

from configs import base

VARIANTS = (
  "postnorm",
  "prenorm",
  "deepnorm",
  "rmsnorm_prenorm",
  "sandwich",
  "rezero",
  "layerscale",
  "dyt",
  "parallel",
  "batchnorm",
  "noresidual",
  # The post-DeepNet variants (docs/variants.md).
  "subln",
  "admin",
  "mixln",
  "lnscale",
  "hyperconn",
  "ngpt",
)
DEPTHS = (6, 24, 96)
HEADLINE = ("postnorm", "prenorm", "deepnorm")
# More depths for the three headline variants: 12 (where Post-LN stops training here) and
# 1000 (where DeepNorm is meant to reach).
EXTRA = {12: HEADLINE, 1000: HEADLINE}
SETTING = {"opt.lr": 1e-3, "opt.warmup_steps": 0, "opt.schedule": "constant"}
TRAIN_KEYS = (
  "steps",
  "batch_size",
  "seq_len",
  "log_every",
  "eval_every",
  "eval_batches",
  "checkpoint_every",
)


def _point(variant: str, n: int) -> dict:
  """configs/<variant>_96L.py at n layers with base.experiment's CPU training settings."""
  experiment = base.experiment("scale", n)
  train = experiment.train
  return {
    "name": f"{variant}-L{n}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      "model.num_layers": n,
      **SETTING,
      **{f"train.{k}": train[k] for k in TRAIN_KEYS},
      "model.remat": experiment.model.remat,
    },
  }


GRID = [_point(v, n) for n in DEPTHS for v in VARIANTS]
GRID += [_point(v, n) for n, variants in EXTRA.items() for v in variants]
