"""ReZero (Bachlechner 2020): no norm, x = x + a*F(x), a learnable scalar init 0.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/rezero_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/rezero_96L.py:paper

Expected: the identity at init; trains without any normalization.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("rezero_96L", num_layers=96, arg=arg)
  c.model.norm = "none"
  c.model.norm_position = "none"
  c.model.residual = "rezero"
  return c
