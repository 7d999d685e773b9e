"""The config schema: every key, its default and what it means, declared once: the model
section's in resnorm_jax/config/model_keys.py (the core keys) and in the variant modules (their
own keys, read by variant_keys.py); every other key here, the comment on or above it its
description (`python -m resnorm_jax.config` lists them).

Named experiments (configs/*.py) start from `get_config()` and override a few keys; the
library reads defaults from here and never imports configs/. A config.json written before a
key existed loads with the key at its default here.
"""

from __future__ import annotations

from ml_collections import config_dict

from resnorm_jax.config import model_keys
from resnorm_jax.files import pysource

placeholder = config_dict.placeholder


def _model_section(c: config_dict.ConfigDict) -> None:
  """The model.* keys (get_config's first section), in their order: the core keys declared in
  model_keys.py, the variants' own keys (declared in their variant modules, variant_keys.py)
  among them. An unset default is a placeholder of the key's type."""
  m = c.model = config_dict.ConfigDict()
  for row in model_keys.rows():
    m[row.key] = placeholder(row.type) if row.default is None else row.default


def get_config() -> config_dict.ConfigDict:
  """Returns the default config: a 6-layer Post-LN byte-level model on stdlib source."""
  c = config_dict.ConfigDict()
  c.name = "base"  # run name prefix: runs/<name>-<timestamp>
  c.seed = 0  # parameter init and data order

  _model_section(c)

  t = c.train = config_dict.ConfigDict()
  t.steps = 300  # optimizer steps of the run (its budget)
  t.batch_size = 16  # global batch, sequences
  t.seq_len = 128  # tokens per sequence
  t.log_every = 10  # steps between metrics.jsonl / TensorBoard records
  t.eval_every = 100  # steps between periodic held-out evals (the escape step's resolution)
  t.eval_batches = 4  # held-out batches of each periodic eval
  # The end-of-run eval (the verdict's loss) uses at least this many held-out tokens: 0.05
  # nats near the plateau cannot be told apart on 8k tokens.
  t.final_eval_tokens = 16384
  t.checkpoint_every = 100  # steps between checkpoints
  t.keep_checkpoints = 2  # newest checkpoints kept
  # Weight of the auxiliary z-loss, mean log(sum exp logits)^2 (PaLM; Wortsman et al. 2023's
  # fix for output-logit divergence; 1e-4 in both): 0 is off (the default).
  t.z_loss = 0.0
  # A stop rule (a JSON file: docs/early_warning/stop_rule_k100.json) applied once, after step
  # k's row is logged; a run it judges doomed ends stopped_early with a checkpoint at k, to go
  # on with the key off (resnorm_jax/train/stop_rule.py). "" : off (the default).
  t.stop_when = ""

  o = c.opt = config_dict.ConfigDict()
  # adam | adamw | sgd | muon (Newton-Schulz-orthogonalized momentum on the hidden matrices,
  # Adam on the rest) | adam_atan2 (Adam's step as atan2(m, sqrt(v)), no eps)
  o.name = "adam"
  o.lr = 1e-3  # peak learning rate
  o.b1 = 0.9  # Adam's first-moment decay
  o.b2 = 0.98  # Adam's second-moment decay (Xiong's 0.98)
  o.eps = 1e-8  # Adam's epsilon
  # --- Muon (opt.name=muon; resnorm_jax/train/optimizers/muon.py) ---
  o.muon_momentum = 0.95  # Muon's (Nesterov) momentum on the hidden matrices (KellerJordan/Muon)
  o.muon_ns_steps = 5  # Newton-Schulz iterations of each update
  # moonlight: the orthogonalized update x 0.2 sqrt(max(fan_in, fan_out)), its RMS matched to
  # Adam's, so one opt.lr serves both groups (Liu et al. 2025) | kellerjordan: x sqrt(max(1,
  # fan_out / fan_in)), KellerJordan/Muon's (set muon_adam_lr_ratio: its example 3e-4 / 0.02)
  o.muon_scale = "moonlight"
  o.muon_adam_lr_ratio = 1.0  # under muon, the Adam group's peak lr over opt.lr
  o.weight_decay = 0.0  # decoupled (adamw, muon, adam_atan2) or added to the gradient (adam, sgd)
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
  d.seed = placeholder(int)  # the data order's seed apart from `seed` (init); unset: `seed`

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
  diag.mechanism = False  # + attention entropy, first-token mass, update ratio: step memory
  # The per-layer statistics' depth images (TensorBoard train_depth/*): eval: redrawn at each
  # evaluation and at the end | end: at the end only | none: never (the chosen layers'
  # scalars stay). A drawing takes about 0.2 CPU-seconds per statistic (matplotlib, 2-core CPU).
  diag.depth_images = "eval"

  dist = c.dist = config_dict.ConfigDict()
  dist.initialize = "auto"  # auto | true | false: call jax.distributed.initialize()
  dist.coordinator_address = ""  # host:port of process 0 (empty: from the environment)
  dist.num_processes = 0  # 0: from the environment
  dist.process_id = -1  # -1: from the environment
  # A process that stops sending heartbeats this long (killed, host lost) ends every other
  # process with an error instead of leaving it in a collective forever; 0: JAX's (100 s).
  dist.heartbeat_timeout_seconds = 0
  return c


def describe() -> list[tuple[str, object, str]]:
  """(dotted key, default, description) of every key, in the schema's order: the model
  section's from their declarations (model_keys.rows()), every other key's the comment on its
  line, or the comment lines right above it (read from this file's source, where it is written
  once)."""
  import ast
  import io
  import tokenize

  with open(__file__, encoding="utf-8") as f:
    source = f.read()
  comments: dict[int, str] = {}
  for tok in tokenize.generate_tokens(io.StringIO(source).readline):
    if tok.type == tokenize.COMMENT:
      comments[tok.start[0]] = tok.string.lstrip("#").strip()
  lines = source.splitlines()
  func = next(
    n
    for n in pysource.parse(source).body
    if isinstance(n, ast.FunctionDef) and n.name == "get_config"
  )
  sections: dict[str, str] = {}  # local name -> "train." etc.
  defaults = _flat(get_config().to_dict())
  out = [(f"model.{r.key}", defaults[f"model.{r.key}"], r.description) for r in model_keys.rows()]
  for node in func.body:
    if not (isinstance(node, ast.Assign) and isinstance(node.targets[-1], ast.Attribute)):
      continue
    target = node.targets[-1]
    if not isinstance(target.value, ast.Name):
      continue
    owner = sections.get(target.value.id, "")
    key = owner + target.attr
    if len(node.targets) == 2 and isinstance(node.targets[0], ast.Name):  # t = c.train = ...
      sections[node.targets[0].id] = key + "."
      continue
    if key not in defaults:
      continue
    text = comments.get(node.lineno, "")
    if not text or lines[node.lineno - 1].lstrip().startswith("#"):
      above, row = [], node.lineno - 1
      while row in comments and lines[row - 1].lstrip().startswith("#"):
        if not comments[row].startswith("---"):  # a section heading, not a description
          above.insert(0, comments[row])
        row -= 1
      text = " ".join(above) if not text else text
    out.append((key, defaults[key], text))
  return out


def _flat(tree: dict, prefix: str = "") -> dict[str, object]:
  out: dict[str, object] = {}
  for k, v in tree.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out
