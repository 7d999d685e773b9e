"""The records a variant module declares, and the hooks they fill: Variant and its kinds
(Residual, Placement, Norm, Feature), the Feature hooks (HOOKS: how several features on one
combine) and the modules they share (LogitCap, Chain). The registry (variants/__init__.py)
imports the variant modules, and they import this one: no variant module imports the
registry (tests/test_layout.py refuses an import cycle in the model).

  residual   how skip and branch combine, plus anything the variant adds around the layers
             (nGPT's unit-norm weights and scales, hyper-connections' n streams, Admin's
             profiled init) and to the optimizer (nGPT's projection onto the sphere)
  placement  where the norms of a layer sit (model.norm_position)
  norm       a value of model.norm: the module that normalizes (or replaces the norm)
             wherever the placement puts one (the built-in ones in standard.py)
  feature    no axis: a change its own keys turn on (logit softcapping, gated attention,
             attention sinks), combining with any residual, placement and norm
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from flax import nnx

from resnorm_jax.config.keys import Column, Key  # noqa: F401 (Column: variants.Column)

AXES = ("residual", "norm_position", "norm")
FEATURE = "feature"  # the Feature records' kind: no model.<axis> value selects them


def _nothing(*args: Any, **kwargs: Any) -> None:
  return None


def _no_record(*args: Any) -> dict:
  return {}


def _same(x: Any, *args: Any) -> Any:
  return x


def _default_embed_scale(rule: Any) -> float:
  return rule.embed_scale()


def _default_softmax_scale(head_dim: int) -> float:
  return head_dim**-0.5


def _run_layer(layer: Any, stream: Any, rope: Any, index: Any) -> tuple[Any, dict]:
  return layer(stream, rope, index)


def _every_slot(cfg: Any, slots: tuple[str, ...]) -> tuple[str, ...]:
  return slots


@dataclasses.dataclass(frozen=True, eq=False)
class Variant:
  """What every variant declares: its name, its own config keys and their checks.

  keys: {name: Key} of the model.<name> keys only this variant reads: their one declaration,
    which the schema and ModelConfig's fields read too (resnorm_jax/config/variant_keys.py);
    the one record of every model key, core keys too (resnorm_jax/config/keys.py).
  check(cfg): raises ValueError on a combination the variant refuses (cfg: ModelConfig);
    called when the config selects the variant.
  record(cfg, init_params): extra entries for config.json's `resolved_model` (init_params()
    returns the initial params; called only by variants whose init is worth recording).
  """

  axis: ClassVar[str]
  name: str
  summary: str
  keys: Mapping[str, Key] = dataclasses.field(default_factory=dict)
  check: Callable[[Any], None] = _nothing
  record: Callable[[Any, Callable[[], Any]], dict] = _no_record


@dataclasses.dataclass(frozen=True, eq=False)
class Residual(Variant):
  """A value of model.residual: how skip and branch combine, and what the model adds.

  make(cfg, slot=, num_slots=, layer_index=, norm=, rngs=): the residual module of one
    sub-layer; called as module(skip, branch), or module(skip, branch_fn) if wraps_branch.
  multi_stream: the stream is several copies each branch reads a mix of, so a placement that
    normalizes the stream (Placement.normalizes_stream) is refused.
  stream_in(x, cfg) / stream_out(x): the stack's input and output stream (default: as is).
  embed_scale(rule): the factor on token embeddings (default: the init rule's).
  qk_scale(cfg), mlp_scale(cfg), logit_scale(cfg): modules the variant adds to attention
    (applied to q, k after RoPE), to SwiGLU's (u, v) and to the logits; None: nothing.
  softmax_scale(head_dim): the attention logits' factor (default 1/sqrt(K)).
  init_stage(model, rngs): runs on the freshly built model (in place), e.g. a profiling pass.
  optimizer_transform(model_def): an optax transformation chained after the optimizer.
  check_opt_state(opt_state): refuses an optimizer state built without that transformation.
  matmul_params(cfg): weights its module multiplies per token and sub-layer (FLOP counts).
  layer_module(cfg, layer_index=, rngs=): a module each layer holds for the variant (kept in
    the layer's `residuals` under "layer"; DenseFormer's averaging weights); None: nothing.
  value_mix(cfg): a module attention applies to its values, value_mix(v, shared), where
    `shared` is the dict run_layer passes to the layer (value residuals); None: nothing.
  run_layer(layer, stream, rope, index) -> (stream, stats): one layer of the stack on the
    stream (the scan's carry, as stream_in made it); default layer(stream, rope, index). A
    variant that carries more than the residual stream across layers (DenseFormer's past
    outputs, the first layer's values) unpacks it here and calls
    layer(x, rope, index, shared).
  """

  axis: ClassVar[str] = "residual"
  make: Callable[..., Any] | None = None
  wraps_branch: bool = False
  multi_stream: bool = False
  stream_in: Callable[[Any, Any], Any] = _same
  stream_out: Callable[[Any], Any] = _same
  embed_scale: Callable[[Any], float] = _default_embed_scale
  qk_scale: Callable[[Any], Any] = _nothing
  mlp_scale: Callable[[Any], Any] = _nothing
  logit_scale: Callable[[Any], Any] = _nothing
  softmax_scale: Callable[[int], float] = _default_softmax_scale
  init_stage: Callable[[Any, Any], None] = _nothing
  optimizer_transform: Callable[[Any], Any] = _nothing
  check_opt_state: Callable[[Any], None] = _nothing
  matmul_params: Callable[[Any], int] = lambda cfg: 0
  layer_module: Callable[..., Any] = _nothing
  value_mix: Callable[[Any], Any] = _nothing
  run_layer: Callable[[Any, Any, Any, Any], tuple[Any, dict]] = _run_layer


@dataclasses.dataclass(frozen=True, eq=False)
class Placement(Variant):
  """A value of model.norm_position: where a layer's norms sit.

  Per sub-layer slot (attn, ffn; or block when parallel) the block runs
    h = branch_input(block, slot, x, stats, index)      the branch's input
    f = branch_output(block, slot, F(h), stats)          the branch's output
    y = stream_output(block, slot, x, res(x, f), stats, index)
  with block.norms[slot] (if norms) and block.out_norms[slot] (if out_norms) built for it;
  `index` is the 0-based layer index (scan data). Hooks record `<slot>_norm_in_rms` (and
  `<slot>_out_norm_in_rms`) in `stats` for every norm they apply.
  pre_like: a norm in front of each branch, so `final_norm=auto` adds one before the head.
  sub_norm: a norm inside each branch before its output projection (attention, MLP).
  normalizes_stream: the residual stream itself passes through a norm (a single stream).
  qkv_norm: attention normalizes its queries, keys and values per head (HybridNorm).
  norm_slots(cfg, slots): the slots that get a norm in `norms` (default: every slot).
  """

  axis: ClassVar[str] = "norm_position"
  norms: bool = True
  out_norms: bool = False
  pre_like: bool = False
  sub_norm: bool = False
  normalizes_stream: bool = False
  qkv_norm: bool = False
  norm_slots: Callable[[Any, tuple[str, ...]], tuple[str, ...]] = _every_slot
  branch_input: Callable[..., Any] = lambda block, slot, x, stats, index: x
  branch_output: Callable[..., Any] = lambda block, slot, f, stats: f
  stream_output: Callable[..., Any] = lambda block, slot, x, y, stats, index: y


@dataclasses.dataclass(frozen=True, eq=False)
class Norm(Variant):
  """A value of model.norm: the built-in ones (standard.py) and the variants' (Derf).

  make(c, dim, axis): the norm module over a hidden dimension `dim`, its per-channel
    parameters carrying the logical axis name `axis` (None: unsharded); `c` holds the norm
    constants (a ModelConfig, or make_norm's): c.norm_eps (for a norm that divides by a
    statistic), c.batchnorm_momentum, c.dyt_alpha_init. Called as module(x) on [..., dim].
  """

  axis: ClassVar[str] = "norm"
  make: Callable[[Any, int, str | None], Any] | None = None


@dataclasses.dataclass(frozen=True)
class Hook:
  """A place where features plug in, and how several features on it combine.

  composes: True, the features' modules chain (each applied to the previous one's output) in
    ascending Feature.order; False, one feature at most (a second is refused, naming both).
  attention: attention applies it, so each attention path declares whether it does
    (model/attention_paths.py); False: the model applies it whatever the path.
  """

  name: str
  composes: bool
  attention: bool
  summary: str


# Every Feature hook in the order the model applies them (attention's, then the output's).
HOOKS = (
  Hook("attn_logits", True, True, "maps on attention's scaled logits [B, H, T, S]"),
  Hook(
    "attn_cap",
    False,
    True,
    "the cap c tanh(x / c) on attention's logits after every map (a LogitCap: a fused kernel "
    "takes its c)",
  ),
  Hook("attn_sink", False, True, "a logit per head in every softmax's denominator"),
  Hook("attn_output", False, True, "a gate on the heads' outputs before the output projection"),
  Hook("out_logits", True, False, "maps on the model's output logits [B, T, V]"),
  Hook("frozen", True, False, "tests of the parameters the optimizer holds still (any holds)"),
)
HOOK = {hook.name: hook for hook in HOOKS}


class LogitCap(Protocol):
  """What the attn_cap hook's module is: module(x) = cap * tanh(x / cap), and its `cap`,
  which a path that caps inside its kernel (splash) takes instead of calling the module."""

  cap: float

  def __call__(self, x: Any) -> Any: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Feature(Variant):
  """A change beside the three axes, turned on by its own keys (no model.<axis> value names
  it): it combines with any residual, placement and norm; `check` runs when it is on.

  on(cfg): whether the config turns it on (its keys away from their off values).
  Its hooks (HOOKS says how several features on one combine; None from one: nothing):
  attn_logits(cfg): a module on attention's scaled logits [B, H, T, S] before the cap and the
    causal mask (a temperature).
  attn_cap(cfg): a LogitCap on attention's logits after every attn_logits map (logit
    softcapping); the splash kernel applies its `cap` itself.
  attn_sink(cfg): a module whose call () returns one logit per head [H], a column added to
    every softmax's denominator (attention sinks).
  attn_output(cfg, rule, rngs): a module gate(ctx_BxTxHxK, x_BxTxD, stats=) on the heads'
    outputs before the output projection, x the attention's input, stats the layer's
    statistics dict (or None) for what it measures (gated attention).
  out_logits(cfg): a module on the model's output logits [B, T, V].
  frozen(cfg): a test on a parameter's path (jax.tree_util.keystr of the params tree) for the
    parameters the optimizer never moves (a gate held at its init).
  acts_on(cfg): the hooks it acts on under `cfg`, checked before anything is built (the
    refusals, the attention path's contract); None: every hook it sets, whenever it is on.
  order: its place in a composing hook's chain, lower first (two features at one order on one
    hook are refused: their order would be undeclared).
  turned_on: a setting of its keys that turns it and each of its hooks on (the tests build
    every pair of features from these).
  matmul_params(cfg): weights its modules multiply per token and layer (FLOP counts).
  """

  axis: ClassVar[str] = FEATURE
  on: Callable[[Any], bool] = lambda cfg: False
  frozen: Callable[[Any], Callable[[str], bool] | None] = _nothing
  attn_logits: Callable[[Any], Any] = _nothing
  attn_cap: Callable[[Any], LogitCap | None] = _nothing
  attn_sink: Callable[[Any], Any] = _nothing
  attn_output: Callable[..., Any] = _nothing
  out_logits: Callable[[Any], Any] = _nothing
  acts_on: Callable[[Any], tuple[str, ...]] | None = None
  order: int = 0
  turned_on: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  matmul_params: Callable[[Any], int] = lambda cfg: 0

  def hooks(self, cfg: Any) -> tuple[str, ...]:
    """The hooks it acts on under `cfg` (none when it is off)."""
    if not self.on(cfg):
      return ()
    if self.acts_on is not None:
      return tuple(self.acts_on(cfg))
    return tuple(h.name for h in HOOKS if getattr(self, h.name) is not _nothing)


class Chain(nnx.Module):
  """Several features' maps on one composing hook, applied in their declared order."""

  def __init__(self, maps: list[Any]):
    self.maps = nnx.List(maps)

  def __call__(self, x: Any) -> Any:
    for fn in self.maps:
      x = fn(x)
    return x
