"""The typed model config: validated once from the loose ml_collections config."""

from __future__ import annotations

import dataclasses
from typing import Any

from resnorm_jax.config import keys, model_keys, same_experiment, variant_keys
from resnorm_jax.model import depth_param as depth_param_lib
from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model import variants
from resnorm_jax.model import width_param as width_param_lib
from resnorm_jax.model.initializers import INITS, magneto_gamma

# The choices of the core model keys, from their declarations (resnorm_jax/config/model_keys.py).
FINAL_NORMS = model_keys.KEYS["final_norm"].literal_choices
BLOCKS = model_keys.KEYS["block"].literal_choices
ACTIVATIONS = model_keys.KEYS["ffn_activation"].literal_choices
EMBED_POSITIONS = model_keys.KEYS["position"].literal_choices
REMATS = model_keys.KEYS["remat"].literal_choices
DTYPES = model_keys.KEYS["dtype"].literal_choices
# model.attention: `dense` (default: einsums, probabilities materialised), `fused`
# (jax.nn.dot_product_attention: cuDNN flash attention on a GPU in bfloat16, XLA elsewhere),
# or one implementation by name (`splash`: the Pallas splash kernel on a TPU, model/splash.py).
# ModelConfig holds the resolved one: dense | xla | cudnn | splash.
ATTENTIONS = model_keys.KEYS["attention"].literal_choices
ATTENTION_IMPLEMENTATIONS = tuple(a for a in ATTENTIONS if a != "fused")
# The values ModelConfig holds where they are not the config's choices: the resolved ones.
_HELD_CHOICES = {"attention": ATTENTION_IMPLEMENTATIONS}


def _choice(key: str, value: Any, valid: tuple[str, ...]) -> str:
  if value not in valid:
    raise ValueError(f"{key}={value!r} is not valid; valid values: {', '.join(valid)}")
  return value


def _positive(key: str, value: Any) -> None:
  complaint = keys.positive_int(value)
  if complaint:
    raise ValueError(f"{key}={value!r} {complaint}")


class _ModelConfigChecks:
  """ModelConfig's property and checks (its fields: _ModelConfigAxes, ModelConfig)."""

  @property
  def head_dim(self) -> int:
    return self.d_model // self.num_heads

  def __post_init__(self):
    # The keys whose choices are a model registry's names (model_keys.Registry).
    variants.get("norm", self.norm)  # ValueError naming the valid norms
    variants.placement(self.norm_position)  # ValueError naming the valid placements
    variants.residual(self.residual)  # ValueError naming the valid residuals
    _choice("model.init", self.init, INITS)
    # The keys with literal choices, as declared (final_norm: a bool here, resolved).
    for key, decl in model_keys.KEYS.items():
      if decl.literal_choices and decl.field_type is None:
        valid = _HELD_CHOICES.get(key, decl.literal_choices)
        _choice(f"model.{key}", getattr(self, key), valid)
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
    for key, what in (
      ("residual_alpha", "the skip path's scale in deepnorm; unset: (2N)^(1/4)"),
      ("branch_scale", "the branch's scale in scaled; 0 removes every branch; unset: 1/sqrt(2N)"),
      ("init_beta", "the gain of the deepnorm init; unset: (8N)^(-1/4)"),
    ):
      value = getattr(self, key)
      if value is not None and not value > 0:
        raise ValueError(f"model.{key}={value!r} must be > 0 or unset ({what})")
    if isinstance(self.attn_out_scale, bool) or not self.attn_out_scale > 0:
      raise ValueError(
        f"model.attn_out_scale={self.attn_out_scale!r} must be > 0 (the attention branch's "
        "factor; 1.0, the default: none)"
      )
    if not 0.0 <= self.batchnorm_momentum < 1.0:
      raise ValueError(f"model.batchnorm_momentum={self.batchnorm_momentum!r} not in [0, 1)")
    variants.validate(self)  # every variant's own keys, the selected variants' checks
    depth_param_lib.check(self)  # the depth parametrization and what it refuses
    # the width parametrization and what it refuses of the residual
    width_param_lib.check(self, variants.residual(self.residual))


# The core keys' fields, typed as declared (resnorm_jax/config/model_keys.py), in its order.
_ModelConfigAxes = dataclasses.make_dataclass(
  "_ModelConfigAxes",
  [(key, (d.field_type or d.type).__name__) for key, d in model_keys.KEYS.items()],
  bases=(_ModelConfigChecks,),
  frozen=True,
)
_ModelConfigAxes.__module__ = __name__
_ModelConfigAxes.__doc__ = "ModelConfig's fields but the variants' own keys (see ModelConfig)."
# Those fields, then one per variant's own key, typed by its default, from its one
# declaration in the variant's module (resnorm_jax/config/variant_keys.py reads it from the
# source, so building the class imports no variant module).
ModelConfig = dataclasses.make_dataclass(
  "ModelConfig",
  [(key, d.type.__name__) for key, d in variant_keys.declared().items()],
  bases=(_ModelConfigAxes,),
  frozen=True,
)
ModelConfig.__module__ = __name__  # pickles and prints as config_types.ModelConfig
ModelConfig.__doc__ = """Every model axis, resolved: no 'auto', no unset constants, and every
variant's own key. No defaults here: a key the config lacks (an older config.json) takes the
schema's (resnorm_jax/config/schema.py) (model_config_from)."""


def resolve_attention(name: str, platform: str, dtype: str, head_dim: int) -> str:
  """The attention implementation `model.attention=name` means on `platform`
  (dense|xla|cudnn|splash).

  `fused` takes cuDNN only where its flash kernel applies (a GPU, bfloat16, a head dim that
  is a multiple of 8 and <= 128: every GPU generation has it), XLA otherwise; `cudnn` and
  `splash` (a TPU kernel; on a CPU only in the tests' Pallas interpret mode, model/splash.py)
  asked by name where they cannot run are refused before anything compiles.
  """
  _choice("model.attention", name, ATTENTIONS)
  if name == "splash" and platform != "tpu":
    from resnorm_jax.model import splash  # its INTERPRET flag: the tests run it on a CPU

    if not (platform == "cpu" and splash.INTERPRET):
      other = "'cudnn' or 'fused'" if platform == "gpu" else "'dense' or 'fused'"
      raise ValueError(
        f"model.attention='splash' (the Pallas splash kernel) runs on a TPU only; here "
        f"platform={platform!r}. Use model.attention={other}"
      )
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


def resolve_final_norm(m: Any) -> bool:
  """model.final_norm resolved: `auto` puts a final norm before the head when a norm sits in
  front of each branch (the placement's pre_like)."""
  final = _choice("model.final_norm", str(m.final_norm).lower(), FINAL_NORMS)
  if final == "auto":
    return variants.placement(m.norm_position).pre_like
  return final == "true"


def model_config_from(
  config: Any, *, vocab_size: int | None = None, platform: str | None = None
) -> ModelConfig:
  """Resolves `config.model` into a validated ModelConfig.

  `vocab_size` (default: model.vocab_size) is the vocabulary the model is built with:
  model.vocab_size=0 means "from the data", which the run setup resolves against the corpus
  (train.run_setup.model_config) and passes here, so the model reads no files.
  `platform` (default: JAX's default backend) decides what `fused` attention is.
  """
  m = config.model
  if vocab_size is None:
    vocab_size = m.vocab_size
  if vocab_size == 0:
    raise ValueError(
      "model.vocab_size=0 (from the data) needs the data's vocabulary: build the model config "
      "with resnorm_jax.train.run_setup.model_config(config), which reads it from data.*"
    )
  _positive("model.num_layers", m.num_layers)
  # The depth-dependent constants below: at model.base_depth under a depth parametrization.
  depth_param_lib.alpha(_get(m, "depth_param"))  # an unknown name: refused, naming the choices
  _positive("model.base_depth", _get(m, "base_depth"))
  n = depth_param_lib.constants_depth(_get(m, "depth_param"), m.num_layers, _get(m, "base_depth"))
  # The placeholders, resolved: final norm (auto), DeepNorm alpha/beta, branch scale.
  final_norm = resolve_final_norm(m)
  alpha = m.residual_alpha if m.residual_alpha is not None else residual_lib.deepnorm_alpha(n)
  scale = m.branch_scale if m.branch_scale is not None else residual_lib.default_branch_scale(n)
  if m.init_beta is not None:
    beta = m.init_beta
  elif m.init == "magneto":
    beta = magneto_gamma(n)
  else:
    beta = residual_lib.deepnorm_beta(n)
  dtype = _get(m, "dtype")
  attention = _get(m, "attention")
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
  # Every other field as the config gives it (a key absent from an older config: configs/
  # base.py's default), cast to the field's type: one source of defaults, no hand copy.
  fields = {}
  for field in dataclasses.fields(ModelConfig):
    if field.name in resolved:
      value = resolved[field.name]
    elif field.name in m:
      value = m[field.name]
    else:
      value = same_experiment.schema_defaults()[f"model.{field.name}"]
    fields[field.name] = _CASTS.get(field.type, _same)(value)
  return ModelConfig(**fields)


def _get(m: Any, key: str) -> Any:
  """model.<key> of the config, or the schema's default when an older config lacks it."""
  return m[key] if key in m else same_experiment.schema_defaults()[f"model.{key}"]


def _same(value: Any) -> Any:
  return value


# Field types (strings under `from __future__ import annotations`) whose config values are
# cast: bools and floats from JSON or the command line (1 -> 1.0, 0 -> False).
_CASTS = {"bool": bool, "float": float}
