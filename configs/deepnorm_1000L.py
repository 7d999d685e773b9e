"""DeepNorm (Wang 2022): x = LN(alpha*x + F(x)), alpha=(2N)^(1/4), init beta=(8N)^(-1/4) on
v, attn out, FFN in/out.

Run (150 steps, about 12 minutes on a 2-core CPU):
  python -m experiments.train --config=configs/deepnorm_1000L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/deepnorm_1000L.py:paper

Expected (DeepNet): Post-LN's placement, yet it trains at 1000 layers where Post-LN does not.
Measured here (docs/results.md): at this config's lr 1e-3 without warmup, stable but still
on the unigram plateau after 400 steps (eval 3.383 vs entropy 3.252; the LayerNorm biases'
drift cuts the lower layers' gradient within 5 steps: experiments/grad_flow.py). At a lower
lr it trains, 2.605 after 600 steps (61 min on 2 cores):
  python -m experiments.train --config=configs/deepnorm_1000L.py \
      --config.opt.lr=2e-4 --config.opt.warmup_steps=50 --config.train.steps=600
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("deepnorm_1000L", num_layers=1000, arg=arg)
  c.model.residual = "deepnorm"
  c.model.init = "deepnorm"
  return c
