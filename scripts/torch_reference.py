"""A minimal nanoGPT-like PyTorch (eager, float32) model, timed at scripts/benchmark.py's shape.

python scripts/torch_reference.py [--layers=4] [--d_model=128] [--heads=4] [--seq_len=64]
    [--batch=12] [--vocab=65] [--steps=50] [--warmup=5] [--threads=0] [--out=torch.json]

Same model as configs/nanogpt_char.py (and nanoGPT's train_shakespeare_char on CPU): Pre-LN,
GELU MLP of 4d, learned positions, tied embeddings, no linear biases, causal
scaled_dot_product_attention, AdamW (weight decay 0.1 on matrices, b2 0.99), gradient
clipping at 1.0; one training iteration = sample a batch, forward, backward, clip, step, and
read the loss (nanoGPT with --log_interval=1). A same-machine baseline for the JAX step.
Not a dependency of the library, and it imports nothing from it (the standard library, torch
and numpy only: tests/test_standalone_scripts.py): `pip install -r requirements-torch.txt`
(the versions it was measured with) in any Python 3 environment and run it from anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")  # shipped: data/README.md


def write_json(path: str, obj: dict) -> None:
  """Indented, key-sorted JSON renamed into place, as the project's own result files; kept
  here so that the script needs nothing but torch and numpy."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(obj, f, indent=2, sort_keys=True, default=str)
  os.replace(path + ".tmp", path)


class SelfAttention(nn.Module):
  def __init__(self, d: int, heads: int):
    super().__init__()
    self.heads = heads
    self.qkv = nn.Linear(d, 3 * d, bias=False)
    self.proj = nn.Linear(d, d, bias=False)

  def forward(self, x):
    b, t, d = x.shape
    q, k, v = self.qkv(x).split(d, dim=2)
    q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
  def __init__(self, d: int, heads: int):
    super().__init__()
    self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
    self.attn = SelfAttention(d, heads)
    self.fc = nn.Linear(d, 4 * d, bias=False)
    self.fc_proj = nn.Linear(4 * d, d, bias=False)

  def forward(self, x):
    x = x + self.attn(self.ln_1(x))
    return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
  def __init__(self, vocab: int, seq_len: int, layers: int, d: int, heads: int):
    super().__init__()
    self.wte = nn.Embedding(vocab, d)
    self.wpe = nn.Embedding(seq_len, d)
    self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
    self.ln_f = nn.LayerNorm(d)
    self.head = nn.Linear(d, vocab, bias=False)
    self.head.weight = self.wte.weight  # tied
    for name, p in self.named_parameters():
      if p.dim() == 2:  # GPT-2 init: 0.02, residual projections scaled by 1/sqrt(2L)
        std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
        nn.init.normal_(p, 0.0, std)

  def forward(self, idx, targets):
    t = idx.shape[1]
    x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
    for block in self.blocks:
      x = block(x)
    logits = self.head(self.ln_f(x))
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def _tokens(vocab: int) -> np.ndarray:
  """Characters of tinyshakespeare (nanoGPT's char vocabulary), or random ids without it."""
  if os.path.isfile(SHAKESPEARE):
    text = open(SHAKESPEARE, encoding="utf-8").read()
    table = {c: i for i, c in enumerate(sorted(set(text)))}
    data = np.array([table[c] for c in text], np.int64) % vocab
  else:
    data = np.random.default_rng(0).integers(0, vocab, 1_000_000)
  return data


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--layers", type=int, default=4)
  p.add_argument("--d_model", type=int, default=128)
  p.add_argument("--heads", type=int, default=4)
  p.add_argument("--seq_len", type=int, default=64)
  p.add_argument("--batch", type=int, default=12)
  p.add_argument("--vocab", type=int, default=65)
  p.add_argument("--steps", type=int, default=50)
  p.add_argument("--warmup", type=int, default=5)
  p.add_argument("--threads", type=int, default=0, help="torch threads; 0: torch's default")
  p.add_argument("--out", default="")
  a = p.parse_args()
  if a.threads:
    torch.set_num_threads(a.threads)
  torch.manual_seed(0)
  data = _tokens(a.vocab)
  rng = np.random.default_rng(0)

  def get_batch():
    ix = rng.integers(0, len(data) - a.seq_len, a.batch)
    x = torch.from_numpy(np.stack([data[i : i + a.seq_len] for i in ix]))
    y = torch.from_numpy(np.stack([data[i + 1 : i + 1 + a.seq_len] for i in ix]))
    return x, y

  model = GPT(a.vocab, a.seq_len, a.layers, a.d_model, a.heads)
  decay = [p for p in model.parameters() if p.dim() >= 2]
  no_decay = [p for p in model.parameters() if p.dim() < 2]
  opt = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
    lr=1e-3,
    betas=(0.9, 0.99),
  )
  times = []
  load_before = os.getloadavg()
  for i in range(a.warmup + a.steps):
    t0 = time.perf_counter()
    x, y = get_batch()
    loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    loss_value = loss.item()
    if i >= a.warmup:
      times.append(time.perf_counter() - t0)
  times.sort()
  med = statistics.median(times)
  tokens = a.batch * a.seq_len
  r = {
    "torch": torch.__version__,
    "threads": torch.get_num_threads(),
    "shape": vars(a),
    "params": sum(p.numel() for p in model.parameters()),
    "iter_s": {
      "median": med,
      "p10": times[int(0.1 * (len(times) - 1))],
      "p90": times[int(0.9 * (len(times) - 1))],
      "n": len(times),
    },
    "tokens_per_second": tokens / med,
    "final_loss": loss_value,
    "loadavg": [load_before[0], os.getloadavg()[0]],
    "nproc": os.cpu_count(),
    "python": platform.python_version(),
    "command": " ".join(["scripts/torch_reference.py", *sys.argv[1:]]),
  }
  print(
    f"torch {r['torch']} eager, {r['threads']} threads: {a.layers} layers, d {a.d_model}, "
    f"{a.heads} heads, seq {a.seq_len}, batch {a.batch}, vocab {a.vocab}; "
    f"{r['params']:,} params\n"
    f"iteration {med * 1e3:.2f} ms median (p10 {r['iter_s']['p10'] * 1e3:.2f}, "
    f"p90 {r['iter_s']['p90'] * 1e3:.2f}, n {len(times)}); {r['tokens_per_second']:,.0f} tokens/s; "
    f"load {r['loadavg'][0]:.2f} -> {r['loadavg'][1]:.2f}; loss {loss_value:.3f}"
  )
  if a.out:
    write_json(a.out, r)


if __name__ == "__main__":
  main()
