"""The variant registry: what each value of `model.residual`, `model.norm_position` and
`model.norm` does, and the features.

A variant is one module of this package. It declares a `VARIANTS` tuple of the records of
hooks.py (`Residual`, `Placement`, `Norm`, `Feature`), whose hooks the model, optimizer,
train step and loop call; nothing outside a variant's module compares its name. The
package's modules are found and imported by name on first use (as big_vision dispatches
`big_vision.models.<name>`), so adding a variant adds a file here, a named config and a test
file (CONTRIBUTING.md: "Add a variant"). The registry imports the variant modules; they
import hooks.py, never this module.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from resnorm_jax.config import variant_keys
from resnorm_jax.model import attention_paths
from resnorm_jax.model.variants.hooks import (  # noqa: F401 (the records, as variants.<name>)
  AXES,
  FEATURE,
  HOOK,
  HOOKS,
  Chain,
  Column,
  Feature,
  Hook,
  Key,
  LogitCap,
  Norm,
  Placement,
  Residual,
  Variant,
)

# The package's modules that declare no variants: the records they declare.
NOT_VARIANTS = ("hooks",)


@functools.cache
def _registry() -> dict[str, dict[str, Variant]]:
  """{axis: {name: variant}} from every module of this package: the original axes' values
  (standard.py) first, then the other modules by name."""
  table: dict[str, dict[str, Variant]] = {axis: {} for axis in (*AXES, FEATURE)}
  for name in modules():
    module = importlib.import_module(f"{__name__}.{name}")
    for v in module.VARIANTS:  # every module declares it (tests/test_registry.py)
      if v.name in table[v.axis]:
        raise ValueError(f"model.{v.axis}={v.name!r} is declared twice (variants/{name}.py)")
      table[v.axis][v.name] = v
    _check_declared(name, module)
  return table


def modules() -> tuple[str, ...]:
  """The names of the package's variant modules, standard.py (the original axes) first, then
  by name; hooks.py, the records, is none."""
  found = [m.name for m in pkgutil.iter_modules(__path__) if m.name not in NOT_VARIANTS]
  return tuple(sorted(found, key=lambda name: (name != "standard", name)))


def _check_declared(name: str, module: Any) -> None:
  """Refuses a module whose keys, imported, differ from those the schema reads from its source
  (a default computed at import, a Key outside the `keys={...}` literal)."""
  imported = {k: key.declared() for v in module.VARIANTS for k, key in v.keys.items()}
  read = variant_keys.read_module(module.__file__)
  if imported != {k: d.key for k, d in read.items()}:
    raise ValueError(
      f"variants/{name}.py: its keys as imported {imported} differ from those its source "
      f"declares {read}: declare each as keys={{'<key>': Key(literal default, description, "
      "invalid)}"
    )


def names(axis: str) -> tuple[str, ...]:
  """The registered values of model.<axis> (`residual`, `norm_position`, `norm`: the built-in
  ones first), or the features' names (FEATURE)."""
  return tuple(_registry()[axis])


def get(axis: str, name: Any) -> Variant:
  """The variant model.<axis>=name; ValueError naming the valid ones if there is none."""
  table = _registry()[axis]
  if name not in table:
    raise ValueError(f"model.{axis}={name!r} is not valid; valid values: {', '.join(table)}")
  return table[name]


@dataclasses.dataclass(frozen=True)
class NormConstants:
  """The constants a norm reads, as a ModelConfig holds them (make_norm's defaults: the
  schema's)."""

  norm_eps: float = 1e-5
  batchnorm_momentum: float = 0.99
  dyt_alpha_init: float = 0.5


def make_norm(
  name: str,
  dim: int,
  *,
  eps: float = 1e-5,
  batchnorm_momentum: float = 0.99,
  dyt_alpha_init: float = 0.5,
  axis: str | None = "embed",
) -> Any:
  """Builds the norm model.norm=name over `dim`; ValueError naming the valid ones."""
  if name not in names("norm"):
    raise ValueError(f"model.norm={name!r} is not a norm; valid: {', '.join(names('norm'))}")
  constants = NormConstants(eps, batchnorm_momentum, dyt_alpha_init)
  return get("norm", name).make(constants, dim, axis)


def config_norm(cfg: Any, dim: int, axis: str | None = "embed") -> Any:
  """The norm cfg.norm (ModelConfig) over `dim`, with the config's eps and norm constants."""
  return get("norm", cfg.norm).make(cfg, dim, axis)


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
    for a, b in zip(on, on[1:], strict=False):
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
  if residual(cfg.residual).multi_stream and placement(cfg.norm_position).normalizes_stream:
    raise ValueError(
      f"model.residual={cfg.residual} needs a branch-input placement (the layer reads a mix of "
      f"the n streams); model.norm_position={cfg.norm_position!r} normalizes the stream"
    )
  get("norm", cfg.norm).check(cfg)
  for feature in features(cfg):
    feature.check(cfg)
  check_hooks(cfg)  # features that do not compose, hooks the attention path lacks
