"""One step toward scale: the depth contrasts at 4x the width, on BPE tokens.

Every named config's `:wide` scale (configs/base.py): d_model 256, 4 heads, FFN 1024, batch
32 x 256 tokens of the stdlib corpus in a 4,096-id BPE (data/prepared/stdlib_bpe4096), Adam
b2 0.98, 2,000 steps, an eval every 50 (the escape step's resolution).

- Post-LN, Pre-LN and DeepNorm at 12 and 24 layers, no warmup, constant lr 2.5e-4, 5e-4 and
  1e-3, seed 0;
- Xiong's rescue at 12 layers: Post-LN at lr 1e-3 (where it stayed on the plateau at this
  width, on bytes, without warmup) after 1,000 linear warmup steps. Its no-warmup control is
  the grid's postnorm-L12-const-lr0.001-w0-s0 (the same run: names carry every axis). 1,000
  steps is configs/xiong_rescue.py's convention: 200 rescued this model on the stdlib corpus
  but not on English prose (docs/xiong_rescue/).

Points are in priority order (24 layers first, each lr from the middle of the range outwards
for every variant before the next, Post-LN vs Pre-LN at the middle lr first):

  python -m experiments.prepare_data --input=stdlib --tokenizer=train:4096 \
      --val_fraction=0.1 --out=data/prepared/stdlib_bpe4096        # once: the corpus
  python scripts/sweep.py --grid=configs/sweeps/width_step.py --jobs=auto \
      --sweep_dir=docs/width_step/runs --filter='-L24-'

Expected cost (an estimate from the step's FLOPs, not yet measured: docs/width_step/README.md
says how to measure it): 1.13 TFLOP per step at 24 layers, 0.59 at 12, so at 50-100 GFLOP/s
on one pinned core 6-13 hours per 2,000-step run at 24 layers and 3-7 at 12: about 90-180
core-hours for the 19 points, several times the issue's first guess (15-25).
"""

VARIANTS = ("postnorm", "prenorm", "deepnorm")
DEPTHS = (24, 12)  # the decisive depth first
RUN_ORDER = (5e-4, 1e-3, 2.5e-4)  # from the middle of the lr range outwards
SEEDS = (0,)
STEPS = 2000
RESCUE_LR, RESCUE_WARMUP = 1e-3, 1000


def _point(variant: str, n: int, lr: float, seed: int = 0, warmup: int = 0) -> dict:
  return {
    "name": f"{variant}-L{n}-const-lr{lr:g}-w{warmup}-s{seed}",
    "config": f"configs/{variant}_96L.py:wide",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": lr,
      "opt.warmup_steps": warmup,
      "opt.schedule": "constant",
      "train.steps": STEPS,
      "seed": seed,
      # The scale decides remat by the config's 96 layers: decided again at n (speed only).
      "model.remat": "none" if n <= 24 else "full",
      "diag.per_layer": False,
    },
  }


MAIN = [_point(v, n, lr, s) for s in SEEDS for n in DEPTHS for lr in RUN_ORDER for v in VARIANTS]
RESCUE = [_point("postnorm", 12, RESCUE_LR, 0, warmup=RESCUE_WARMUP)]
GRID = MAIN + RESCUE
