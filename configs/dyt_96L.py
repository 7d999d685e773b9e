"""DyT (Zhu 2025): every LayerNorm of Pre-LN replaced by gamma*tanh(alpha x)+beta.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/dyt_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/dyt_96L.py:paper

Expected: trains, close to Pre-LN.
"""

from configs import base

FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("dyt_96L", num_layers=96, arg=arg)
  c.model.norm = "dyt"
  c.model.norm_position = "pre"
  return c
