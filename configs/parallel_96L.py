"""PaLM parallel block: x = x + Attn(LN x) + FFN(LN x), final norm.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/parallel_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/parallel_96L.py:paper

Expected: trains like Pre-LN with half the residual additions.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("parallel_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.block = "parallel"
  return c
