"""Value residual learning (Zhou et al. 2024, arXiv 2410.17897, ResFormer): Pre-LN where every
layer's attention uses V'_n = lambda_1 V_n + lambda_2 V_1, the first layer's values mixed in,
lambda_1 and lambda_2 learnable per layer from 0.5 and 0.5 (the paper's ResFormer); final LN.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/valueres_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/valueres_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/valueres_96L.py:smoke

Expected: trains like Pre-LN; the paper reports the same loss with fewer parameters or steps
and less concentrated attention in deep layers.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "value residuals"
COLOR = "#393b79"
MARKER = "*"
FAMILY = "what the residual stream carries"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("valueres_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "valueres"
  c.model.valueres_lambda_init = 0.5  # lambda_2 = lambda_1 = 0.5
  return c
