"""Named experiments' common ground: the scales a named config runs at (cpu, paper, smoke,
wide) and the schema's defaults, which live in the library (resnorm_jax/config/schema.py:
every key, its default and its description; `python -m resnorm_jax.config` lists them).

Named experiments (configs/*.py) start from `get_config()` or `experiment()` here and
override a few keys. Run: python -m experiments.train --config=configs/base.py
"""

import os

from ml_collections import config_dict

from resnorm_jax.config import cli  # no JAX import
from resnorm_jax.config.schema import get_config  # noqa: F401 (named configs: base.get_config())

# Keys that moved: old dotted key -> new one (train.remat, train.scan_unroll and train.dtype
# are model settings: model.*). The CLI refuses an old key naming the new one; a config.json
# or checkpoint written before the move is read at the new place (the sweep tool's
# skip-finished comparison, the checkpoint's frozen-config check). Kept in
# resnorm_jax/config/cli.py,
# which needs it without importing configs/.
MOVED_KEYS = cli.MOVED_KEYS

# Scales a named experiment runs at: `cpu` (default: about 15 minutes or less on a 2-core
# CPU, small width, still showing the effect), `paper` (cluster scale: Xiong/DeepNet widths,
# bfloat16, a large batch, many steps), `smoke` (seconds: wiring checks in tests) and `wide`
# (one step toward scale on the CPU: 4x the width, BPE tokens, 2,000 steps; docs/width_step/).
SCALES = ("cpu", "paper", "smoke", "wide")
DATA_ENV = "RESNORM_DATA"  # the prepared token folder the :paper scale trains on
# The :wide scale's corpus: the stdlib source in a 4,096-id BPE, made by one command
# (resnorm_jax/data/prepare.py RECIPES): python -m experiments.prepare_data --input=stdlib
# --tokenizer=train:4096 --val_fraction=0.1 --out=data/prepared/stdlib_bpe4096
WIDE_DATA = "data/prepared/stdlib_bpe4096"
WIDE_VOCAB = 4096  # train:4096's ids (a multiple of 128: no padding)


def experiment(name: str, num_layers: int, arg: str | None = None) -> config_dict.ConfigDict:
  """Base config for a named depth experiment at scale `arg` (None/'' means 'cpu')."""
  scale = arg or "cpu"
  if scale not in SCALES:
    raise ValueError(f"config argument {scale!r} is not a scale; valid: {', '.join(SCALES)}")
  c = get_config()
  c.name = name if scale == "cpu" else f"{name}-{scale}"
  c.model.num_layers = num_layers
  c.opt.lr = 1e-3  # Adam, b2 0.98 (Xiong's), no warmup: the setting the failures show in
  if scale == "cpu":
    c.model.d_model, c.model.num_heads, c.model.d_ff = 64, 4, 256
    c.train.batch_size, c.train.seq_len = 16, 128
    c.train.steps = 200 if num_layers <= 200 else 150
    c.model.remat = "full" if num_layers > 24 else "none"  # less memory deep (docs/benchmarks.md)
    c.train.eval_every, c.train.log_every = 50, 10
    c.train.checkpoint_every = 50
    if num_layers > 200:  # 1000 layers: ~5-8 s/step on 2 cores (batch 8 x 64)
      c.train.batch_size, c.train.seq_len = 8, 64
      c.train.eval_every, c.train.log_every, c.train.checkpoint_every = 20, 5, 10
      c.train.eval_batches = 2
  elif scale == "paper":
    # Xiong 2020 / DeepNet widths (d 512, FFN 2048, 8 heads), paper-sized token batches.
    c.model.d_model, c.model.num_heads, c.model.d_ff = 512, 8, 2048
    c.model.max_seq_len = 512
    c.train.batch_size, c.train.seq_len = 256, 512
    c.train.steps = 50_000
    c.model.remat = "full"
    c.model.dtype = "bfloat16"
    c.train.eval_every, c.train.log_every, c.train.checkpoint_every = 1000, 100, 1000
    c.train.eval_batches = 16
    c.opt.lr = 5e-4
    c.mesh.data, c.mesh.fsdp = 1, -1  # shard params and optimizer state over all devices
    # Real text: a folder made by experiments.prepare_data (e.g. FineWeb-Edu in GPT-2
    # tokens), named by RESNORM_DATA or --config.data.path; the vocabulary is its
    # tokenizer's (GPT-2: 50257, padded to 50304). The stdlib corpus (31 MB: 50k steps of
    # 131k tokens see it ~200 times) only with --config.data.source=stdlib
    # --config.data.allow_stdlib=true.
    c.data.source, c.data.path = "tokens", os.environ.get(DATA_ENV, "")
    c.data.allow_stdlib = False
    c.model.vocab_size = 0
  elif scale == "wide":
    wide_scale(c)
  else:  # smoke
    smoke_shape(c)
    c.model.num_layers = min(num_layers, 2)
    c.train.steps = 6
    c.train.eval_every, c.train.log_every, c.train.checkpoint_every = 3, 3, 3
    c.train.eval_batches = 1
  return c


def smoke_shape(c: config_dict.ConfigDict) -> config_dict.ConfigDict:
  """The one tiny shape for wiring checks (2 layers, width 32, batch 8 x 32): shared by the
  `:smoke` scale of every named experiment and configs/smoke.py, which differ only in how
  many steps they run and how often they log."""
  c.model.num_layers = 2
  c.model.d_model, c.model.num_heads, c.model.d_ff, c.model.max_seq_len = 32, 2, 64, 32
  c.train.batch_size, c.train.seq_len = 8, 32
  c.train.final_eval_tokens = 1024  # wiring only: a few eval batches, not a verdict
  c.diag.depth_images = "end"  # a run of seconds: drawn once, at its end
  return c


def wide_scale(c: config_dict.ConfigDict) -> config_dict.ConfigDict:
  """The :wide scale: d_model 256, 4 heads, FFN 1024, batch 32 x 256 BPE tokens of the stdlib
  corpus (WIDE_DATA; another folder: --config.data.path=DIR, e.g. data/prepared/
  shakespeare_bpe4096), 2,000 steps, an eval every 50 (the escape step's resolution)."""
  c.model.d_model, c.model.num_heads, c.model.d_ff = 256, 4, 1024
  c.model.max_seq_len = 256
  c.train.batch_size, c.train.seq_len = 32, 256
  c.train.steps = 2000
  c.model.remat = "full" if c.model.num_layers > 24 else "none"  # as the cpu scale
  c.train.eval_every, c.train.log_every, c.train.checkpoint_every = 50, 10, 250
  # The vocabulary is set, not read from the folder (model.vocab_size=0), so the config and
  # a sweep of it validate where the folder is not made yet; a missing folder is refused when
  # the run loads its data, before compiling, with the command that makes it.
  c.data.source, c.data.path = "tokens", WIDE_DATA
  c.model.vocab_size = WIDE_VOCAB
  return c
