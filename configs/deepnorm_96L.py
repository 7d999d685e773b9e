"""DeepNorm (Wang 2022): x = LN(alpha*x + F(x)), alpha=(2N)^(1/4), init beta=(8N)^(-1/4) on
v, attn out, FFN in/out.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/deepnorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/deepnorm_96L.py:paper

Expected: Post-LN's placement, yet it trains at 96 and 1000 layers where Post-LN does not.
"""

from configs import base
from resnorm_jax.runs.expected import Expected

# The outcome this experiment reproduces as named (the end line and summary.json say whether
# a run showed it; any override of a key its results depend on makes it another experiment).
EXPECTED = Expected("trained", "as Wang et al. 2022 report for DeepNorm where Post-LN is stuck")


def get_config(arg: str | None = None):
  c = base.experiment("deepnorm_96L", num_layers=96, arg=arg)
  c.model.residual = "deepnorm"
  c.model.init = "deepnorm"
  return c
