"""Xiong 2020 at CPU scale: does warmup rescue Post-LN at 12 and 24 layers?

Post-LN (configs/postnorm_96L.py) at 12 and 24 layers x warmup {0, 200, 1000, 2000} linear
steps x schedule {constant, inverse_sqrt} x peak lr {1e-3, 5e-4} (Xiong's two): 32 runs.
Every run trains STEPS_AFTER_WARMUP steps past its warmup, so a long warmup is not cut off at
its peak (1000 to 3000 steps); 7,200 steps per (depth, schedule, lr).

  python scripts/sweep.py --grid=configs/sweeps/xiong_warmup.py
  python scripts/sweep.py --grid=configs/sweeps/xiong_warmup.py --filter='L12-'   # 12 only
  python scripts/plot_curves.py 'runs/sweeps/xiong_warmup/postnorm-L12-*-lr0.001' --out=a.png

Cost on 2 cores (~0.5 s/step at 12 layers, ~1 s/step at 24): ~4 h for the 12-layer half,
~8 h for the 24-layer half; run the 12-layer half first.
Expected (Xiong): no warmup -> stuck at the unigram entropy; with warmup (and the lower lr)
-> trained; inverse_sqrt after warmup as in the paper. At 24 layers: open (see REFERENCE).
"""

STEPS_AFTER_WARMUP = 1000
DEPTHS = (12, 24)
LRS = (1e-3, 5e-4)
SCHEDULES = ("constant", "inverse_sqrt")
WARMUPS = (0, 200, 1000, 2000)

GRID = [
  {
    "name": f"postnorm-L{n}-{schedule}-w{warmup}-lr{lr:g}",
    "config": "configs/postnorm_96L.py",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": lr,
      "opt.schedule": schedule,
      "opt.warmup_steps": warmup,
      "train.steps": warmup + STEPS_AFTER_WARMUP,
      "train.remat": "none",  # what base.experiment picks at <= 24 layers (speed only)
      "train.eval_every": 100,
      "train.checkpoint_every": 250,
    },
  }
  for n in DEPTHS
  for lr in LRS
  for schedule in SCHEDULES
  for warmup in WARMUPS
]
