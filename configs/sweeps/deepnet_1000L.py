"""DeepNet at 1000 layers as a contrast: Post-LN, Pre-LN and DeepNorm at one common setting,
lr separated from warmup, and the norm-parameter-drift hypothesis tested directly.

All at the CPU 1000-layer shape (d 64, 4 heads, FFN 256, batch 8 x 64, remat full), Adam b2
0.98, constant lr, 600 steps:

- common setting (DeepNorm's trained one, docs/runs/deepnorm_1000L_lr2e-4): lr 2e-4 after 50
  warmup steps, for Post-LN, Pre-LN and DeepNorm;
- lr x warmup for DeepNorm: lr {1e-3, 2e-4} x warmup {0, 200};
- DeepNorm at lr 1e-3 without warmup with its LayerNorm gains/biases and embeddings frozen
  (configs/deepnorm_frozen_96L.py): if the drift of the 4N norm parameters is what keeps it on
  the plateau, this run trains.

  python scripts/sweep.py --grid=configs/sweeps/deepnet_1000L.py --jobs=auto \
      --sweep_dir=docs/runs

(docs/runs/<point>/ keeps each run's config.json, summary.json and metrics.jsonl, the curve.)
DeepNorm's common-setting point ran before this grid existed, as docs/runs/deepnorm_1000L_lr2e-4
(same model, lr, warmup, steps and batch; its final eval used 1,024 tokens, not 16,384).

Cost: ~60 min per point on 2 CPU cores (6 s/step), more pinned to one core: 8 points are a
day of this CPU, minutes on a GPU (`--accelerator=gpu`).
"""

STEPS = 600


def _point(variant: str, lr: float, warmup: int) -> dict:
  return {
    "name": f"{variant}-L1000-lr{lr:g}-w{warmup}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      "model.num_layers": 1000,
      "opt.lr": lr,
      "opt.warmup_steps": warmup,
      "opt.schedule": "constant",
      "train.steps": STEPS,
      "train.batch_size": 8,
      "train.seq_len": 64,
      "model.remat": "full",
      "train.eval_every": 50,
      "train.checkpoint_every": 25,
      "diag.per_layer": False,
    },
  }


COMMON = [_point(v, 2e-4, 50) for v in ("postnorm", "prenorm", "deepnorm")]
LR_WARMUP = [_point("deepnorm", lr, w) for lr in (1e-3, 2e-4) for w in (0, 200)]
FROZEN = [_point("deepnorm_frozen", 1e-3, 0)]
GRID = COMMON + LR_WARMUP + FROZEN
