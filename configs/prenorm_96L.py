"""Pre-LN (GPT-2): x = x + F(LN(x)), final LayerNorm.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/prenorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/prenorm_96L.py:paper

Expected: trains without warmup at any depth here (Xiong 2020), well below the unigram
entropy.
"""

from configs import base
from resnorm_jax.runs.expected import Expected

# The outcome this experiment reproduces as named (the end line and summary.json say whether
# a run showed it; any override of a key its results depend on makes it another experiment).
EXPECTED = Expected("trained", "as Xiong et al. 2020 report for Pre-LN without warmup")


def get_config(arg: str | None = None):
  c = base.experiment("prenorm_96L", num_layers=96, arg=arg)
  c.model.norm_position = "pre"
  return c
