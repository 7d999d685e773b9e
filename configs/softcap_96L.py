"""Logit softcapping (Gemma 2, Gemma Team 2024, arXiv 2408.00118; code google-deepmind/gemma):
Pre-LN with c tanh(x / c) on attention's scaled logits (c = 50) and on the output logits
(c = 30), Gemma 2's caps; final LN. Dense attention only (the fused paths form no logits).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/softcap_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/softcap_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/softcap_96L.py:smoke

Expected: trains like Pre-LN; the caps bound the logits that grow before a divergence
(attention-logit growth, output-logit divergence), so it may hold at larger lrs.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "logit softcap"
COLOR = "#8da0cb"


def get_config(arg: str | None = None):
  c = base.experiment("softcap_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.attn_softcap = 50.0  # Gemma 2's attention cap
  c.model.final_softcap = 30.0  # Gemma 2's output cap
  return c
