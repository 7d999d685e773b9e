"""Loss against learning rate for the 2025-26 variants: HybridNorm, mHC, DenseFormer, value
residuals and Derf, at the loss-vs-lr grid's settings (configs/sweeps/lr_sensitivity.py: the
CPU scale, batch 16 x 128, Adam b2 0.98, constant lr, no warmup, 1,000 steps, an eval every
50), so each point lands beside the variants already in docs/lr_sensitivity/:

- 6 layers: each variant at the 9 lrs (1.25e-4 ... 3.2e-2), seed 0 (45 points);
- 24 layers: each at the 3 lrs around Pre-LN's best, 2e-3, 4e-3, 8e-3, seed 0 (15 points);
- 48 layers: mHC against hyper-connections at Pre-LN's 48-layer best lr (2e-3) and one above
  it (4e-3), seed 0 (4 points).

Points are in priority order (6 layers first, middle lrs first; names carry every axis):

  python scripts/sweep.py --grid=configs/sweeps/literature.py --jobs=auto \
      --sweep_dir=docs/lr_sensitivity/runs --filter='-L6-'
  python scripts/lr_sensitivity.py   # results.csv, sensitivity.csv, curves.png

Cost on one pinned core (docs/variants.md, "Depth and cost"): a 6-layer, 100-step run took
20 CPU-seconds for Pre-LN against 54 for mHC and 23-26 for the other four (compile included);
scaled by Pre-LN's ~2 min per 1,000-step point at 6 layers (9 at 24, 17 at 48), about 2.3 h
for the 6-layer points, 3.4 h at 24 layers and 2.3 h at 48: ~8 core-hours, a third of it mHC.
"""

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

VARIANTS = ("mhc", "hybridnorm", "valueres", "derf", "denseformer")
LRS = tuple(1.25e-4 * 2**k for k in range(9))  # 1.25e-4 ... 3.2e-2, as lr_sensitivity.py
# From the middle of the range outwards (lr_sensitivity.py's order): a sweep stopped part-way
# leaves every curve a contiguous stretch around the best lrs.
RUN_ORDER = (1e-3, 5e-4, 2e-3, 2.5e-4, 4e-3, 1.25e-4, 8e-3, 1.6e-2, 3.2e-2)
assert sorted(RUN_ORDER) == sorted(LRS)
LRS_24 = (2e-3, 4e-3, 8e-3)  # around Pre-LN's best at 24 layers
LRS_48 = (2e-3, 4e-3)  # Pre-LN's best at 48 layers and one above
STEPS = 1000
# The value-residual contrast over seeds: value residuals and Pre-LN at 24 layers and 4e-3 (both
# curves' best), seeds 1-4 (Pre-LN's seeds 1 and 2 are the loss-vs-lr grid's own runs, the same
# points by name and config, so they are not run twice):
#   ... --filter='^(valueres|prenorm)-L24-lr0.004-s[1-4]$'
SEED_CONTRAST = (("valueres", "prenorm"), 24, 4e-3, (1, 2, 3, 4))


def _point(variant: str, n: int, lr: float, seed: int = 0) -> dict:
  """lr_sensitivity.py's point, field for field (its name, config and overrides)."""
  return constant_lr_point(
    f"{variant}-L{n}-lr{lr:g}-s{seed}", f"configs/{variant}_96L.py", n, lr, seed, STEPS
  )


GRID = (
  [_point(v, 6, lr) for lr in RUN_ORDER for v in VARIANTS]
  + [_point(v, 24, lr) for lr in LRS_24 for v in VARIANTS]
  + [_point(v, 48, lr) for lr in LRS_48 for v in ("mhc", "hyperconn")]
  + [
    _point(v, SEED_CONTRAST[1], SEED_CONTRAST[2], s)
    for s in SEED_CONTRAST[3]
    for v in SEED_CONTRAST[0]
  ]
)
