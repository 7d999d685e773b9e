"""The mechanism, as DeepNet's Fig. 4-5 show it: per-layer diagnostics over training for
24-layer Post-LN, DeepNorm and Pre-LN at one lr (1e-3: Post-LN stays on the plateau there,
DeepNorm and Pre-LN leave it within 200 steps), on the loss-vs-lr grid's protocol (no warmup,
constant lr, batch 16 x 128, stdlib, seed 0) with `diag.per_layer` on and a record every 5
steps: the model update per step, the LayerNorm input RMS per layer, and every layer's
gradient norm (metrics.jsonl).

  python scripts/sweep.py --grid=configs/sweeps/mechanism.py --jobs=auto \
      --sweep_dir=docs/mechanism/runs
  python scripts/mechanism.py   # docs/mechanism/mechanism.png, mechanism.csv

Cost on one pinned core: ~5 min per point (500 steps at 24 layers with per-layer diagnostics).
"""

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

VARIANTS = ("postnorm", "deepnorm", "prenorm")
LAYERS = 24
LR = 1e-3
STEPS = 500

GRID = [
  constant_lr_point(
    f"{v}-L{LAYERS}-lr{LR:g}-s0",
    f"configs/{v}_96L.py",
    LAYERS,
    LR,
    0,
    STEPS,
    eval_every=25,
    **{"diag.per_layer": True, "train.log_every": 5, "train.eval_batches": 4},
  )
  for v in VARIANTS
]
