"""The variant registry: what each value of `model.residual` and `model.norm_position` does.

A variant is one module of this package. It declares a `VARIANTS` tuple of `Residual` and
`Placement` records (below), whose hooks the model, optimizer, train step and loop call;
nothing outside a variant's module compares its name. The package's modules are found and
imported by name on first use (as big_vision dispatches `big_vision.models.<name>`), so
adding a variant adds a file here, a named config and a test file (CONTRIBUTING.md: "Add a
variant").

  residual   how skip and branch combine, plus anything the variant adds around the layers
             (nGPT's unit-norm weights and scales, hyper-connections' n streams, Admin's
             profiled init) and to the optimizer (nGPT's projection onto the sphere)
  placement  where the norms of a layer sit (model.norm_position)
  norm       a value of model.norm beyond the built-in ones of norms.py: the module that
             normalizes (or replaces the norm) wherever the placement puts one
  feature    no axis: a change its own keys turn on (logit softcapping, gated attention,
             attention sinks), combining with any residual, placement and norm
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from flax import nnx

from resnorm_jax.config import variant_keys
from resnorm_jax.config.variant_keys import Key  # noqa: F401 (variant modules: variants.Key)
from resnorm_jax.model import attention_paths

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
    which the schema and ModelConfig's fields read too (resnorm_jax/config/variant_keys.py).
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
  """A value of model.norm declared by a variant module (norms.py holds the built-in ones).

  make(dim, axis, eps): the norm module over a hidden dimension `dim`, its per-channel
    parameters carrying the logical axis name `axis` (None: unsharded), `eps` model.norm_eps
    (for a norm that divides by a statistic); called as module(x) on [..., dim].
  """

  axis: ClassVar[str] = "norm"
  make: Callable[[int, str | None, float], Any] | None = None


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


@functools.cache
def _registry() -> dict[str, dict[str, Variant]]:
  """{axis: {name: variant}} from every module of this package: the original axes' values
  (standard.py) first, then the other modules by name."""
  table: dict[str, dict[str, Variant]] = {axis: {} for axis in (*AXES, FEATURE)}
  order = lambda m: (m.name != "standard", m.name)
  for info in sorted(pkgutil.iter_modules(__path__), key=order):
    module = importlib.import_module(f"{__name__}.{info.name}")
    for v in module.VARIANTS:  # every module declares it (tests/test_registry.py)
      if v.name in table[v.axis]:
        raise ValueError(f"model.{v.axis}={v.name!r} is declared twice (variants/{info.name}.py)")
      table[v.axis][v.name] = v
    _check_declared(info.name, module)
  return table


def _check_declared(name: str, module: Any) -> None:
  """Refuses a module whose keys, imported, differ from those the schema reads from its source
  (a default computed at import, a Key outside the `keys={...}` literal)."""
  imported = {k: (key.default, key.comment) for v in module.VARIANTS for k, key in v.keys.items()}
  read = variant_keys.read_module(module.__file__)
  if imported != {k: (d.default, d.comment) for k, d in read.items()}:
    raise ValueError(
      f"variants/{name}.py: its keys as imported {imported} differ from those its source "
      f"declares {read}: declare each as keys={{'<key>': Key(literal default, description, "
      "invalid)}"
    )


def names(axis: str) -> tuple[str, ...]:
  """The registered values of model.<axis> (`residual`, `norm_position`, or `norm`: those
  beyond norms.py's built-in ones; norms.names() lists them all), or the features' names
  (FEATURE)."""
  return tuple(_registry()[axis])


def get(axis: str, name: Any) -> Variant:
  """The variant model.<axis>=name; ValueError naming the valid ones if there is none."""
  table = _registry()[axis]
  if name not in table:
    raise ValueError(f"model.{axis}={name!r} is not valid; valid values: {', '.join(table)}")
  return table[name]


def residual(name: str) -> Residual:
  """The model.residual variant called `name`."""
  return get("residual", name)


def placement(name: str) -> Placement:
  """The model.norm_position variant called `name`."""
  return get("norm_position", name)


def record(cfg: Any, init_params: Callable[[], Any]) -> dict:
  """What the selected variants add to config.json's `resolved_model` (e.g. Admin's omegas)."""
  out = {}
  for variant in of(cfg):
    out.update(variant.record(cfg, init_params))
  return out


def of(cfg: Any) -> tuple[Residual, Placement]:
  """The residual and placement variants of a ModelConfig."""
  return residual(cfg.residual), placement(cfg.norm_position)


def every() -> list[Variant]:
  """Every registered variant, residuals first, features last."""
  return [v for axis in (*AXES, FEATURE) for v in _registry()[axis].values()]


def features(cfg: Any) -> tuple[Feature, ...]:
  """The features `cfg` (ModelConfig) turns on."""
  return tuple(f for f in _registry()[FEATURE].values() if f.on(cfg))


def users(cfg: Any, hook: str) -> tuple[Feature, ...]:
  """The features `cfg` turns on that act on `hook`, in their chain's order."""
  return tuple(sorted((f for f in features(cfg) if hook in f.hooks(cfg)), key=lambda f: f.order))


def _both(feats: Any) -> str:
  names = [f.name for f in feats]
  return ", ".join(names[:-1]) + " and " + names[-1]


def check_hooks(cfg: Any) -> None:
  """Refuses, before anything is built, features that do not compose and hooks the attention
  path does not apply: two features on a hook that takes one, two at one order on a chain,
  a feature on an attention hook model.attention's path lacks (it would be dropped)."""
  for hook in HOOKS:
    on = users(cfg, hook.name)
    if len(on) > 1 and not hook.composes:
      raise ValueError(
        f"{_both(on)} both act on the {hook.name} hook ({hook.summary}), which takes one "
        "feature: turn one of them off"
      )
    for a, b in zip(on, on[1:]):
      if a.order == b.order:
        raise ValueError(
          f"{_both((a, b))} both act on the {hook.name} hook at order {a.order}, so their "
          "chain's order is undeclared: give one of them another Feature.order"
        )
    for f in on if hook.attention else ():
      if hook.name not in attention_paths.PATHS[cfg.attention]:
        raise ValueError(
          f"model.attention={cfg.attention!r} does not apply the {hook.name} hook that "
          f"{f.name} turns on{_set_keys(f, cfg)}; valid values: "
          + ", ".join(attention_paths.applying(hook.name))
        )


def _set_keys(feature: Feature, cfg: Any) -> str:
  """` (model.<key>=<value>, ...)` of a feature's keys away from their defaults, or ''."""
  keys = [
    f"model.{k}={getattr(cfg, k)!r}"
    for k, key in feature.keys.items()
    if getattr(cfg, k) != key.default
  ]
  return f" ({', '.join(keys)})" if keys else ""


def feature_module(cfg: Any, hook: str, *args: Any) -> Any:
  """The module of hook `hook` (attn_logits, attn_cap, attn_sink, attn_output,
  out_logits) from the features `cfg` turns on, or None: the one feature's, or on a composing
  hook the chain of them (Chain, in their order). A second feature on a hook that takes one is
  refused (check_hooks refuses the config first)."""
  on = users(cfg, hook)
  if len(on) > 1 and not HOOK[hook].composes:
    check_hooks(cfg)
  made = [m for f in on if (m := getattr(f, hook)(cfg, *args)) is not None]
  if len(made) != len(on):
    raise ValueError(f"a feature of {_both(on)} acts on the {hook} hook but made no module")
  if len(made) > 1:
    return Chain(made)
  return made[0] if made else None


def frozen_paths(cfg: Any) -> tuple[Callable[[str], bool], ...]:
  """The path tests of the parameters the features `cfg` turns on hold still (Feature.frozen)."""
  return tuple(t for f in users(cfg, "frozen") if (t := f.frozen(cfg)) is not None)


def keys() -> dict[str, Key]:
  """{name: Key} of every variant's own model.<name> keys."""
  return {name: key for v in every() for name, key in v.keys.items()}


def validate(cfg: Any) -> None:
  """Every variant's own keys, then the checks of the variants `cfg` (ModelConfig) selects."""
  for name, key in keys().items():
    key.validate(name, getattr(cfg, name))
  placement(cfg.norm_position).check(cfg)
  residual(cfg.residual).check(cfg)
  if cfg.norm in names("norm"):
    get("norm", cfg.norm).check(cfg)
  for feature in features(cfg):
    feature.check(cfg)
  check_hooks(cfg)  # features that do not compose, hooks the attention path lacks
