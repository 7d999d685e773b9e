"""HybridNorm (Zhuo et al. 2025, arXiv 2503.04598; code BryceZhuo/HybridNorm): per layer
y = x + Attn(x) with q, k and v each LayerNorm'd per head and no norm in front of attention,
then x' = FFN(LN(y)) + LN(y) (Post-Norm around the FFN), final LN.
--config.model.hybridnorm_first_pre=true gives HybridNorm* (the first layer Pre-Norm).
The paper's models use RMSNorm: --config.model.norm=rmsnorm.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/hybridnorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/hybridnorm_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/hybridnorm_96L.py:smoke

Expected: the paper claims it beats both Pre- and Post-Norm; the open question here is whether
its one Post-Norm per layer brings back Post-LN's failure at depth without warmup.
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "HybridNorm"
COLOR = "#6a3d9a"
MARKER = "p"
FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("hybridnorm_96L", num_layers=96, arg=arg)
  c.model.norm_position = "hybridnorm"
  c.model.hybridnorm_first_pre = False  # plain HybridNorm, the paper's definition
  return c
