"""Derf (Chen et al. 2025, arXiv 2512.10938; code zlab-princeton/Derf): every LayerNorm of Pre-LN
replaced by gamma * erf(alpha x + s) + beta, alpha and s learnable scalars from 0.5 and 0 (the
official code's defaults), gamma and beta per channel: DyT's successor.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/derf_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/derf_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/derf_96L.py:smoke

Expected: trains, close to Pre-LN and DyT (the paper reports it above both LayerNorm and DyT).
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "Derf"
COLOR = "#d6616b"
MARKER = ">"
FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("derf_96L", num_layers=96, arg=arg)
  c.model.norm = "derf"
  c.model.norm_position = "pre"
  return c
