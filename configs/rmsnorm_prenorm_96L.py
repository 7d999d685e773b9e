"""Llama style: RMSNorm, Pre-Norm, SwiGLU FFN, RoPE, untied head.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/rmsnorm_prenorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/rmsnorm_prenorm_96L.py:paper

Expected: trains like Pre-LN.
"""

from configs import base

FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("rmsnorm_prenorm_96L", num_layers=96, arg=arg)
  c.model.norm = "rmsnorm"
  c.model.norm_position = "pre"
  c.model.ffn_activation = "swiglu"
  c.model.position = "rope"
  c.model.tie_embeddings = False
  return c
