"""Xiong 2020 at CPU scale: which warmup rescues Post-LN at 12 and 24 layers?

Post-LN (configs/postnorm_96L.py) at 12 and 24 layers x peak lr {5e-4, 1e-3} (Xiong's two)
x linear warmup {0, 200, 1000} steps, then the paper's inverse-square-root decay
(lr * sqrt(W / (s + 1)); without warmup W = 1, the paper's "no warmup"): 12 runs. Every run
trains STEPS_AFTER_WARMUP steps past its warmup, so a long warmup is not cut off at its peak.
The constant-lr, no-warmup points are the stability map's (configs/sweeps/stability_map.py).

Points are ordered most informative first (24 layers, lr 5e-4), so a stopped sweep has
answered the main question:

  python scripts/sweep.py --grid=configs/sweeps/xiong_warmup.py
  python scripts/sweep.py --grid=configs/sweeps/xiong_warmup.py --filter='L12-'   # 12 only
  python scripts/plot_curves.py 'runs/sweeps/xiong_warmup/postnorm-L24-*' --out=a.png

Cost on 2 cores after the speed-ups of docs/benchmarks.md: ~0.1 s/step at 12 layers and
~0.2 s/step at 24, i.e. ~1 h for all 12 runs (16,800 steps).
Expected (Xiong): no warmup -> stuck at the unigram entropy; a long warmup at the lower lr
-> trained.
"""

STEPS_AFTER_WARMUP = 1000
DEPTHS = (24, 12)
LRS = (5e-4, 1e-3)
WARMUPS = (1000, 0, 200)
SCHEDULE = "inverse_sqrt"

GRID = [
  {
    "name": f"postnorm-L{n}-{SCHEDULE}-w{warmup}-lr{lr:g}",
    "config": "configs/postnorm_96L.py",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": lr,
      "opt.schedule": SCHEDULE,
      "opt.warmup_steps": warmup,
      "train.steps": warmup + STEPS_AFTER_WARMUP,
      "train.remat": "none",  # what base.experiment picks at <= 24 layers (speed only)
      "train.eval_every": 100,
      "train.checkpoint_every": 250,
    },
  }
  for n in DEPTHS
  for lr in LRS
  for warmup in WARMUPS
]
