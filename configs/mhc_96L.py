"""Manifold-constrained hyper-connections (mHC; Xie et al. 2025, arXiv 2512.24880): Pre-LN with
the residual stream widened to n = 4 copies, x' = H_res x + H_post^T F(LN(H_pre x)), H_res
projected onto the doubly stochastic matrices by 20 Sinkhorn-Knopp iterations, H_pre =
sigmoid(.), H_post = 2 sigmoid(.), the coefficients per token from the RMS-normalized
flattened stream (the paper's dynamic form); final LN of the copies' sum. Pre-LN at init.
--config.model.mhc_dynamic=false keeps the static coefficients alone.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/mhc_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/mhc_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/mhc_96L.py:smoke

Expected: trains like Pre-LN (it starts as Pre-LN); against hyperconn_96L, the product of the
layers' residual mixing matrices stays doubly stochastic (its gain bounded) at any depth.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "mHC"
COLOR = "#f0027f"
MARKER = "v"
FAMILY = "what the residual stream carries"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("mhc_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  c.model.residual = "mhc"
  c.model.mhc_rate = 4  # the paper's expansion rate
  c.model.mhc_sinkhorn_iters = 20  # the paper's t_max
  c.model.mhc_dynamic = True
  return c
