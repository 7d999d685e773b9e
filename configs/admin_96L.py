"""Admin (Liu 2020, arXiv 2004.08249): Post-LN, x_i = LN(omega_i * x_(i-1) + F_i(x_(i-1))),
omega_i per channel and learnable, initialized by a profiling pass at init:
omega_i = sqrt(Var[x_0] + sum_(j<i) Var[F_j]) (resnorm_jax/model/variants/admin.py); config.json
records
the omegas (resolved_model.admin_omega).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/admin_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/admin_96L.py:paper

Expected: Post-LN's placement, but the skip path outweighs each branch more and more with
depth (omega about sqrt(i)), so the early model update stays bounded, as DeepNorm's does.
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("admin_96L", num_layers=96, arg=arg)
  c.model.norm_position = "post"
  c.model.residual = "admin"
  return c
