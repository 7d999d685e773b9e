"""The width axis: do the 12-layer depth results hold at d_model 128 and 256?

Only the width changes from the loss-vs-lr grid (configs/sweeps/lr_sensitivity.py, whose
12-layer runs are this grid's d_model-64 column): byte-level stdlib text, batch 16 x 128,
Adam b2 0.98, constant lr, no warmup, 1,000 steps, an eval every 50, 12 layers. The head dim
stays 16 (heads = d_model / 16: 8 at 128, 16 at 256) so each head's logit q.k / sqrt(16) is
the same function of its q and k as in every d_model-64 run, and a change of the failure is
one of width, not of head shape (the usual width ladders keep the head dim too); d_ff is
4 x d_model. Every run logs `attn_logit_max` and `output_logit_rms` (train_step.py): which
kind of failure a run above its edge shows.

Tiers, in priority order (a sweep stopped part-way has decided the most it could):
  1. d_model 128, seed 0: Post-LN, Pre-LN and DeepNorm at 6 lrs each (DeepNorm 7: its best at
     128 came out at the smallest of the first 6) in factors of 2 around
     their d_model-64 edge and best (docs/lr_sensitivity/results.csv, 12 layers), the cells
     that decide the edges first, each rank for every variant before the next.
  2. d_model 128, seeds 1 and 2 at the two cells next to each edge (EDGE_128).
  3. d_model 256, seed 0: Post-LN at 3 lrs around its edge at 128 (the lower cell, half the
     lower, the upper: standard parametrization expects the edge to fall with width), Pre-LN
     at its best lr at 128, half and twice that (it has no edge in the lrs run), DeepNorm
     as Post-LN, last.
  4. muP (model.width_param=mup, model.base_width=64: resnorm_jax/model/width_param.py),
     Post-LN and Pre-LN, seed 0: 5 lrs at d_model 64 and 128 around the d_model-64 edge and
     best, then 3 at 256. Under muP the best lr and the edge should stay put as width grows;
     at 64 (m_d = 1) muP differs from sp only by the attention scale 1/d_head, so its own
     d_model-64 column is run rather than taken from the sp grid. Names carry `-mup-`;
     `python scripts/width.py --width_param=mup` reads them (docs/width/mup/).

EDGE_128 holds each variant's (last cell that trains, first that fails) at d_model 128, set
from docs/width/edges.csv once tier 1 ran; names carry every axis, so a rerun keeps finished
points and runs only new cells.

  python scripts/sweep.py --grid=configs/sweeps/width.py --jobs=auto \
      --sweep_dir=docs/width/runs --filter='-d128-.*-s0$'       # tier 1
  python scripts/sweep.py --grid=configs/sweeps/width.py --jobs=auto \
      --sweep_dir=docs/width/runs --filter='-d128-'             # tier 2
  python scripts/sweep.py --grid=configs/sweeps/width.py --jobs=auto \
      --sweep_dir=docs/width/runs                               # tier 3
  python scripts/width.py   # docs/width/results.csv, edges.csv, curves.png, edges.png
  python scripts/sweep.py --grid=configs/sweeps/width.py --jobs=auto \
      --sweep_dir=docs/width/runs --filter='-mup-'                # tier 4
  python scripts/width.py --width_param=mup   # docs/width/mup/

Cost on one pinned core, measured (docs/width/README.md): per 1,000-step run about 13.5 min
of the core's own time at d_model 128 and 35 at 256 (tier 1 4.1 core-hours, tier 2 2.7,
tier 3 5.3; 12.1 in all); 8-11x that in wall time while the core is shared as it was then.
"""

VARIANTS = ("postnorm", "prenorm", "deepnorm")
NUM_LAYERS = 12
HEAD_DIM = 16
STEPS = 1000
# Tier 1's lrs per variant in the order they run: the two cells of the d_model-64 edge
# first, then outwards. At 64 (12 layers): Post-LN trains at 2.5e-4 (best), at 5e-4 in 2 of
# 3 seeds, at 1e-3 in 1 of 3, stuck above; DeepNorm best at 4e-3, stuck at 8e-3 in all 3;
# Pre-LN best at 4e-3, within 0.1 nats of it up to 4e-3, 2.64 at 1.6e-2, rising at 3.2e-2.
RUN_ORDER_128 = {
  "postnorm": (5e-4, 1e-3, 2.5e-4, 2e-3, 1.25e-4, 6.25e-5),
  "prenorm": (4e-3, 8e-3, 1.6e-2, 2e-3, 1e-3, 3.2e-2),
  "deepnorm": (4e-3, 8e-3, 2e-3, 1e-3, 1.6e-2, 5e-4, 2.5e-4),  # 2.5e-4: its best at 128 was
  # the smallest lr run (5e-4)
}
# (last lr that trains, first that fails) at d_model 128: the d_model-64 edge until tier 1
# lands (Pre-LN's: the boundary lr, 0.1 nats from its best, and the next cell).
EDGE_128 = {  # measured (docs/width/edges.csv, seed 0); Pre-LN trains at every lr run: the
  # cells where its loss turns up (1.691 at 2e-3, 1.810 at 4e-3, 2.457 at 8e-3)
  "postnorm": (2.5e-4, 5e-4),
  "prenorm": (4e-3, 8e-3),
  "deepnorm": (5e-4, 1e-3),
}
SEEDS_AT_EDGE = (1, 2)


# The two d_model-128 cells each variant's d_model-256 lrs sit around: Post-LN's and
# DeepNorm's edge; Pre-LN has no edge in the lrs run, so its question at 256 is where the best
# lr goes: its best at 128 (docs/width/edges.csv) and the cell above.
AROUND_128 = {**EDGE_128, "prenorm": (2e-3, 4e-3)}


def lrs_256(variant: str) -> tuple[float, ...]:
  """Tier 3's lrs in run order: the lower of the variant's two cells at 128, half that (sp
  expects the edge and the best lr to fall with width), then the upper one."""
  lo, hi = AROUND_128[variant]
  return (lo, lo / 2, hi)


# Tier 4's lrs per variant in run order (muP): the d_model-64 edge's cells and best first.
MUP_RUN_ORDER = {
  "postnorm": (5e-4, 1e-3, 2.5e-4, 1.25e-4, 2e-3),
  "prenorm": (4e-3, 8e-3, 2e-3, 1.6e-2, 1e-3),
}
MUP_WIDTHS = (64, 128, 256)
MUP_LRS_AT_256 = 3  # the first 3 of MUP_RUN_ORDER


def _point(variant: str, d_model: int, lr: float, seed: int, width_param: str = "sp") -> dict:
  param = {} if width_param == "sp" else {"model.width_param": width_param, "model.base_width": 64}
  tag = "" if width_param == "sp" else f"-{width_param}"
  return {
    "name": f"{variant}-L{NUM_LAYERS}-d{d_model}{tag}-lr{lr:g}-s{seed}",
    "config": f"configs/{variant}_96L.py",
    "overrides": {
      **param,
      "model.num_layers": NUM_LAYERS,
      "model.d_model": d_model,
      "model.num_heads": d_model // HEAD_DIM,
      "model.d_ff": 4 * d_model,
      "opt.lr": lr,
      "opt.warmup_steps": 0,
      "opt.schedule": "constant",
      "train.steps": STEPS,
      "train.eval_every": 50,
      "seed": seed,
      "model.remat": "none",
      "diag.per_layer": False,
    },
  }


_RANKS = range(max(len(v) for v in RUN_ORDER_128.values()))
TIER1 = [
  _point(v, 128, RUN_ORDER_128[v][r], 0)
  for r in _RANKS
  for v in VARIANTS
  if r < len(RUN_ORDER_128[v])
]
TIER2 = [_point(v, 128, lr, s) for s in SEEDS_AT_EDGE for v in VARIANTS for lr in EDGE_128[v]]
TIER3 = [_point(v, 256, lrs_256(v)[r], 0) for r in range(3) for v in VARIANTS[:2]] + [
  _point("deepnorm", 256, lr, 0) for lr in lrs_256("deepnorm")
]
TIER4 = [
  _point(v, d, lrs[r], 0, "mup")
  for d in MUP_WIDTHS
  for r in range(MUP_LRS_AT_256 if d == 256 else 5)
  for v, lrs in MUP_RUN_ORDER.items()
]
GRID = TIER1 + TIER2 + TIER3 + TIER4
