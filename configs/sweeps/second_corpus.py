"""The 12-layer loss-vs-lr grid on a second corpus: do the edges measured on the embedded
Python standard library (code) hold on English text?

tiny Shakespeare (data/tinyshakespeare.txt, 1,115,394 bytes shipped with the repository, byte
level, the last 10% held out) in place of the stdlib source; everything else is the loss-vs-lr
grid's (configs/sweeps/lr_sensitivity.py: each variant's configs/<variant>_96L.py at 12 layers,
batch 16 x 128, Adam b2 0.98, constant lr from 1.25e-4 to 3.2e-2 in factors of 2, no warmup,
1,000 steps, an eval every 50). The stdlib column is docs/lr_sensitivity/'s 12-layer runs.

Points in priority order: seed 0 of the three main variants, each lr for every variant before
the next, from the middle of the range outwards; then seeds 1 and 2 at every lr (run the cells
next to each edge with a filter). Names carry every axis, `shakespeare-postnorm-L12-lr0.001-s0`:

  python scripts/sweep.py --grid=configs/sweeps/second_corpus.py --jobs=auto \
      --sweep_dir=docs/second_corpus/runs --filter='-s0$'
  python scripts/lr_sensitivity.py --runs=docs/second_corpus/runs --out_dir=docs/second_corpus

Cost on one pinned core: about 4-5 minutes per point (27 points for seed 0).
"""

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

CORPUS = {"data.source": "text", "data.path": "data/tinyshakespeare.txt"}
VARIANTS = ("postnorm", "prenorm", "deepnorm")
NUM_LAYERS = 12
LRS = tuple(1.25e-4 * 2**k for k in range(9))  # 1.25e-4 ... 3.2e-2, as lr_sensitivity.py
RUN_ORDER = (1e-3, 5e-4, 2e-3, 2.5e-4, 4e-3, 1.25e-4, 8e-3, 1.6e-2, 3.2e-2)
assert sorted(RUN_ORDER) == sorted(LRS)
SEEDS = (0, 1, 2)
STEPS = 1000


def _point(variant: str, lr: float, seed: int) -> dict:
  return constant_lr_point(
    f"shakespeare-{variant}-L{NUM_LAYERS}-lr{lr:g}-s{seed}",
    f"configs/{variant}_96L.py",
    NUM_LAYERS,
    lr,
    seed,
    STEPS,
    **CORPUS,
  )


GRID = [_point(v, lr, s) for s in SEEDS for lr in RUN_ORDER for v in VARIANTS]
