"""DeepNorm (Wang 2022): x = LN(alpha*x + F(x)), alpha=(2N)^(1/4), init beta=(8N)^(-1/4) on
v, attn out, FFN in/out.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/deepnorm_1000L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/deepnorm_1000L.py:paper

Expected (DeepNet): Post-LN's placement, yet it trains at 1000 layers where Post-LN does not.
Measured here (docs/results.md): stable, but after 150 steps of 8 x 64 tokens still at the
unigram plateau (eval 3.43 vs entropy 3.25); it needs more steps than this CPU budget.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("deepnorm_1000L", num_layers=1000, arg=arg)
  c.model.residual = "deepnorm"
  c.model.init = "deepnorm"
  return c
