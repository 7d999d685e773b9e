"""LayerScale (CaiT): Pre-LN with x = x + diag(lambda) F(LN(x)), lambda init 1e-6 (CaiT's
value for deep models).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/layerscale_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/layerscale_96L.py:paper

Expected: trains like Pre-LN, starting from a near-identity network.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("layerscale_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "layerscale"
  c.model.layerscale_init = 1e-06
  return c
