"""Escape probabilities at the edges: many seeds per cell, one protocol (docs/survival/).

The escape from the plateau is a rare event (a 24-layer Post-LN run at lr 2.5e-4 escaped at step
1,250 while its siblings never did by step 3,000), so a cell's answer is a probability with an
interval and a survival curve of escape times, not one seed's verdict.

The protocol, the same for every cell: no warmup, constant lr, batch 16 x 128, an eval every 25
steps on the periodic eval set (train.eval_batches 4: 8,192 held-out tokens), 1,500 steps.
A run that has not escaped by then is extended to 3,000 steps in the same folder (constant lr
and batches that are a function of (seed, step) make the first 1,500 steps of a 3,000-step run
those of the 1,500-step one): `EXTEND=1` in the environment gives the 3,000-step grid.

Cells, cheapest first (the first two decide the 12-layer edge):
  Post-LN 12 layers at lr 5e-4 and 1e-3; Post-LN 24 layers at 1.25e-4 and 2.5e-4;
  DeepNorm 24 layers at 4e-3. Seeds 0-11 (more with SEEDS=N).
Points are ordered seed-major, so a sweep stopped part-way leaves every cell with the same
seeds (SEEDS_DESCENDING=1 runs a second sweep from the last seed down):

  python scripts/sweep.py --grid=configs/sweeps/survival.py --jobs=auto \
      --sweep_dir=docs/survival/runs --filter='-L12-'
  python scripts/survival.py   # runs.csv, cells.csv, survival.png

Cost on one pinned core: ~6 min per 12-layer point (1,500 steps), ~14 at 24 layers.
"""

import os

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

CELLS = (
  ("postnorm", 12, 5e-4),
  ("postnorm", 12, 1e-3),
  ("postnorm", 24, 1.25e-4),
  ("postnorm", 24, 2.5e-4),
  ("deepnorm", 24, 4e-3),
)
SEEDS = tuple(range(int(os.environ.get("SEEDS", "12"))))
# A second sweep on the same folder from the other end (SEEDS_DESCENDING=1): the two meet in
# the middle; a point one of them holds is skipped or waited for by the other.
if os.environ.get("SEEDS_DESCENDING"):
  SEEDS = SEEDS[::-1]
STEPS = 3000 if os.environ.get("EXTEND") else 1500
EVAL_EVERY = 25
EVAL_BATCHES = 4


def _point(variant: str, n: int, lr: float, seed: int) -> dict:
  return constant_lr_point(
    f"{variant}-L{n}-lr{lr:g}-s{seed}",
    f"configs/{variant}_96L.py",
    n,
    lr,
    seed,
    STEPS,
    eval_every=EVAL_EVERY,
    **{"train.eval_batches": EVAL_BATCHES, "train.checkpoint_every": 250, "model.remat": "none"},
  )


GRID = [_point(v, n, lr, s) for s in SEEDS for (v, n, lr) in CELLS]
