"""DeepNet's own setting at moderate depth: Post-LN, Pre-LN and DeepNorm *with* warmup and
inverse-square-root decay (DeepNet's Post-LN failures were with warmup), beside the
no-warmup stability map.

Each variant's configs/<variant>_96L.py at 18, 24, 48 and 96 layers, Adam b2 0.98, lr 1e-3
after 200 linear warmup steps then lr * sqrt(W / (s + 1)), 1,000 steps of 16 x 128 bytes.

  python scripts/sweep.py --grid=configs/sweeps/deepnet_panel.py --jobs=auto \
      --sweep_dir=docs/deepnet_panel/runs

Cost on one pinned core: ~7 min at 18 layers, 10 at 24, 20 at 48, 40 at 96 (12 points).
"""


def _point(variant: str, n: int) -> dict:
  return {
    "name": f"{variant}-L{n}-invsqrt-w200",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      "model.num_layers": n,
      "opt.lr": 1e-3,
      "opt.warmup_steps": 200,
      "opt.schedule": "inverse_sqrt",
      "train.steps": 1000,
      "model.remat": "none" if n <= 24 else "full",
      "train.eval_every": 100,
      "train.checkpoint_every": 250,
      "diag.per_layer": False,
    },
  }


GRID = [_point(v, n) for n in (18, 24, 48, 96) for v in ("postnorm", "prenorm", "deepnorm")]
