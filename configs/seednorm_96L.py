"""SeeDNorm (Cai et al. 2025, arXiv 2510.22777): every LayerNorm of Pre-LN replaced by
[tanh(x . beta) alpha + gamma] * x / RMS(x), RMSNorm whose per-channel scale depends on the
input through one scalar per token; alpha = gamma = 1 and beta = 0 at init (RMSNorm then);
final norm the same.

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/seednorm_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/seednorm_96L.py:paper
Wiring check (seconds):
  python -m experiments.train --config=configs/seednorm_96L.py:smoke

Expected: trains like Pre-LN with RMSNorm or a little better (the paper reports it above
RMSNorm, LayerNorm and DyT).
"""

from configs import base

# How figures and tables draw and name it (resnorm_jax/analysis/style.py reads these).
LABEL = "SeeDNorm"
COLOR = "#40004b"


def get_config(arg: str | None = None):
  c = base.experiment("seednorm_96L", num_layers=96, arg=arg)
  c.model.norm = "seednorm"
  c.model.norm_position = "pre"
  return c
