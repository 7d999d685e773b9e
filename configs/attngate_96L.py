"""Gated attention (Qiu et al. 2025, arXiv 2505.06708; code qiuzh20/gated_attention): Pre-LN
where each head's attention output is multiplied by sigmoid(X W_g) before the output
projection, X the normalised input, one gate per head and channel (elementwise, the paper's
recommended form); final LN.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/attngate_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/attngate_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/attngate_96L.py:smoke

Expected: trains like Pre-LN or a little better; the paper reports fewer loss spikes, larger
usable lrs and no attention sink, for d^2 more weights per layer.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "gated attention"
COLOR = "#66c2a5"


def get_config(arg: str | None = None):
  c = base.experiment("attngate_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.attn_gate = "elementwise"
  return c
