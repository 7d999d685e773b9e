"""The core model keys: every model.<key> the model itself reads (not one variant), declared once
here, each with its type, default, choices, description, whether results depend on it, whether
checkpoints predate it and its TensorBoard HParams column.

Generated from this table: the schema's model section (schema.py: the keys in this order, the
variants' own keys after VARIANTS_AFTER, and their descriptions for `python -m
resnorm_jax.config model.`), ModelConfig's fields and its choice checks
(resnorm_jax/model/config_types.py), the same-experiment policy's speed-only model keys and the
model keys checkpoints predate (same_experiment.py) and the HParams table's model columns
(resnorm_jax/train/hparams.py). No JAX and no model import here: the variants' own keys are
declared in their modules and read from their source (variant_keys.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from resnorm_jax.config import variant_keys
from resnorm_jax.config.keys import Column, Key, Registry

# Each core key is a Key (keys.py), the one record the variants' own keys are too.
K = Key
NORMS = Registry(
  "resnorm_jax/model/variants/: the Norm variants (the built-in ones in standard.py)"
)
PLACEMENTS = Registry("resnorm_jax/model/variants/: the Placement variants")
RESIDUALS = Registry("resnorm_jax/model/variants/: the Residual variants")
INITS = Registry("resnorm_jax/model/initializers.py INITS")
DEPTH_PARAMS = Registry("resnorm_jax/model/depth_param.py DEPTH_PARAMS")
WIDTH_PARAMS = Registry("resnorm_jax/model/width_param.py WIDTH_PARAMS")

# The core model keys, in the schema's (and config.json's) order.
KEYS: dict[str, Key] = {
  "vocab_size": K(
    256,
    "byte-level by default; 0: from the data (256 for bytes; a folder made by "
    "experiments.prepare_data: its tokenizer's size padded to a multiple of 128)",
  ),
  "num_layers": K(
    6, "N decoder layers (each: attention + FFN sub-layer)", hparam=Column("num_layers", 60)
  ),
  "d_model": K(64, "width of the residual stream", hparam=Column("d_model", 70)),
  "num_heads": K(
    4, "attention heads (head dim d_model / num_heads)", hparam=Column("num_heads", 80)
  ),
  "d_ff": K(256, "hidden width of the FFN", hparam=Column("d_ff", 90)),
  "ffn_activation": K(
    "gelu",
    "{choices}",
    choices=("gelu", "relu", "swiglu"),
    hparam=Column("ffn_activation", 100),
  ),
  "max_seq_len": K(128, "size of the learned position table"),
  "position": K(
    "learned", "{choices}", choices=("learned", "rope"), hparam=Column("position", 110)
  ),
  "tie_embeddings": K(True, "head = embedding^T"),
  "qk_norm": K(False, "RMSNorm on queries and keys per head", hparam=Column("qk_norm", 151)),
  "attn_out_scale": K(
    1.0,
    "a fixed factor on the attention branch's output (after W_o), > 0; 0.5 halves the branch "
    "as a sigmoid gate near 0.5 does at init (the control of docs/stabilizers' gate cells)",
    added=True,
    hparam=Column("attn_out_scale", 155),
  ),
  "norm": K(
    "layernorm",
    "layernorm | rmsnorm | batchnorm | dyt | derf | seednorm | none",
    choices=NORMS,
    hparam=Column("norm", 10),
  ),
  "norm_position": K(
    "post",
    "post | pre | peri | none | subln | lnscale | mix | hybridnorm (docs/variants.md)",
    choices=PLACEMENTS,
    hparam=Column("norm_position", 20),
  ),
  "final_norm": K(
    "auto",
    "{choices}. auto: on where a norm sits in front of each branch (the placement's pre_like: "
    "pre, peri, subln, mix, lnscale), off for post and none.",
    choices=("auto", "true", "false"),
    field_type=bool,
  ),
  "residual": K(
    "add",
    "add | deepnorm | scaled | rezero | layerscale | gated | none | admin | hyperconn | ngpt | "
    "mhc | denseformer | valueres",
    choices=RESIDUALS,
    hparam=Column("residual", 30),
  ),
  "block": K(
    "sequential", "{choices}", choices=("sequential", "parallel"), hparam=Column("block", 40)
  ),
  "init": K(
    "xavier",
    "xavier | normal | gpt2 | deepnorm | magneto",
    choices=INITS,
    hparam=Column("init", 50),
  ),
  "norm_eps": K(1e-5, "epsilon of every norm's variance"),
  "residual_alpha": K(None, "deepnorm alpha; unset: (2N)^(1/4)", type=float),
  "branch_scale": K(None, "scaled residual s; unset: 1/sqrt(2N)", type=float),
  "rezero_init": K(0.0, "ReZero scalar init"),
  "layerscale_init": K(1e-4, "LayerScale per-channel init (CaiT: 1e-5 at 24 layers)"),
  "init_beta": K(
    None,
    "deepnorm init beta; unset: (8N)^(-1/4). magneto's gamma; unset: sqrt(ln 2N).",
    type=float,
  ),
  "init_std": K(0.02, "std of the normal and gpt2 rules"),
  "batchnorm_momentum": K(0.99, "running-average decay of batchnorm"),
  "dyt_alpha_init": K(0.5, "DyT's learnable scalar alpha"),
  "attention": K(
    "dense",
    "dense (einsums, probabilities materialised; the default) | fused "
    "(jax.nn.dot_product_attention: cuDNN flash on a GPU in bfloat16, XLA elsewhere) | xla | "
    "cudnn | splash (JAX's Pallas splash kernel, TPU only; sequence length a multiple of 128)",
    choices=("dense", "fused", "xla", "cudnn", "splash"),
    added=True,
  ),
  "remat": K(
    "none",
    "{choices} (what the scanned layer saves)",
    choices=("none", "full", "dots", "dots_no_batch"),
    affects_results=False,  # the same values (tests/test_model.py, test_perf_equivalence.py)
  ),
  "scan_unroll": K(
    1,
    "Layers per iteration of the scanned stack; >= num_layers: no loop at all (no stacked "
    "activations, but compile time then grows with depth).",
    affects_results=False,
  ),
  "dtype": K(
    "float32",
    "{choices} (compute; norms and softmax stay float32)",
    choices=("float32", "bfloat16"),
    hparam=Column("dtype", 250),
  ),
  "depth_param": K(
    "sp",
    "sp (standard; the default) | depth_mup (branches x m^-1/2, hidden Adam lr x m^-1/2) | "
    "completep (branches x m^-1, hidden lr unchanged), m = num_layers / base_depth; hidden Adam "
    "eps x m^-alpha. At num_layers == base_depth all three are the same run.",
    choices=DEPTH_PARAMS,
    added=True,
    hparam=Column("depth_param", 120),
  ),
  "base_depth": K(
    6,
    "L_base: the depth the lr (and every other hyperparameter) is tuned at",
    added=True,
    hparam=Column("base_depth", 130),
  ),
  "width_param": K(
    "sp",
    "sp (standard; the default) | mup (hidden matrices: init std x m^-1/2, Adam lr x m^-1, "
    "weight decay x m; every Adam eps x m^-1; logits x 1/m; attention scores 1/d_head), m = "
    "d_model / base_width. Combines with depth_param (CompleteP's full table).",
    choices=WIDTH_PARAMS,
    added=True,
    hparam=Column("width_param", 140),
  ),
  "base_width": K(
    64,
    "the d_model the lr (and every other hyperparameter) is tuned at",
    added=True,
    hparam=Column("base_width", 150),
  ),
}
# The variants' own keys (variant_keys.declared()) sit in the model section right after this key.
VARIANTS_AFTER = "dyt_alpha_init"


@dataclasses.dataclass(frozen=True)
class Row:
  """One model.<key> of the schema: a core key's or a variant's own (`module`: its module)."""

  key: str
  type: type
  default: Any
  description: str
  module: str | None = None


def rows() -> list[Row]:
  """Every model key of the schema in its order: the core keys, the variants' own after
  VARIANTS_AFTER (described "<module>: <description>")."""
  out = []
  for key, decl in KEYS.items():
    out.append(Row(key, decl.type, decl.default, decl.text))
    if key == VARIANTS_AFTER:
      out += [
        Row(k, d.type, d.default, f"{d.module}: {d.description}", d.module)
        for k, d in variant_keys.declared().items()
      ]
  return out


def speed_only() -> tuple[str, ...]:
  """The dotted model keys no result depends on (affects_results=False)."""
  return tuple(f"model.{k}" for k, d in KEYS.items() if not d.affects_results)


def added() -> tuple[str, ...]:
  """The dotted core model keys checkpoints predate (added=True)."""
  return tuple(f"model.{k}" for k, d in KEYS.items() if d.added)


def every() -> dict[str, Key]:
  """{key: Key} of every model key: the core ones, then the variants' own as their modules'
  source declares them (their checks left out: the registry holds those)."""
  return {**KEYS, **{k: d.key for k, d in variant_keys.declared().items()}}


def hparam_columns() -> list[tuple[int, str, str]]:
  """(order, column, dotted key) of every model key the HParams table shows: the core keys'
  and the variants' own declared with an hparam Column."""
  return [(d.hparam.order, d.hparam.name, f"model.{k}") for k, d in every().items() if d.hparam]
