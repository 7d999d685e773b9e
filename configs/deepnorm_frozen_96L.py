"""Control: DeepNorm with its LayerNorm gains and biases and its embeddings frozen at init.

DeepNet's bound on the model update covers the sub-layer weights, not the 4N norm
parameters or a tied embedding. Freezing them (opt.freeze, resnorm_jax/train/param_groups.py)
shows how much of DeepNorm's measured update, and of its plateau at 1000 layers and lr
1e-3, comes from those parameters.

python -m experiments.train --config=configs/deepnorm_frozen_96L.py --config.model.num_layers=1000
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("deepnorm_frozen_96L", num_layers=96, arg=arg)
  c.model.residual, c.model.init = "deepnorm", "deepnorm"
  c.opt.freeze = "norm,embed"
  return c
