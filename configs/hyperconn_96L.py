"""Hyper-connections (Zhu 2024, arXiv 2409.19606): Pre-LN with the residual stream widened to
n = 4 copies and learnable static connection weights, initialized so that the model is
Pre-LN at init (A_m = e_(k mod n), A_r = I, beta = 1); final LN of the copies' sum.
--config.model.hyperconn_dynamic=true adds the dynamic (input-dependent) weights.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/hyperconn_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/hyperconn_96L.py:paper

Expected: trains like Pre-LN (it starts as Pre-LN) and can learn to re-weight the skip
paths.
"""

from configs import base

LABEL = "hyper-connections"  # its name in tables and figure legends (style.py reads it)
FAMILY = "what the residual stream carries"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("hyperconn_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "hyperconn"
  c.model.hyperconn_rate = 4  # the paper's main expansion rate
  c.model.hyperconn_dynamic = False
  return c
