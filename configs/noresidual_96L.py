"""No residual: x = F(LN(x)), a plain deep network of Pre-LN sub-layers.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/noresidual_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/noresidual_96L.py:paper

Expected: at 96 layers it cannot learn: the signal and gradient must pass through 192
sub-layers with no skip path.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("noresidual_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "none"
  return c
