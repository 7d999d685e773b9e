"""Sandwich / Peri-LN (Gemma 2/3): x = x + LN(F(LN(x))), final norm.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/sandwich_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/sandwich_96L.py:paper

Expected: trains; the branch output is normalized, so the stream grows more slowly than
Pre-LN's.
"""

from configs import base

FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("sandwich_96L", num_layers=96, arg=arg)
  c.model.norm_position = "peri"
  return c
