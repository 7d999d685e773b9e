"""Is the plateau permanent? The budget test: the plateau cells that carry claims, rerun with
at least 3x (no warmup) to 10x (the 300-step boundary) their budget, Pre-LN at the same lr as
the control that shows what the extra steps buy (docs/lr_sensitivity/budget.csv, budget.png).

- no warmup, constant lr (the stability boundary's setting): Post-LN and Pre-LN at 24 layers,
  lr 1.25e-4 ... 1e-3, 3,000 steps, 3 seeds; the same at 48 layers, seed 0;
- DeepNet's setting (200 warmup steps, inverse sqrt, lr 1e-3): Post-LN and Pre-LN at 18 and 24
  layers, 3,000 steps, 3 seeds;
- 12 layers, the cells where seeds split at 1,000 steps: Post-LN at lr 1e-3 (seeds 0, 1) and
  5e-4 (seed 1), no warmup, 3,000 steps (~12 min each);
- 1000 layers (the CPU 1000-layer shape of configs/sweeps/deepnet_1000L.py): DeepNorm and Pre-LN
  at lr 1e-3 without warmup, 1,500 steps, seed 0.

Points are in priority order (names carry every axis, so --filter picks a slice):

  python scripts/sweep.py --grid=configs/sweeps/budget.py --jobs=auto \
      --sweep_dir=docs/lr_sensitivity/budget/runs --filter='-L24-.*-s0$'
  python scripts/budget.py

Cost on one pinned core: ~25 min per 24-layer point, ~50 at 48, ~20 at 18, hours at 1000 layers
(minutes on a GPU: --accelerator=gpu).
"""

PAIR = ("postnorm", "prenorm")
LRS = (1.25e-4, 2.5e-4, 5e-4, 1e-3)
STEPS = 3000


def _point(variant: str, n: int, lr: float, seed: int, *, warmup: int, schedule: str) -> dict:
  tag = "const" if schedule == "constant" else "invsqrt"
  return {
    "name": f"{variant}-L{n}-{tag}-lr{lr:g}-w{warmup}-s{seed}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": lr,
      "opt.warmup_steps": warmup,
      "opt.schedule": schedule,
      "train.steps": STEPS,
      "train.eval_every": 50,
      "train.checkpoint_every": 250,
      "seed": seed,
      "model.remat": "none" if n <= 24 else "full",
      "diag.per_layer": False,
    },
  }


def _no_warmup(n: int, seed: int) -> list[dict]:
  return [_point(v, n, lr, seed, warmup=0, schedule="constant") for lr in LRS for v in PAIR]


def _split_12() -> list[dict]:
  """12-layer Post-LN where 1,000-step seeds split (docs/lr_sensitivity/results.csv): lr 1e-3
  escaped on seed 2 only (at step 500), 5e-4 on seeds 0 and 2, not on seed 1."""
  return [
    _point("postnorm", 12, lr, s, warmup=0, schedule="constant")
    for lr, s in ((1e-3, 0), (1e-3, 1), (5e-4, 1))
  ]


def _deepnet(n: int, seed: int) -> list[dict]:
  return [_point(v, n, 1e-3, seed, warmup=200, schedule="inverse_sqrt") for v in PAIR]


def _deep_1000(variant: str) -> dict:
  p = _point(variant, 1000, 1e-3, 0, warmup=0, schedule="constant")
  p["overrides"].update(
    {
      "train.steps": 1500,
      "train.batch_size": 8,
      "train.seq_len": 64,
      "model.remat": "full",
      "train.checkpoint_every": 25,
    }
  )
  return p


GRID = (
  _no_warmup(24, 0)
  + _deepnet(18, 0)
  + _deepnet(24, 0)
  + [p for s in (1, 2) for p in _no_warmup(24, s) + _deepnet(18, s) + _deepnet(24, s)]
  + _no_warmup(48, 0)
  + [_deep_1000(v) for v in ("deepnorm", "prenorm")]
  + _split_12()
)
