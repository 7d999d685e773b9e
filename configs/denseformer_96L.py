"""DenseFormer (Pagliardini et al. 2024, arXiv 2402.02622; code epfml/DenseFormer): Pre-LN blocks,
each followed by a depth-weighted average (DWA) of the embedding and every block output so
far, Y_i = sum_j alpha_(i,j) X_j, the weights initialized to the identity (alpha_(i,i) = 1):
the plain Pre-LN model at init. Final LN.

Run (about 15 minutes or less on a 2-core CPU; the buffer of past outputs makes the
backward pass keep L (L+1) B T D floats: about 4.9 GB at 96 layers):
  python -m experiments.train --config=configs/denseformer_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/denseformer_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/denseformer_96L.py:smoke

Expected: trains like Pre-LN at first (it starts as Pre-LN); the paper reports lower
perplexity than a deeper plain model of the same size.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "DenseFormer"
COLOR = "#a6761d"
MARKER = "P"
FAMILY = "what the residual stream carries"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("denseformer_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "denseformer"
  return c
