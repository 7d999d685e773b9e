"""Sub-LN / Magneto (Wang 2022, arXiv 2210.06423): Pre-LN plus a LayerNorm inside each branch
(before the attention output projection and before the FFN's second matrix), final LN, and
Magneto's init: xavier with gain gamma = sqrt(ln 2N) on v, attn out, FFN in/out (2.293 at 96
layers).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/subln_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/subln_96L.py:paper

Expected: trains without warmup like Pre-LN; the inner norms keep each branch's output
variance set by its output projection (gamma^2 times xavier's) whatever its input.
"""

from configs import base

FAMILY = "where the norm sits, what replaces it"  # its panel in the lr figures


def get_config(arg: str | None = None):
  c = base.experiment("subln_96L", num_layers=96, arg=arg)
  c.model.norm_position = "subln"
  c.model.init = "magneto"
  return c
