"""The stability boundary: the largest peak lr at which each variant trains, per depth.

Each variant's configs/<variant>_96L.py at N layers with the CPU-scale settings base.experiment
gives N layers, 300 steps (batch 16 x 128), Adam b2 0.98, constant lr from a grid in factors
of 2 from 1.25e-4 to 8e-3, without warmup and with 100 warmup steps. A point is "trained" when
its end-of-run eval loss is 0.1 nats or more below the held-out unigram cross-entropy
(resnorm_jax/runs/outcome.py); the boundary at a depth is the largest lr that trains.

  python scripts/sweep.py --grid=configs/sweeps/stability_boundary.py --jobs=auto \
      --sweep_dir=docs/stability_boundary/runs [--filter='-L(6|12|24|48)-']
  python scripts/plot_curves.py --boundary=docs/stability_boundary/results.csv

Cost on one pinned core: ~0.5 min per 6-layer point, 1 at 12, 2 at 24, 4 at 48, 8-10 at
96 (the full grid is 13 x 5 x 7 x 2 = 910 points, 490 of them the first seven variants'; the
sweep skips finished ones, so it can be run in parts; docs/results.md says which were run).
"""

VARIANTS = (
  "postnorm",
  "prenorm",
  "deepnorm",
  "sandwich",
  "rezero",
  "dyt",
  "rmsnorm_prenorm",
  # The post-DeepNet variants (docs/variants.md), appended so earlier points keep
  # their order.
  "subln",
  "admin",
  "mixln",
  "lnscale",
  "hyperconn",
  "ngpt",
)
DEPTHS = (6, 12, 24, 48, 96)
LRS = tuple(1.25e-4 * 2**k for k in range(7))  # 1.25e-4 ... 8e-3
WARMUPS = (0, 100)
STEPS = 300


def _point(variant: str, n: int, lr: float, warmup: int) -> dict:
  return {
    "name": f"{variant}-L{n}-lr{lr:g}-w{warmup}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": lr,
      "opt.warmup_steps": warmup,
      "opt.schedule": "constant",
      "train.steps": STEPS,
      "model.remat": "none" if n <= 24 else "full",  # speed and memory only
      "diag.per_layer": False,
    },
  }


GRID = [_point(v, n, lr, w) for w in WARMUPS for n in DEPTHS for v in VARIANTS for lr in LRS]
