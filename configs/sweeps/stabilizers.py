"""What practitioners reach for when a deep model will not train (docs/stabilizers/): logit
softcapping, gated attention, attention sinks, qk-norm, the z-loss, Adam-atan2 and Muon, each
measured against Post-LN's edge and on Pre-LN's loss-vs-lr curve.

EDGE: Post-LN at 12 layers without warmup at lr 1e-3 (1 of 12 seeds escaped there, 0 kept;
docs/survival) and 2e-3, on the survival protocol (configs/sweeps/survival.py: constant lr,
1,500 steps, an eval every 25 on 8,192 tokens), with each stabilizer alone; 4 seeds a cell to
start (seed-major, so a stopped sweep leaves every cell the same seeds; SEEDS=12 where a cell
moves). Muon runs at MUON_LRS: the best lr of its own 6-layer curve (CURVES below).

CURVES: Pre-LN with each stabilizer at 6 layers over the loss-vs-lr grid's 9 lrs and at 24
layers over 3 lrs around its 6-layer best (the loss-vs-lr protocol: 1,000 steps, an eval
every 50; seed 0), beside docs/lr_sensitivity/'s Pre-LN; Muon at 6, 12 and 24 layers under sp
and CompleteP (does its best lr drift with depth?).

  python scripts/sweep.py --grid=configs/sweeps/stabilizers.py --jobs=auto \
      --sweep_dir=docs/stabilizers/runs --filter='^postnorm-.*-L12-lr0.001-s[0-3]$'
  python scripts/survival.py --runs=docs/stabilizers/runs --out_dir=docs/stabilizers \
      --baseline='docs/survival/runs:^postnorm-L12-lr0.001-s'

WHERE: where the gate moves the edge, beside plain Post-LN in the same cells (above WHERE).

Cost on one pinned core of the 2-core CPU these were planned on (measured for the survival and
loss-vs-lr grids, Pre-LN's shape; gated attention adds ~8% and Muon ~0% at d_model 64, a
100-step 12-layer point side by side): ~6 min a 12-layer edge point (idle core; ~2.5x that
with the other core loaded), so the 7 x 2 x 4 = 56 edge points are ~6 core-hours. Measured
here since: a 12-layer edge point 18-25 min and a 6-layer curve point 5.5-6.3 min (333-376 s)
on one pinned core with the other busy, so the 7 x 9 six-layer points are ~6 core-hours; the
24-layer points, 3-4x a 6-layer one (Pre-LN's took 441-1,312 s), ~7 core-hours for 7 x 3.
"""

import os

from resnorm_jax.sweeps.grid import constant_lr_point  # (no JAX)

# name -> the overrides that turn it on (each a key of its own; docs/variants.md)
STABILIZERS = {
  "softcap": {"model.attn_softcap": 50.0, "model.final_softcap": 30.0},  # Gemma 2's caps
  "attngate": {"model.attn_gate": "elementwise"},  # Qiu et al. 2025
  "sinks": {"model.attn_sinks": True},  # gpt-oss
  "qknorm": {"model.qk_norm": True},
  "zloss": {"train.z_loss": 1e-4},  # PaLM's weight
  "adamatan2": {"opt.name": "adam_atan2"},  # Everett et al. 2024
  "muon": {"opt.name": "muon"},  # KellerJordan/Muon, Moonlight's RMS-matched scale
}
# The gate's controls at Post-LN's 12-layer 1e-3 cell (docs/stabilizers, "Why the gate"): a
# sigmoid gate near 0.5 halves the attention branch at init, so each control takes one part of
# the gate away. attnscale: the halving alone (no gate); gatebias: the gate without the halving
# (its bias from 3.0, ~0.93 at init); gatefrozen: the halving by a gate that never learns;
# gatehead: one gate per head (the paper's headwise form).
CONTROLS = {
  "attnscale": {"model.attn_out_scale": 0.5},
  "gatebias": {"model.attn_gate": "elementwise", "model.attn_gate_bias": 3.0},
  "gatefrozen": {"model.attn_gate": "elementwise", "model.attn_gate_frozen": True},
  "gatehead": {"model.attn_gate": "headwise"},
}
CONTROL_LRS = (1e-3,)
EDGE_LRS = (1e-3, 2e-3)
# Muon's 6-layer best (prenorm-muon-L6-*: final eval 1.5380 at 8e-3; 1.5700 at 4e-3, 1.5679 at
# 1.6e-2), where Pre-LN with Adam is best at 4e-3 (docs/lr_sensitivity/sensitivity.csv)
MUON_LRS = (8e-3,)
SEEDS = tuple(range(int(os.environ.get("SEEDS", "4"))))
CURVE_LRS = tuple(1.25e-4 * 2**k for k in range(9))  # the loss-vs-lr grid's
# 24 layers: 3 lrs around each curve's 6-layer best (docs/stabilizers/curves.csv, seed 0):
# 4e-3 for each of the six at 6 layers (of 2e-3, 4e-3, 8e-3), as Pre-LN's; Muon's 8e-3.
LRS_24 = {name: (2e-3, 4e-3, 8e-3) for name in STABILIZERS} | {"muon": (4e-3, 8e-3, 1.6e-2)}
# Adam-atan2's 24-layer best was the lowest of the three (2e-3: 1.7202, 4e-3: 1.7340): 1e-3
# brackets it.
LRS_24["adamatan2"] = (1e-3, *LRS_24["adamatan2"])
# Seeds 1-2 where a 6-layer curve's seed 0 leaves plain Pre-LN's seed spread by far: at 3.2e-2
# Pre-LN's seeds 0-2 end at 2.6656-2.6852 (docs/lr_sensitivity), seed 0 of qk-norm at 2.0007,
# softcapping 2.3491, gated attention 2.5389 (docs/stabilizers/curves.csv).
PARTED = {"qknorm": (3.2e-2,), "softcap": (3.2e-2,), "attngate": (3.2e-2,)}
# Seeds 1-2 at each curve's 6-layer best (4e-3; Muon's 8e-3), where plain Pre-LN has seeds 0-2
# (1.7552-1.7646), and at twice it (8e-3; docs/lr_sensitivity's Pre-LN seeds 1-2 there):
# whether a stabilizer's seed-0 difference from Pre-LN there outlasts seeds.
AT_BEST = {name: (4e-3, 8e-3) for name in STABILIZERS if name != "muon"} | {"muon": MUON_LRS}


def _edge(name: str, lr: float, seed: int, overrides: dict | None = None) -> dict:
  return constant_lr_point(
    f"postnorm-{name}-L12-lr{lr:g}-s{seed}",
    "configs/postnorm_96L.py",
    12,
    lr,
    seed,
    1500,
    eval_every=25,
    **{"train.eval_batches": 4, "train.checkpoint_every": 250},
    **(STABILIZERS[name] if overrides is None else overrides),
  )


def _curve(name: str, n: int, lr: float, seed: int = 0, **extra) -> dict:
  param = extra.get("model.depth_param")
  tag = f"{name}-{param}" if param else name
  return constant_lr_point(
    f"prenorm-{tag}-L{n}-lr{lr:g}-s{seed}",
    "configs/prenorm_96L.py",
    n,
    lr,
    seed,
    1000,
    **STABILIZERS[name],
    **extra,
  )


EDGE = [
  _edge(name, lr, s)
  for s in SEEDS
  for name in STABILIZERS
  for lr in (MUON_LRS if name == "muon" else EDGE_LRS)
]
EDGE += [
  _edge(name, lr, s, overrides)
  for s in SEEDS
  for name, overrides in CONTROLS.items()
  for lr in CONTROL_LRS
]
# Where the gate moves the edge (docs/stabilizers, issue "why the gate"): gated attention and
# plain Post-LN in the same cells, survival protocol. 12 layers at 2e-3 and 4e-3 (the EDGE
# cells above hold 2e-3), 24 layers at 5e-4 and 1e-3, the gate with DeepNorm at 24 layers and
# 4e-3 (DeepNorm alone kept 6/12 there, docs/survival), and the 12-layer 1e-3 cell on
# Shakespeare (docs/second_corpus's corpus) with and without the gate.
SHAKESPEARE = {"data.source": "text", "data.path": "data/tinyshakespeare.txt"}
GATE = STABILIZERS["attngate"]


def _cell(name: str, config: str, n: int, lr: float, seed: int, **extra) -> dict:
  return constant_lr_point(
    f"{name}-L{n}-lr{lr:g}-s{seed}", config, n, lr, seed, 1500, eval_every=25,
    **{"train.eval_batches": 4, "train.checkpoint_every": 250}, **extra,
  )  # fmt: skip


WHERE = [
  point
  for s in SEEDS
  for point in (
    _cell("postnorm-attngate", "configs/postnorm_96L.py", 12, 4e-3, s, **GATE),
    _cell("postnorm", "configs/postnorm_96L.py", 12, 4e-3, s),
    _cell("postnorm", "configs/postnorm_96L.py", 12, 2e-3, s),
    *(_cell("postnorm-attngate", "configs/postnorm_96L.py", 24, lr, s, **GATE)
      for lr in (5e-4, 1e-3)),
    *(_cell("postnorm", "configs/postnorm_96L.py", 24, lr, s) for lr in (5e-4, 1e-3)),
    _cell("deepnorm-attngate", "configs/deepnorm_96L.py", 24, 4e-3, s, **GATE),
    _cell("shakespeare-postnorm-attngate", "configs/postnorm_96L.py", 12, 1e-3, s,
          **GATE, **SHAKESPEARE),
    _cell("shakespeare-postnorm", "configs/postnorm_96L.py", 12, 1e-3, s, **SHAKESPEARE),
  )
]  # fmt: skip
CURVES = [_curve(name, 6, lr) for name in STABILIZERS for lr in CURVE_LRS]
CURVES += [_curve(name, 6, lr, s) for s in (1, 2) for name, lrs in PARTED.items() for lr in lrs]
CURVES += [_curve(name, 6, lr, s) for s in (1, 2) for name, lrs in AT_BEST.items() for lr in lrs]
CURVES += [_curve(name, 24, lr) for name in STABILIZERS for lr in LRS_24[name]]
CURVES += [
  _curve("muon", n, lr, **{"model.depth_param": p, "model.base_depth": 6})
  for p in ("sp", "completep")
  for n in (12, 24)
  for lr in CURVE_LRS
]
GRID = EDGE + WHERE + CURVES
