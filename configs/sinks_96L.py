"""Learned attention sinks (OpenAI gpt-oss 2025; code openai/gpt-oss, sdpa): Pre-LN where every
head's softmax has one more logit in its denominator, a learned scalar per head (from 0), whose
probability is dropped; final LN. Dense or xla attention (cuDNN's kernel refused).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/sinks_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/sinks_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/sinks_96L.py:smoke

Expected: trains like Pre-LN; a head may then attend to nothing instead of parking its mass
on the first token.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "attention sinks"
COLOR = "#ffd92f"


def get_config(arg: str | None = None):
  c = base.experiment("sinks_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.attn_sinks = True
  return c
