"""Control for DeepNet's model-update figure: Post-LN with DeepNorm's init, plain residual.

x = LN(x + F(x)) (alpha = 1) with DeepNorm's init: xavier with gain beta = (8N)^(-1/4) on the
value, attention-output and FFN weights (q, k at gain 1). It separates the two parts of
DeepNorm: does the smaller init alone tame Post-LN's early update, or is the up-weighted
skip (alpha) needed too?

python -m experiments.model_update --config=configs/postnorm_deepinit_96L.py ...
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("postnorm_deepinit_96L", num_layers=96, arg=arg)
  c.model.init = "deepnorm"
  return c
