"""Xiong 2020 at CPU scale: which warmup rescues Post-LN at 12 and 24 layers?

Post-LN (configs/postnorm_96L.py) at 12 and 24 layers x peak lr {5e-4, 1e-3} (Xiong's two)
x linear warmup {0, 200, 1000} steps, then the paper's inverse-square-root decay
(lr * sqrt(W / (s + 1)); without warmup W = 1, the paper's "no warmup"): 12 runs; and, to
separate warmup from decay, constant lr 1e-3 after 0 or 200 warmup steps at 12 and 24
layers (1,200 steps each): 4 runs; and two 24-layer runs at lr 1e-4 (BERT-large's peak lr,
after lr 5e-4 with 1,000 warmup steps stayed stuck), with and without warmup; and at 6
layers and lr 3e-3, Post-LN without and with warmup and Pre-LN without: 21 runs. Every run
trains STEPS_AFTER_WARMUP steps past its warmup, so a long warmup is not cut off at its peak.
The constant lr 1e-3, no-warmup points are the stability map's setting run longer.

Points are ordered most informative first (24 layers, lr 5e-4), so a stopped sweep has
answered the main question:

  python scripts/sweep.py --grid=configs/sweeps/xiong_warmup.py
  python scripts/sweep.py --grid=configs/sweeps/xiong_warmup.py --filter='L12-'   # 12 only
  python scripts/plot_curves.py 'runs/sweeps/xiong_warmup/postnorm-L24-*' --out=a.png

Cost on 2 cores (measured): ~0.27 s/step at 12 layers and ~0.55 s/step at 24, i.e. about
4.5 h for all 21 runs (28,400 steps); docs/results.md says which points were run.
Expected (Xiong): no warmup -> stuck at the unigram entropy; a long warmup at the lower lr
-> trained.
"""

STEPS_AFTER_WARMUP = 1000
DEPTHS = (24, 12)
LRS = (5e-4, 1e-3)
WARMUPS = (1000, 0, 200)
SCHEDULE = "inverse_sqrt"
CONSTANT_WARMUP = 200


def _point(n: int, lr: float, schedule: str, warmup: int, variant: str = "postnorm") -> dict:
  return {
    "name": f"{variant}-L{n}-{schedule}-w{warmup}-lr{lr:g}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": lr,
      "opt.schedule": schedule,
      "opt.warmup_steps": warmup,
      "train.steps": STEPS_AFTER_WARMUP + (warmup if schedule == SCHEDULE else CONSTANT_WARMUP),
      "model.remat": "none",  # what base.experiment picks at <= 24 layers (speed only)
      "train.eval_every": 100,
      "train.checkpoint_every": 250,
    },
  }


GRID = [_point(n, lr, SCHEDULE, w) for n in DEPTHS for lr in LRS for w in WARMUPS]
# Warmup alone, without the decay: constant lr 1e-3 after 0 or 200 warmup steps, both run
# for the same 1,200 steps (the no-warmup run is the stability map's setting, run longer).
GRID += [_point(n, 1e-3, "constant", w) for n in (12, 24) for w in (0, CONSTANT_WARMUP)]
# Added after the 24-layer lr 5e-4 run stayed stuck (docs/results.md): a 5x lower peak lr,
# and its control without warmup (constant lr 1e-4, 1,200 steps).
GRID += [_point(24, 1e-4, SCHEDULE, 1000), _point(24, 1e-4, "constant", 0)]
# 6 layers, where Post-LN still trains at lr 1e-3 without warmup (stability map): at 3x that
# lr, Post-LN without and with 200 warmup steps, and Pre-LN without (constant lr, 1,200 steps).
GRID += [_point(6, 3e-3, "constant", w) for w in (0, CONSTANT_WARMUP)]
GRID += [_point(6, 3e-3, "constant", 0, variant="prenorm")]
