"""The config schema: every field, its default and what it means.

Named experiments (configs/*.py) start from `get_config()` here and override a few keys.
Run: python -m experiments.train --config=configs/base.py
"""

import os

from ml_collections import config_dict

from resnorm_jax.config import cli  # no JAX import

placeholder = config_dict.placeholder


def get_config() -> config_dict.ConfigDict:
  """Returns the default config: a 6-layer Post-LN byte-level model on stdlib source."""
  c = config_dict.ConfigDict()
  c.name = "base"  # run name prefix: runs/<name>-<timestamp>
  c.seed = 0  # parameter init and data order

  m = c.model = config_dict.ConfigDict()
  # byte-level by default; 0: from the data (256 for bytes; a folder made by
  # experiments.prepare_data: its tokenizer's size padded to a multiple of 128)
  m.vocab_size = 256
  m.num_layers = 6  # N decoder layers (each: attention + FFN sub-layer)
  m.d_model = 64
  m.num_heads = 4
  m.d_ff = 256
  m.ffn_activation = "gelu"  # gelu | relu | swiglu
  m.max_seq_len = 128  # size of the learned position table
  m.position = "learned"  # learned | rope
  m.tie_embeddings = True  # head = embedding^T
  m.qk_norm = False  # RMSNorm on queries and keys per head
  m.norm = "layernorm"  # layernorm | rmsnorm | batchnorm | dyt | derf | none
  # post | pre | peri | none | subln | lnscale | mix | hybridnorm (docs/variants.md)
  m.norm_position = "post"
  # auto | true | false. auto: on where a norm sits in front of each branch (the placement's
  # pre_like: pre, peri, subln, mix, lnscale), off for post and none.
  m.final_norm = "auto"
  # add | deepnorm | scaled | rezero | layerscale | gated | none | admin | hyperconn | ngpt |
  # mhc | denseformer | valueres
  m.residual = "add"
  m.block = "sequential"  # sequential | parallel
  m.init = "xavier"  # xavier | normal | gpt2 | deepnorm | magneto
  m.norm_eps = 1e-5
  m.residual_alpha = placeholder(float)  # deepnorm alpha; unset: (2N)^(1/4)
  m.branch_scale = placeholder(float)  # scaled residual s; unset: 1/sqrt(2N)
  m.rezero_init = 0.0  # ReZero scalar init
  m.layerscale_init = 1e-4  # LayerScale per-channel init (CaiT: 1e-5 at 24 layers)
  # deepnorm init beta; unset: (8N)^(-1/4). magneto's gamma; unset: sqrt(ln 2N).
  m.init_beta = placeholder(float)
  m.init_std = 0.02  # std of the normal and gpt2 rules
  m.batchnorm_momentum = 0.99  # running-average decay of batchnorm
  m.dyt_alpha_init = 0.5  # DyT's learnable scalar alpha
  m.mixln_post_fraction = 0.25  # mix: the first floor(fraction * N) layers are Post-LN
  m.hyperconn_rate = 4  # hyperconn: n copies of the residual stream (expansion rate)
  m.hyperconn_dynamic = False  # hyperconn: add the input-dependent (dynamic) weights
  m.mhc_rate = 4  # mhc: n copies of the residual stream (expansion rate)
  m.mhc_sinkhorn_iters = 20  # mhc: Sinkhorn-Knopp iterations projecting H_res (the paper's)
  m.mhc_dynamic = True  # mhc: per-token coefficients from the flattened stream (the paper's)
  m.hybridnorm_first_pre = False  # hybridnorm: the first layer Pre-Norm (HybridNorm*)
  m.valueres_lambda_init = 0.5  # valueres: weight of the first layer's values at init
  # dense (einsums, probabilities materialised; the default) | fused
  # (jax.nn.dot_product_attention: cuDNN flash on a GPU in bfloat16, XLA elsewhere) | xla | cudnn
  m.attention = "dense"
  m.remat = "none"  # none | full | dots | dots_no_batch (what the scanned layer saves)
  # Layers per iteration of the scanned stack; >= num_layers: no loop at all (no stacked
  # activations, but compile time then grows with depth).
  m.scan_unroll = 1
  m.dtype = "float32"  # float32 | bfloat16 (compute; norms and softmax stay float32)
  # --- nGPT (residual=ngpt, norm_position=none; resnorm_jax/model/variants/ngpt.py,
  # docs/variants.md) ---
  m.ngpt_alpha_init = 0.05  # the eigen learning rates alpha_A, alpha_M at init (the paper's)
  # --- depth parametrization (resnorm_jax/model/depth_param.py) ---
  # sp (standard; the default) | depth_mup (branches x m^-1/2, hidden Adam lr x m^-1/2)
  # | completep (branches x m^-1, hidden lr unchanged), m = num_layers / base_depth; hidden
  # Adam eps x m^-alpha. At num_layers == base_depth all three are the same run.
  m.depth_param = "sp"
  m.base_depth = 6  # L_base: the depth the lr (and every other hyperparameter) is tuned at

  t = c.train = config_dict.ConfigDict()
  t.steps = 300
  t.batch_size = 16  # global batch, sequences
  t.seq_len = 128
  t.log_every = 10
  t.eval_every = 100
  t.eval_batches = 4  # held-out batches of each periodic eval
  # The end-of-run eval (the verdict's loss) uses at least this many held-out tokens: 0.05
  # nats near the plateau cannot be told apart on 8k tokens.
  t.final_eval_tokens = 16384
  t.checkpoint_every = 100
  t.keep_checkpoints = 2
  # Weight of the auxiliary z-loss, mean log(sum exp logits)^2 (PaLM; Wortsman et al. 2023's
  # fix for output-logit divergence; 1e-4 in both): 0 is off (the default).
  t.z_loss = 0.0

  o = c.opt = config_dict.ConfigDict()
  o.name = "adam"  # adam | adamw | sgd
  o.lr = 1e-3  # peak learning rate
  o.b1 = 0.9
  o.b2 = 0.98
  o.eps = 1e-8
  o.weight_decay = 0.0  # decoupled (adamw) or added to the gradient (adam, sgd)
  o.schedule = "constant"  # constant | inverse_sqrt | cosine | linear
  o.warmup_steps = 0  # linear warmup; 0: step 0 already uses the full lr
  o.min_lr_ratio = 0.0  # cosine/linear decay floor as a fraction of lr
  o.clip_norm = 0.0  # global-norm clipping; 0: off
  # Parameter groups that never move (comma-separated; resnorm_jax/train/param_groups.py): norm,
  # norm_bias, norm_scale, residual, embed, attn, mlp, outside_layers, hidden. '' : none.
  o.freeze = ""

  d = c.data = config_dict.ConfigDict()
  d.source = "stdlib"  # stdlib | text | tokens
  d.path = ""  # text: file or glob; tokens: glob of .bin shards (train), see val_path
  d.val_path = ""  # tokens/text: held-out shards; unset: last files/10% of the train split
  d.val_fraction = 0.1  # stdlib/text: fraction of files (or bytes) held out
  # text/tokens without val_path: tail (the last val_fraction; every committed run) | hash
  # (text: pieces of each file held out by a hash of their bytes, as prepare_data's folders)
  d.split = "tail"
  d.allow_stdlib = True  # false (the :paper scale): data.source=stdlib is refused
  # random: window starts drawn with replacement (every committed CPU result) | epoch: each
  # epoch a fresh order of non-overlapping windows, every token seen once per epoch
  d.sampling = "random"

  mesh = c.mesh = config_dict.ConfigDict()
  mesh.data = -1  # data-parallel axis size; -1: the rest of the devices
  mesh.fsdp = 1  # parameter-sharded data-parallel axis
  mesh.tensor = 1  # tensor-parallel axis
  # Logical axis -> mesh axes. Weights carry logical names; only this table maps them.
  mesh.rules = (
    ("batch", ("data", "fsdp")),
    ("layers", None),
    ("embed", "fsdp"),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("vocab", "tensor"),
  )

  diag = c.diag = config_dict.ConfigDict()
  diag.per_layer = True  # log per-layer stream RMS, norm-input RMS and grad norms

  dist = c.dist = config_dict.ConfigDict()
  dist.initialize = "auto"  # auto | true | false: call jax.distributed.initialize()
  dist.coordinator_address = ""  # host:port of process 0 (empty: from the environment)
  dist.num_processes = 0  # 0: from the environment
  dist.process_id = -1  # -1: from the environment
  # A process that stops sending heartbeats this long (killed, host lost) ends every other
  # process with an error instead of leaving it in a collective forever; 0: JAX's (100 s).
  dist.heartbeat_timeout_seconds = 0
  return c


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
