"""Xiong 2020's warmup rescue, in the regime where warmup decides whether Post-LN trains.

Post-LN (LN(x + F(x)), xavier init, no final norm) at 12 layers, d 64, Adam (b2 0.98) at a
constant peak lr 1e-3 after a 1,000-step linear warmup, 1,500 steps of 16 x 128 bytes.

  python -m experiments.train --config=configs/xiong_rescue.py                     # trains
  python -m experiments.train --config=configs/xiong_rescue.py --config.opt.warmup_steps=0
                                                                     # stays on the plateau
  # any byte-level text corpus:
  python -m experiments.train --config=configs/xiong_rescue.py \
      --config.data.source=text --config.data.path=data/tinyshakespeare.txt

Each run takes 4-8 minutes on 2 CPU cores. Why 1,000 warmup steps and not 200: 200 rescued
this model on the default corpus but not on an English-prose corpus; the evidence on both
shipped corpora, with seeds, is in docs/xiong_rescue/
(scripts/sweep.py --grid=configs/sweeps/xiong_rescue.py).
"""

from configs import base
from resnorm_jax.runs.expected import Expected

# The outcome this experiment reproduces as named (the end line and summary.json say whether
# a run showed it; any override of a key its results depend on makes it another experiment).
EXPECTED = Expected("trained", "as Xiong et al. 2020 report: warmup rescues Post-LN")


def get_config(arg: str | None = None):
  c = base.experiment("xiong_rescue", num_layers=12, arg=arg)
  if arg in (None, "", "cpu"):
    c.train.steps = 1500
    c.train.eval_every, c.train.checkpoint_every = 250, 500
    c.diag.per_layer = False  # the verdict needs only the losses
  c.opt.lr, c.opt.schedule = 1e-3, "constant"
  c.opt.warmup_steps = 1000 if arg != "smoke" else 2
  return c
