"""What fixes what, on the loss-vs-lr grid's protocol (configs/sweeps/lr_sensitivity.py: batch
16 x 128, Adam b2 0.98, constant lr, no warmup, 1,000 steps, an eval every 50 steps), each
point beside the committed run it changes one thing of (docs/lr_sensitivity/runs):

- Wortsman et al. 2023's interventions on Pre-LN's right side, where the loss rises late
  (lr 1.6e-2 and 3.2e-2, 24 layers): qk-norm (model.qk_norm) and the z-loss (train.z_loss
  1e-4, PaLM's weight);
- DeepNorm's two parts apart around its edge (lr 2e-3, 4e-3, 8e-3; 24 and 48 layers): the
  up-weighted skip alone (residual deepnorm, xavier init: `deepnorm-alpha`) and the small
  init alone (postnorm_deepinit: alpha 1, beta init).

  python scripts/sweep.py --grid=configs/sweeps/interventions.py --jobs=auto \
      --sweep_dir=docs/interventions/runs --filter='^prenorm'
  python scripts/lr_sensitivity.py --runs=docs/interventions/runs --out_dir=docs/interventions

Cost on one pinned core: ~9 min per 24-layer point, ~17 at 48 (the lr grid's).
"""

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

STEPS = 1000


def _point(name: str, config: str, n: int, lr: float, **overrides) -> dict:
  return constant_lr_point(
    f"{name}-L{n}-lr{lr:g}-s0", f"configs/{config}.py", n, lr, 0, STEPS, **overrides
  )


WORTSMAN = [
  p
  for lr in (1.6e-2, 3.2e-2)
  for p in (
    _point("prenorm-qknorm", "prenorm_96L", 24, lr, **{"model.qk_norm": True}),
    _point("prenorm-zloss", "prenorm_96L", 24, lr, **{"train.z_loss": 1e-4}),
  )
]
DEEPNORM_PARTS = [
  p
  for n in (24, 48)
  for lr in (4e-3, 8e-3, 2e-3)
  for p in (
    _point("deepnorm-alpha", "deepnorm_96L", n, lr, **{"model.init": "xavier"}),
    _point("postnorm_deepinit", "postnorm_deepinit_96L", n, lr),
  )
]
GRID = WORTSMAN + DEEPNORM_PARTS
