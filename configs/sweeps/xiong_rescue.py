"""Xiong 2020's warmup rescue on two corpora: when does warmup decide whether Post-LN trains?

Post-LN at 12 layers (configs/xiong_rescue.py), 1,500 steps of 16 x 128 bytes, Adam b2 0.98,
on the embedded stdlib source and on tiny Shakespeare (data/tinyshakespeare.txt):

- core (seeds 0, 1, 2): constant lr 1e-3 after 0, 200 or 1,000 linear warmup steps;
- lr: constant 5e-4 without warmup (does a lower lr alone train?), 2e-3 with 0 and 1,000;
- schedule: the paper's inverse square root (lr * sqrt(W / (s + 1))) at lr 1e-3, warmup 0
  and 1,000 (without warmup it decays the lr from the first step: a rescue by decay);
- depth: 24 layers at constant lr 1e-3 and 2.5e-4, warmup 0 and 1,000.

  python scripts/sweep.py --grid=configs/sweeps/xiong_rescue.py --jobs=auto \
      --sweep_dir=docs/xiong_rescue/runs

Cost: ~6 min per 12-layer point on one pinned core, ~14 at 24 layers; 36 points.
"""

CORPORA = {
  "stdlib": {"data.source": "stdlib", "data.path": ""},
  "shakespeare": {"data.source": "text", "data.path": "data/tinyshakespeare.txt"},
}


def _point(corpus: str, lr: float, warmup: int, schedule="constant", seed=0, layers=12) -> dict:
  return {
    "name": f"{corpus}-L{layers}-{schedule}-lr{lr:g}-w{warmup}-s{seed}",
    "config": "configs/xiong_rescue.py",
    "overrides": {
      **CORPORA[corpus],
      "model.num_layers": layers,
      "opt.lr": lr,
      "opt.warmup_steps": warmup,
      "opt.schedule": schedule,
      "train.steps": 1500,
      "seed": seed,
    },
  }


CORE = [_point(c, 1e-3, w, seed=s) for s in (0, 1, 2) for c in CORPORA for w in (0, 200, 1000)]
LR = [_point(c, lr, w) for c in CORPORA for lr, w in ((5e-4, 0), (2e-3, 0), (2e-3, 1000))]
SCHEDULE = [_point(c, 1e-3, w, "inverse_sqrt") for c in CORPORA for w in (0, 1000)]
DEPTH = [_point(c, 1e-3, w, layers=24) for c in CORPORA for w in (0, 1000)]
# At 24 layers 1,000 warmup steps do not rescue lr 1e-3 (stdlib, seed 0;
# docs/xiong_rescue/runs/results.csv): a lower peak lr.
DEPTH_LR = [_point(c, 2.5e-4, w, layers=24) for c in CORPORA for w in (0, 1000)]
GRID = CORE + LR + SCHEDULE + DEPTH + DEPTH_LR
