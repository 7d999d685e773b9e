"""nanoGPT's CPU shakespeare_char model, the reference shape of scripts/benchmark.py.

nanoGPT (README, "I only have a macbook"): python train.py config/train_shakespeare_char.py
  --device=cpu --compile=False --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
  --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0
Here the same shape: Pre-LN, GELU (d_ff 4d), learned positions, tied embeddings, no linear
biases, AdamW (weight decay 0.1, b2 0.99, clip 1.0, cosine with 100 warmup steps), on the
same text at byte level (vocab 256; nanoGPT's character vocabulary is 65).

python scripts/benchmark.py --config=configs/nanogpt_char.py      # 4 layers
python scripts/benchmark.py --config=configs/nanogpt_char.py:24   # 24 layers
python -m experiments.train --config=configs/nanogpt_char.py      # train it
python -m experiments.train --config=configs/nanogpt_char.py --config.data.path=my.txt  # your text
  (a text file or glob; or a folder made by experiments.prepare_data, its vocabulary from it)
"""

import os

from configs import base

# Shipped inside the repository (data/README.md), so every clone trains on the same text.
SHAKESPEARE = os.path.join(
  os.path.dirname(os.path.abspath(__file__)), "..", "data", "tinyshakespeare.txt"
)


def get_config(arg: str | None = None):
  c = base.get_config()
  layers = int(arg) if arg else 4
  c.name = f"nanogpt_char_{layers}L"
  m = c.model
  m.num_layers, m.d_model, m.num_heads, m.d_ff = layers, 128, 4, 512
  m.max_seq_len, m.norm, m.norm_position, m.init = 64, "layernorm", "pre", "gpt2"
  m.scan_unroll = layers  # no loop over layers: faster at this depth on CPU (same values)
  t = c.train
  t.batch_size, t.seq_len, t.steps = 12, 64, 2000
  t.log_every, t.eval_every, t.eval_batches, t.checkpoint_every = 10, 250, 20, 1000
  o = c.opt
  o.name, o.lr, o.b2, o.weight_decay, o.clip_norm = "adamw", 1e-3, 0.99, 0.1, 1.0
  o.schedule, o.warmup_steps, o.min_lr_ratio = "cosine", 100, 0.1
  c.data.source, c.data.path = "text", os.path.normpath(SHAKESPEARE)
  return c
