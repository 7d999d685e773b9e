"""nGPT (Loshchilov 2024, arXiv 2410.01131): the normalized Transformer. Hidden states,
embeddings and weight rows on the unit sphere; each sub-layer moves the state
h <- Norm(h + alpha (Norm(F(h)) - h)) with learnable per-channel alpha (init 0.05); q, k unit
per head times s_qk, softmax scale sqrt(d_k); SwiGLU with s_u, s_v sqrt(d); logits times s_z;
no LayerNorm; the weights projected back onto the sphere after every optimizer step.
RoPE, SwiGLU and an untied head as in the paper; no weight decay, no warmup (the defaults).

Run (about 15 minutes or less on a 2-core CPU):
  python -m experiments.train --config=configs/ngpt_96L.py
Cluster scale (d 512, batch 256 x 512 tokens, bfloat16; see README for launchers):
  python -m experiments.train --config=configs/ngpt_96L.py:paper

Expected: trains at depth without warmup (the paper reports 4-20x fewer steps than GPT at
0.5-1B parameters; at this width and length that is not what the map measures).
"""

from configs import base


def get_config(arg: str | None = None):
  c = base.experiment("ngpt_96L", num_layers=96, arg=arg)
  c.model.residual = "ngpt"
  c.model.norm_position = "none"  # no LayerNorm: the normalizations are nGPT's own
  c.model.norm = "none"
  c.model.position = "rope"
  c.model.ffn_activation = "swiglu"
  c.model.tie_embeddings = False
  c.model.ngpt_alpha_init = 0.05  # the paper's alpha_A,init = alpha_M,init
  c.opt.weight_decay = 0.0  # the paper removes it: the weights live on the sphere
  c.opt.warmup_steps = 0  # and warmup
  return c
