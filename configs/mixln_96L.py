"""Mix-LN (Li 2024, arXiv 2412.13795): Post-LN in the first floor(0.25 N) layers, Pre-LN in the
rest, in one scanned stack (the layer index is scan data); final LN.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/mixln_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/mixln_96L.py:paper

Expected: the paper's claim is Pre-LN's stability with more useful deep layers; here, whether
24 Post-LN layers at the bottom already stall as a 24-layer Post-LN model does.
"""

from configs import base

FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("mixln_96L", num_layers=96, arg=arg)
  c.model.norm_position = "mix"
  c.model.mixln_post_fraction = 0.25  # the paper's alpha
  return c
