"""BatchNorm in the Pre-Norm placement (statistics over batch and time).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/batchnorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/batchnorm_96L.py:paper

Expected: the training loss falls fast because batch statistics leak later tokens into
earlier positions (not causal in training); the eval loss, with running averages, shows
what was really learned.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("batchnorm_96L", num_layers=96, arg=arg)
  c.model.norm = "batchnorm"
  c.model.norm_position = "pre"
  return c
