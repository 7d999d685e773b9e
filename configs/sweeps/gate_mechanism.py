"""Why the gate moves Post-LN's edge, measured (docs/stabilizers, "The mechanism"): plain
Post-LN, gated attention and the 0.5-scale control at the 12-layer lr 1e-3 cell, the first
300 steps of the survival protocol's runs (constant lr and batches that are a function of
(seed, step): these are the first 300 steps of docs/stabilizers/runs' and docs/survival/runs'
1,500-step runs, the same fates) with every per-layer diagnostic logged at every step: the
attention branch's and the stream's RMS, attention entropy and mass on the first token, the
stream's largest activation, the gate's mean and spread, and each layer's update over its
parameters (resnorm_jax/train/train_step.py; step 1's row is the model at init).

  python scripts/sweep.py --grid=configs/sweeps/gate_mechanism.py --jobs=auto \
      --sweep_dir=docs/stabilizers/mechanism
  python scripts/gate_mechanism.py   # mechanism.csv, mechanism.png

Cost on one pinned core of a 2-core CPU: ~1.5 min a point (a fifth of a survival point), 12
points.
"""

import os

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

ARMS = {
  "postnorm": {},
  "attngate": {"model.attn_gate": "elementwise"},
  "attnscale": {"model.attn_out_scale": 0.5},
}
SEEDS = tuple(range(int(os.environ.get("SEEDS", "4"))))
STEPS = 300


def _point(name: str, seed: int) -> dict:
  tag = "postnorm" if name == "postnorm" else f"postnorm-{name}"
  return constant_lr_point(
    f"{tag}-L12-lr0.001-s{seed}",
    "configs/postnorm_96L.py",
    12,
    1e-3,
    seed,
    STEPS,
    eval_every=25,
    **{
      "train.eval_batches": 4,
      "train.checkpoint_every": 100,
      "train.log_every": 1,
      "diag.per_layer": True,
      "diag.mechanism": True,
      **ARMS[name],
    },
  )


GRID = [_point(name, s) for s in SEEDS for name in ARMS]
