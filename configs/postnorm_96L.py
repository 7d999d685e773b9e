"""Post-LN (Vaswani 2017): x = LN(x + F(x)), xavier init, no final norm.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/postnorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/postnorm_96L.py:paper

Expected: at 96 layers with Adam lr 1e-3 and no warmup the loss falls onto the unigram
distribution (~unigram entropy) and stays there: it fails to learn (Xiong 2020).
"""

from configs import base
from resnorm_jax.runs.expected import Expected

# The outcome this experiment reproduces as named (the end line and summary.json say whether
# a run showed it; any override of a key its results depend on makes it another experiment).
EXPECTED = Expected("stuck", "as Xiong et al. 2020 report for Post-LN without warmup at depth")


def get_config(arg: str | None = None):
  c = base.experiment("postnorm_96L", num_layers=96, arg=arg)
  return c
