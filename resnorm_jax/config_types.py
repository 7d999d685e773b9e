"""The typed model config: validated once from the loose ml_collections config."""

from __future__ import annotations

import dataclasses
from typing import Any

from resnorm_jax import residual as residual_lib
from resnorm_jax import variants
from resnorm_jax.initializers import INITS, magneto_gamma
from resnorm_jax.norms import NORMS

FINAL_NORMS = ("auto", "true", "false")
BLOCKS = ("sequential", "parallel")
ACTIVATIONS = ("gelu", "relu", "swiglu")
EMBED_POSITIONS = ("learned", "rope")
REMATS = ("none", "full", "dots", "dots_no_batch")
DTYPES = ("float32", "bfloat16")
# model.attention: `dense` (default, the einsum path every earlier run used), `fused`
# (jax.nn.dot_product_attention: cuDNN flash attention on a GPU in bfloat16, XLA elsewhere),
# or one implementation by name. ModelConfig holds the resolved one: dense | xla | cudnn.
ATTENTIONS = ("dense", "fused", "xla", "cudnn")
ATTENTION_IMPLEMENTATIONS = ("dense", "xla", "cudnn")


def _choice(key: str, value: Any, valid: tuple[str, ...]) -> str:
  if value not in valid:
    raise ValueError(f"{key}={value!r} is not valid; valid values: {', '.join(valid)}")
  return value


def _positive(key: str, value: Any) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise ValueError(f"{key}={value!r} must be a positive integer")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Every model axis, resolved: no 'auto', no unset constants."""

  vocab_size: int = 256
  num_layers: int = 6
  d_model: int = 64
  num_heads: int = 4
  d_ff: int = 256
  ffn_activation: str = "gelu"
  max_seq_len: int = 128
  position: str = "learned"
  tie_embeddings: bool = True
  qk_norm: bool = False
  norm: str = "layernorm"
  norm_position: str = "post"
  final_norm: bool = False
  residual: str = "add"
  block: str = "sequential"
  init: str = "xavier"
  norm_eps: float = 1e-5
  residual_alpha: float = 1.0
  branch_scale: float = 1.0
  rezero_init: float = 0.0
  layerscale_init: float = 1e-4
  init_beta: float = 1.0
  init_std: float = 0.02
  batchnorm_momentum: float = 0.99
  dyt_alpha_init: float = 0.5
  # The variants' own keys (declared with defaults and checks in resnorm_jax/variants/;
  # tests/test_registry.py keeps these defaults equal to the declarations).
  mixln_post_fraction: float = 0.25
  hyperconn_rate: int = 4
  hyperconn_dynamic: bool = False
  attention: str = "dense"
  ngpt_alpha_init: float = 0.05
  remat: str = "none"
  scan_unroll: int = 1
  dtype: str = "float32"

  @property
  def head_dim(self) -> int:
    return self.d_model // self.num_heads

  def __post_init__(self):
    _choice("model.norm", self.norm, NORMS)
    variants.placement(self.norm_position)  # ValueError naming the valid placements
    variants.residual(self.residual)  # ValueError naming the valid residuals
    _choice("model.block", self.block, BLOCKS)
    _choice("model.init", self.init, INITS)
    _choice("model.ffn_activation", self.ffn_activation, ACTIVATIONS)
    _choice("model.position", self.position, EMBED_POSITIONS)
    _choice("model.attention", self.attention, ATTENTION_IMPLEMENTATIONS)
    _choice("model.remat", self.remat, REMATS)
    _choice("model.dtype", self.dtype, DTYPES)
    for key in ("vocab_size", "num_layers", "d_model", "num_heads", "d_ff", "max_seq_len"):
      _positive(f"model.{key}", getattr(self, key))
    _positive("model.scan_unroll", self.scan_unroll)
    if self.d_model % self.num_heads:
      raise ValueError(
        f"model.num_heads={self.num_heads} does not divide model.d_model={self.d_model}"
      )
    if self.position == "rope" and self.head_dim % 2:
      raise ValueError(f"position=rope needs an even head dim, got {self.head_dim}")
    if not self.norm_eps > 0:
      raise ValueError(f"model.norm_eps={self.norm_eps!r} must be > 0")
    if not 0.0 <= self.batchnorm_momentum < 1.0:
      raise ValueError(f"model.batchnorm_momentum={self.batchnorm_momentum!r} not in [0, 1)")
    variants.validate(self)  # every variant's own keys, the selected variants' checks


def resolve_attention(name: str, platform: str, dtype: str, head_dim: int) -> str:
  """The attention implementation `model.attention=name` means on `platform` (dense|xla|cudnn).

  `fused` takes cuDNN only where its flash kernel applies (a GPU, bfloat16, a head dim that
  is a multiple of 8 and <= 128: every GPU generation has it), XLA otherwise; `cudnn` asked
  by name where it cannot run is refused before anything compiles.
  """
  _choice("model.attention", name, ATTENTIONS)
  cudnn_ok = platform == "gpu" and dtype == "bfloat16" and head_dim % 8 == 0 and head_dim <= 128
  if name == "fused":
    return "cudnn" if cudnn_ok else "xla"
  if name == "cudnn" and not cudnn_ok:
    raise ValueError(
      f"model.attention='cudnn' needs a GPU, model.dtype='bfloat16' and a head dim that is "
      f"a multiple of 8 and <= 128; here platform={platform!r}, model.dtype={dtype!r}, head "
      f"dim {head_dim}. Use model.attention='fused' (cuDNN where it applies, XLA elsewhere)"
    )
  return name


def model_config_from(
  config: Any, *, vocab_size: int | None = None, platform: str | None = None
) -> ModelConfig:
  """Resolves `config.model` into a validated ModelConfig.

  model.vocab_size=0 means "from the data" (data.resolve_vocab_size: 256 for bytes, a
  prepared folder's tokenizer padded to a multiple of 128); `vocab_size` overrides it.
  `platform` (default: JAX's default backend) decides what `fused` attention is.
  """
  m = config.model
  if vocab_size is None:
    data_cfg = config.get("data")
    if data_cfg is None:
      vocab_size = m.vocab_size
    else:
      from resnorm_jax import data as data_lib  # reads at most a manifest.json

      vocab_size = data_lib.resolve_vocab_size(data_cfg, m.vocab_size)
  n = m.num_layers
  _positive("model.num_layers", n)
  # The placeholders, resolved: final norm (auto), DeepNorm alpha/beta, branch scale.
  final = _choice("model.final_norm", str(m.final_norm).lower(), FINAL_NORMS)
  if final == "auto":  # a norm in front of each branch: a final norm before the head
    final_norm = variants.placement(m.norm_position).pre_like
  else:
    final_norm = final == "true"
  alpha = m.residual_alpha if m.residual_alpha is not None else residual_lib.deepnorm_alpha(n)
  scale = m.branch_scale if m.branch_scale is not None else residual_lib.default_branch_scale(n)
  if m.init_beta is not None:
    beta = m.init_beta
  elif m.init == "magneto":
    beta = magneto_gamma(n)
  else:
    beta = residual_lib.deepnorm_beta(n)
  dtype = m.get("dtype", "float32")
  attention = m.get("attention", "dense")
  if attention not in ("dense", "xla") and platform is None:
    import jax  # only to ask which backend `fused` runs on

    platform = jax.default_backend()
  heads_ok = isinstance(m.num_heads, int) and m.num_heads > 0  # else ModelConfig refuses it
  head_dim = m.d_model // m.num_heads if heads_ok else 0
  resolved = {
    "vocab_size": vocab_size,
    "final_norm": final_norm,
    "residual_alpha": alpha,
    "branch_scale": scale,
    "init_beta": beta,
    "attention": resolve_attention(attention, platform, dtype, head_dim),
  }
  # Every other field as the config gives it (a key absent from an older config: the
  # dataclass default), cast to the field's type: one source of defaults, no hand copy.
  fields = {}
  for field in dataclasses.fields(ModelConfig):
    if field.name in resolved:
      value = resolved[field.name]
    elif field.name in m:
      value = m[field.name]
    else:
      continue
    fields[field.name] = _CASTS.get(field.type, _same)(value)
  return ModelConfig(**fields)


def _same(value: Any) -> Any:
  return value


# Field types (strings under `from __future__ import annotations`) whose config values are
# cast: bools and floats from JSON or the command line (1 -> 1.0, 0 -> False).
_CASTS = {"bool": bool, "float": float}
