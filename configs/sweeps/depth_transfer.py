"""Does the best lr transfer across depth? Loss against lr under depth parametrizations.

The loss-vs-lr grid's settings (configs/sweeps/lr_sensitivity.py: CPU scale, batch 16 x 128,
Adam b2 0.98, constant lr, no warmup, 1,000 steps, an eval every 50) with model.depth_param
(resnorm_jax/model/depth_param.py) against model.base_depth=6: Pre-LN under CompleteP and
depth-muP, Post-LN and DeepNorm under CompleteP, at 12 and 24 layers (48 last), 7 lrs from
2.5e-4 to 1.6e-2. At 6 layers (the base depth) every parametrization is sp's run bit for bit
(tests/test_depth_param.py), so the 6-layer points and every sp point are the committed
docs/lr_sensitivity/ runs: not repeated here.

  python scripts/sweep.py --grid=configs/sweeps/depth_transfer.py --jobs=auto \
      --sweep_dir=docs/depth_transfer/runs --filter='^prenorm-completep-L12-'

Priority: seed 0 of Pre-LN under CompleteP first (the transfer claim), then depth-muP, then
Post-LN and DeepNorm under CompleteP (does the parametrization move Post-LN's edge?), then
48 layers. Seeds 1 and 2 of Pre-LN at each parametrization's best grid lr at 12 and 24
layers (SEED_LR: 4e-3 under CompleteP, as sp's, whose seeds 0-2 there are committed; 8e-3
under depth-muP) measure the seed spread the contrast sits in:
  ... --filter='^prenorm-(completep|depth_mup)-L(12|24)-lr[0-9.]*-s[12]$'
Post-LN under CompleteP has seeds 1 and 2 at 2e-3 and 12 layers (POSTNORM_SEED_LR).

Cost on one pinned core per 1,000 steps (measured for lr_sensitivity, the same shape; the
branch multiplier adds one elementwise product per sub-layer): ~4 min at 12 layers, 9 at 24,
17 at 48. Seed 0 at 12 and 24 layers: 4 curves x 7 lrs x 13 min = 6.1 core-hours; 48 layers
adds 4 x 7 x 17 min = 7.9 core-hours.
"""

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

CURVES = (("prenorm", "completep"), ("prenorm", "depth_mup"))
CURVES += (("postnorm", "completep"), ("deepnorm", "completep"))
BASE_DEPTH = 6
DEPTHS = (12, 24)
LATE_DEPTHS = (48,)
LRS = tuple(2.5e-4 * 2**k for k in range(7))  # 2.5e-4 ... 1.6e-2
# From the middle of the range outwards (as lr_sensitivity.py): a sweep stopped part-way
# leaves every curve a contiguous stretch around its best lr.
RUN_ORDER = (2e-3, 1e-3, 4e-3, 5e-4, 8e-3, 2.5e-4, 1.6e-2)
assert sorted(RUN_ORDER) == sorted(LRS)
STEPS = 1000


def _point(variant: str, param: str, n: int, lr: float, seed: int) -> dict:
  return constant_lr_point(
    f"{variant}-{param}-L{n}-lr{lr:g}-s{seed}",
    f"configs/{variant}_96L.py",
    n,
    lr,
    seed,
    STEPS,
    **{"model.depth_param": param, "model.base_depth": BASE_DEPTH},
  )


SEED_LR = {"completep": 4e-3, "depth_mup": 8e-3}  # the best grid lr at 12 and 24 layers
SEEDS = (1, 2)
GRID = [
  _point(v, p, n, lr, 0)
  for depths in (DEPTHS, LATE_DEPTHS)
  for v, p in CURVES
  for n in depths
  for lr in RUN_ORDER
] + [_point("prenorm", p, n, lr, s) for p, lr in SEED_LR.items() for n in DEPTHS for s in SEEDS]
# Post-LN under CompleteP trains at 12 layers at 2e-3, where sp's Post-LN is stuck: the
# seeds there tell a moved edge from one lucky draw.
POSTNORM_SEED_LR = 2e-3
GRID += [_point("postnorm", "completep", 12, POSTNORM_SEED_LR, s) for s in SEEDS]
# The CompleteP-minus-sp contrast needs seeds at every lr of both curves around the best, or
# the argmin moves with where seeds were run: seeds 1-2 at 2e-3 and 8e-3 at 24 layers (4e-3's
# are above) and at 4e-3 at 48 layers, under CompleteP here; sp's same seeds are the loss-vs-lr
# grid's (configs/sweeps/lr_sensitivity.py, --filter='^prenorm-L(24-lr0.00[28]|48-lr0.004)-s[12]$').
CONTRAST_SEEDS = {24: (2e-3, 8e-3), 48: (4e-3,)}
GRID += [
  _point("prenorm", "completep", n, lr, s)
  for n, lrs in CONTRAST_SEEDS.items()
  for lr in lrs
  for s in SEEDS
]
