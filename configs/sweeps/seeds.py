"""Seed spread: Post-LN, Pre-LN and DeepNorm at 24 layers x seeds 0, 1, 2 (9 runs).

The seed sets the init and the batch order. results.md gets the mean and spread of the final
eval loss per variant over the three seeds (results_seeds.csv).

  python scripts/sweep.py --grid=configs/sweeps/seeds.py
  python scripts/plot_curves.py runs/sweeps/seeds/* --out=runs/sweeps/seeds/curves.png

Cost on 2 cores: ~3-4 min per run (200 steps at ~1 s/step), ~30 min in all.
"""

VARIANTS = ("postnorm", "prenorm", "deepnorm")
SEEDS = (0, 1, 2)

GRID = [
  {
    "name": f"{variant}-L24-seed{seed}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {"model.num_layers": 24, "model.remat": "none", "seed": seed},
  }
  for variant in VARIANTS
  for seed in SEEDS
]
