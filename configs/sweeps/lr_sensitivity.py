"""Loss against learning rate over depth (Wortsman et al. 2023's method; docs/lr_sensitivity/).

Each variant's configs/<variant>_96L.py at N layers with the CPU-scale settings (batch 16 x 128,
Adam b2 0.98), constant lr from a grid in factors of 2 from 1.25e-4 to 3.2e-2, no warmup,
1,000 steps, an eval every 50 steps (the escape step's resolution). Each point's final eval loss
is one dot of a loss-vs-lr curve; a curve per variant, a panel per depth.

Points are ordered by priority (seed 0 of the three main variants first, cheap depths first),
and names carry every axis, so a filter picks a slice:

  python scripts/sweep.py --grid=configs/sweeps/lr_sensitivity.py --jobs=auto \
      --sweep_dir=docs/lr_sensitivity/runs --filter='-L(6|12)-.*-s0$'
  python scripts/lr_sensitivity.py   # results.csv, sensitivity.csv, curves.png

Constant lr and no warmup make a run's first K steps those of any longer run of the same point
(batches are a function of seed and step), so a 1,000-step point extended to 3,000 steps is the
budget test of the same cell (configs/sweeps/budget.py).

Cost on one pinned core per 1,000 steps: ~2 min at 6 layers, 4 at 12, 9 at 24, 17 at 48.
"""

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

MAIN = ("postnorm", "prenorm", "deepnorm")
MORE = ("sandwich", "dyt", "subln", "hyperconn")
DEPTHS = (6, 12, 24, 48)
LRS = tuple(1.25e-4 * 2**k for k in range(9))  # 1.25e-4 ... 3.2e-2
# The order points run in within a depth: from the middle of the range outwards, each lr for
# every variant before the next, so a sweep stopped part-way leaves every curve a contiguous
# stretch around the lrs that decide claims (Post-LN's boundary, Pre-LN's best), not whole
# curves for some variants and none for others.
RUN_ORDER = (1e-3, 5e-4, 2e-3, 2.5e-4, 4e-3, 1.25e-4, 8e-3, 1.6e-2, 3.2e-2)
assert sorted(RUN_ORDER) == sorted(LRS)
SEEDS = (0, 1, 2)
STEPS = 1000


def _point(variant: str, n: int, lr: float, seed: int) -> dict:
  return constant_lr_point(
    f"{variant}-L{n}-lr{lr:g}-s{seed}", f"configs/{variant}_96L.py", n, lr, seed, STEPS
  )


# The left edge: below the grid's smallest lr, where deep Post-LN is still falling at 1.25e-4
# (48 layers), seed 0:  --filter='^postnorm-L(24|48)-lr(6.25e-05|3.125e-05)-s0$'
LEFT_EDGE_LRS = (6.25e-5, 3.125e-5)

GRID = [
  _point(v, n, lr, s)
  for s in SEEDS
  for variants in (MAIN, MORE)
  for n in DEPTHS
  for lr in RUN_ORDER
  for v in variants
] + [_point("postnorm", n, lr, 0) for n in (24, 48) for lr in LEFT_EDGE_LRS]
