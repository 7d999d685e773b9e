"""A tiny config for tests and a first look: 2 layers, width 32, 20 steps (seconds on CPU).

python -m experiments.train --config=configs/smoke.py --workdir=/tmp/smoke
"""

from configs import base


def get_config():
  c = base.get_config()
  c.name = "smoke"
  c.model.num_layers = 2
  c.model.d_model = 32
  c.model.num_heads = 2
  c.model.d_ff = 64
  c.model.max_seq_len = 32
  c.train.steps = 20
  c.train.batch_size = 8
  c.train.seq_len = 32
  c.train.log_every = 5
  c.train.eval_every = 10
  c.train.eval_batches = 2
  c.train.final_eval_tokens = 1024  # wiring only: a few eval batches, not a verdict
  c.train.checkpoint_every = 10
  return c
