"""At Post-LN's edge, is a run's fate set by its initialization or by its data order?
(docs/early_warning, "Init or data order"): a factorial of init seeds (`seed`) x data seeds
(`data.seed`) in one cell on the survival protocol (configs/sweeps/survival.py: no warmup,
constant lr, 1,500 steps, an eval every 25 on 8,192 tokens).

The cell: Post-LN at 12 layers, lr 7e-4, between 5e-4 (11/12 seeds kept their escape,
docs/survival) and 1e-3 (0/12), where the odds should be near one half; 12-layer points are
3-4x cheaper than the 24-layer edge cells. The diagonal (data seed = init seed: the runs
`seed` alone would give) runs first, so a stopped sweep has told the cell's odds; then the
other 12 points, init-seed-major. INIT_SEEDS / DATA_SEEDS=N (default 4) widen it (8 x 8).
REVERSE=1 gives the points from the other end: a second sweep on the same folder (another
core) meets the first in the middle; a point one holds is skipped or waited for by the other.

  python scripts/sweep.py --grid=configs/sweeps/init_or_data.py --jobs=auto \
      --sweep_dir=docs/early_warning/init_or_data

Cost on one pinned core of a 2-core CPU: ~6-7 min a point (the 12-layer survival points'),
so the 16 points are ~1.8 core-hours.
"""

import os

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

LR = 7e-4
NUM_LAYERS = 12
INIT_SEEDS = tuple(range(int(os.environ.get("INIT_SEEDS", "4"))))
DATA_SEEDS = tuple(range(int(os.environ.get("DATA_SEEDS", "4"))))


def _point(init: int, data: int) -> dict:
  return constant_lr_point(
    f"postnorm-L{NUM_LAYERS}-lr{LR:g}-i{init}-d{data}",
    "configs/postnorm_96L.py",
    NUM_LAYERS,
    LR,
    init,
    1500,
    eval_every=25,
    **{
      "train.eval_batches": 4,
      "train.checkpoint_every": 250,
      "model.remat": "none",
      "data.seed": data,
    },
  )


PAIRS = [(i, i) for i in INIT_SEEDS if i in DATA_SEEDS]
PAIRS += [(i, d) for i in INIT_SEEDS for d in DATA_SEEDS if (i, d) not in PAIRS]
if os.environ.get("REVERSE"):
  PAIRS = PAIRS[::-1]
GRID = [_point(i, d) for i, d in PAIRS]
