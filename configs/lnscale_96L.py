"""LayerNorm scaling (Sun 2025, arXiv 2502.05795): Pre-LN with layer l's norm outputs scaled by
1/sqrt(l) (l = 1..N), x = x + F(LN(x) / sqrt(l)); final LN unscaled; xavier init (the paper
drops the depth-scaled init when scaling).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/lnscale_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/lnscale_96L.py:paper

Expected: trains like Pre-LN; the stream grows more slowly with depth.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("lnscale_96L", num_layers=96, arg=arg)
  c.model.norm_position = "lnscale"
  return c
