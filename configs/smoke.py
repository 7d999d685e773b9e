"""A tiny config for tests and a first look: 2 layers, width 32, 20 steps (seconds on CPU).

python -m experiments.train --config=configs/smoke.py --workdir=/tmp/smoke
"""

from configs import base


def get_config():
  c = base.smoke_shape(base.get_config())  # the shape every named config's :smoke scale has
  c.name = "smoke"
  c.train.steps = 20
  c.train.log_every = 5
  c.train.eval_every = 10
  c.train.eval_batches = 2
  c.train.checkpoint_every = 10
  return c
