"""The variants' own config keys: `Key`, and every Key the variant modules declare, read from
their source.

A variant module (resnorm_jax/model/variants/<name>.py) declares each model.<key> only it
reads once, as `keys={"<key>": Key(default, description, invalid)}` in its VARIANTS: the
default (a bool, int, float or str literal, or a module constant bound to one; its type is
the key's type), a one-line description and the check. The schema's model section
(schema.py), ModelConfig's fields (resnorm_jax/model/config_types.py) and the registry's
checks (resnorm_jax/model/variants/__init__.py) all read that declaration. The schema reads it
here, from the modules' source, without importing them: the config floor imports no model
code and no JAX; the registry, which imports the modules, refuses a module whose imported keys
differ from what is read here.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import os
from collections.abc import Callable
from typing import Any

from resnorm_jax.config import pysource

# The variant package, read as files (resnorm_jax/model/variants/).
VARIANTS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "model", "variants")
TYPES = (bool, int, float, str)


def _valid(value: Any) -> None:
  return None


@dataclasses.dataclass(frozen=True)
class Key:
  """A model.<key> only one variant reads: its default, its description and its check.

  invalid(value): what is wrong with `value` ("not in [0, 1]"), None if it is valid; checked
  whichever variant a config selects (a run records every key in config.json).
  """

  default: Any
  comment: str
  invalid: Callable[[Any], str | None] = _valid

  @property
  def type(self) -> type:
    """The key's type: its default's (ModelConfig's field, the cast of a JSON value)."""
    return type(self.default)

  def type_problem(self, value: Any) -> str | None:
    """What is wrong with `value`'s type against the default's ('must be true or false'),
    None when it is of the key's type: a bool for a bool key, an int (not a bool) for an int
    key, a finite int or float for a float key, a str for a str key."""
    t = self.type
    if t is bool:
      return None if isinstance(value, bool) else "must be true or false"
    if t is int:
      ok = isinstance(value, int) and not isinstance(value, bool)
      return None if ok else "must be an integer"
    if t is float:
      ok = isinstance(value, (int, float)) and not isinstance(value, bool)
      return None if ok and math.isfinite(value) else "must be a finite number"
    return None if isinstance(value, t) else f"must be a {t.__name__}"

  def validate(self, key: str, value: Any) -> None:
    """The key's type (from its default), then its own check: ValueError naming both."""
    complaint = self.type_problem(value) or self.invalid(value)
    if complaint:
      raise ValueError(f"model.{key}={value!r} {complaint}")


@dataclasses.dataclass(frozen=True)
class Declared:
  """A Key as its module's source declares it: the module, the default and the description."""

  module: str
  default: Any
  comment: str

  @property
  def type(self) -> type:
    return type(self.default)


def _module_order(name: str) -> tuple[bool, str]:
  """The registry's order: standard.py (the original axes) first, then by name."""
  return (name != "standard", name)


@functools.cache
def declared() -> dict[str, Declared]:
  """{key: Declared} of every Key in the variant modules, in the registry's module order."""
  names = [f[:-3] for f in os.listdir(VARIANTS_DIR) if f.endswith(".py") and f != "__init__.py"]
  out: dict[str, Declared] = {}
  for name in sorted(names, key=_module_order):
    for key, decl in read_module(os.path.join(VARIANTS_DIR, f"{name}.py")).items():
      if key in out:
        raise ValueError(
          f"model.{key} is declared twice (variants/{out[key].module}.py, variants/{name}.py)"
        )
      out[key] = decl
  return out


def read_module(path: str) -> dict[str, Declared]:
  """{key: Declared} of the Key(...) calls in one module's source: each the value of a dict
  literal under its name (`keys={"name": Key(...)}`)."""
  module = os.path.basename(path)[:-3]
  tree = pysource.parse_file(path)
  constants = _module_constants(tree)
  where = f"variants/{module}.py"
  in_dicts = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Dict):
      for k, v in zip(node.keys, node.values, strict=True):
        if _is_key_call(v):
          if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise ValueError(f"{where}:{v.lineno}: a Key's name must be a string literal")
          in_dicts[id(v)] = k.value
  out: dict[str, Declared] = {}
  for node in ast.walk(tree):
    if not _is_key_call(node):
      continue
    if id(node) not in in_dicts:
      raise ValueError(
        f"{where}:{node.lineno}: declare a Key as a value of the keys dict literal, "
        '`keys={"<key>": Key(default, description, invalid)}`'
      )
    args = dict(zip(("default", "comment"), node.args, strict=False))
    args.update({kw.arg: kw.value for kw in node.keywords if kw.arg in ("default", "comment")})
    if set(args) != {"default", "comment"}:
      raise ValueError(f"{where}:{node.lineno}: a Key needs a default and a description")
    default = _value(args["default"], constants, where)
    comment = _value(args["comment"], constants, where)
    if type(default) not in TYPES or not isinstance(comment, str) or not comment:
      raise ValueError(
        f"{where}:{node.lineno}: a Key's default is a bool, int, float or str and its "
        f"description a non-empty string; got {default!r}, {comment!r}"
      )
    out[in_dicts[id(node)]] = Declared(module, default, comment)
  return out


def _is_key_call(node: ast.AST) -> bool:
  if not isinstance(node, ast.Call):
    return False
  f = node.func
  return (isinstance(f, ast.Name) and f.id == "Key") or (
    isinstance(f, ast.Attribute) and f.attr == "Key"
  )


def _module_constants(tree: ast.Module) -> dict[str, ast.AST]:
  """NAME = <expression> at the module's top level (a default may name one)."""
  out = {}
  for node in tree.body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
      if isinstance(node.targets[0], ast.Name):
        out[node.targets[0].id] = node.value
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
      out[node.target.id] = node.value
  return out


def _value(node: ast.AST, constants: dict[str, ast.AST], where: str) -> Any:
  if isinstance(node, ast.Name) and node.id in constants:
    node = constants[node.id]
  try:
    return ast.literal_eval(node)
  except ValueError:
    raise ValueError(
      f"{where}:{node.lineno}: a Key's default and description are literals (or a module "
      f"constant bound to one), read without importing the module: {ast.unparse(node)}"
    ) from None
