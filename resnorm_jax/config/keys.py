"""The one record of a model.<key>, core or a variant's own: `Key`, its HParams `Column`, the
`Registry` its choices may name, and the range checks keys share (one copy of each).

The core keys are declared in model_keys.py, each variant's own in its module's VARIANTS
(`keys={"<key>": Key(default, description, invalid, hparam=Column(...))}`, read from the
source by variant_keys.py). No JAX and no model import here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

TYPES = (bool, int, float, str)


@dataclasses.dataclass(frozen=True)
class Registry:
  """The choices are the names of a registry in the model (`where`): the model checks a value
  against it and names every valid one when it refuses a value."""

  where: str


@dataclasses.dataclass(frozen=True)
class Column:
  """A column of TensorBoard's HParams table: its name and its place among all the columns
  (hparams.AXES sorts the model's and the other sections' columns by `order`)."""

  name: str
  order: int


# The range checks: each says what is wrong with a value ("must be a positive integer"), None
# when it is valid; each checks the value's type too, so it holds on its own.
def positive_int(value: Any) -> str | None:
  ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
  return None if ok else "must be a positive integer"


def _number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def unit_interval(value: Any) -> str | None:
  return None if _number(value) and 0.0 <= value <= 1.0 else "not in [0, 1]"


def nonnegative(value: Any) -> str | None:
  return None if _number(value) and value >= 0 else "must be a number >= 0"


@dataclasses.dataclass(frozen=True)
class Key:
  """One model.<key>: a core key (model_keys.KEYS) or one only a variant reads (its module's
  VARIANTS).

  default: the value a config starts from; None leaves the key unset (a placeholder of
  `type`: the model resolves it, e.g. from the depth). description: what `python -m
  resnorm_jax.config` prints; `{choices}` in it reads as the choices joined by ' | '.
  invalid(value): what is wrong with a value of the key's type ("not in [0, 1]"), None if it
  is valid (the shared checks above, or the variant's own). type: the value's type, the
  default's unless given (it must be given where the default is None). choices: the valid
  values (a tuple, checked by ModelConfig), a Registry (the model's names, checked by the
  model), or None. affects_results: False for a key that changes how fast or in how much
  memory the step runs, never its values (same_experiment.SPEED_ONLY). added: checkpoints
  predate the key; a checkpoint without it reads as the default (every variant's own key is).
  hparam: its HParams column, None when the table does not show it. field_type: ModelConfig's
  field type where the model resolves the value to another type (final_norm: auto|true|false
  to a bool).
  """

  default: Any
  description: str
  invalid: Callable[[Any], str | None] | None = None
  type: type | None = None
  choices: tuple[str, ...] | Registry | None = None
  affects_results: bool = True
  added: bool = False
  hparam: Column | None = None
  field_type: type | None = None

  def __post_init__(self):
    if self.type is None:
      if self.default is None:
        raise ValueError(f"a Key whose default is None needs a type: {self.description!r}")
      object.__setattr__(self, "type", type(self.default))
    if self.type not in TYPES:
      raise ValueError(f"a Key's type is one of bool, int, float, str; got {self.type!r}")

  @property
  def text(self) -> str:
    """The description, its `{choices}` written out."""
    if isinstance(self.choices, tuple):
      return self.description.replace("{choices}", " | ".join(self.choices))
    return self.description

  @property
  def literal_choices(self) -> tuple[str, ...] | None:
    return self.choices if isinstance(self.choices, tuple) else None

  def type_problem(self, value: Any) -> str | None:
    """What is wrong with `value`'s type ('must be true or false (a bool key)'), None when it
    is of the key's type: a bool for a bool key, an int (not a bool) for an int key, a finite
    int or float for a float key, a str for a str key."""
    t = self.type
    if t is bool:
      ok, want = isinstance(value, bool), "must be true or false"
    elif t is int:
      ok, want = isinstance(value, int) and not isinstance(value, bool), "must be an integer"
    elif t is float:
      ok, want = _number(value) and math.isfinite(value), "must be a finite number"
    else:
      ok, want = isinstance(value, str), "must be a str"
    return None if ok else f"{want} (a {t.__name__} key)"

  def problem(self, value: Any) -> str | None:
    """What is wrong with `value`: its type, then its range (`invalid`); None if it is valid."""
    return self.type_problem(value) or (self.invalid(value) if self.invalid else None)

  def validate(self, key: str, value: Any) -> None:
    """ValueError in one line naming the key, the value and what is wrong with it."""
    complaint = self.problem(value)
    if complaint:
      raise ValueError(f"model.{key}={value!r} {complaint}")

  def declared(self) -> Key:
    """The key as its source declares it, without its check (what variant_keys reads)."""
    return dataclasses.replace(self, invalid=None)
