"""The variants' own config keys: every Key (keys.py, the core keys' record too) the variant
modules declare, read from their source.

A variant module (resnorm_jax/model/variants/<name>.py) declares each model.<key> only it
reads once, as `keys={"<key>": Key(default, description, invalid)}` in its VARIANTS: the
default (a bool, int, float or str literal, or a module constant bound to one; its type is
the key's type), a one-line description and the check (keys.py's shared ones, or its own);
by name, optionally, its HParams column (`hparam=Column("<column>", <order>)`, literals) and
`affects_results`. The schema's model section (schema.py), ModelConfig's fields
(resnorm_jax/model/config_types.py), the HParams table's columns (model_keys.hparam_columns)
and the registry's checks (resnorm_jax/model/variants/__init__.py) all read that declaration.
The schema reads it here, from the modules' source, without importing them: the config floor
imports no model code and no JAX; the registry, which imports the modules, refuses a module
whose imported keys (their checks left out) differ from what is read here.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
from typing import Any

from resnorm_jax.config.keys import TYPES, Column, Key
from resnorm_jax.files import pysource

# The variant package, read as files (resnorm_jax/model/variants/).
VARIANTS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "model", "variants")
# A Key's arguments the source declares: positional (default, description, invalid), and these
# by name; `invalid` is code, checked where the module is imported, never read here.
_LITERAL = ("default", "description", "affects_results", "added")
_READ = (*_LITERAL, "hparam", "type", "invalid")


@dataclasses.dataclass(frozen=True)
class Declared:
  """A Key as its module's source declares it (`key`: without its check) and the module."""

  module: str
  key: Key

  @property
  def type(self) -> type:
    return self.key.type

  @property
  def default(self) -> Any:
    return self.key.default

  @property
  def description(self) -> str:
    return self.key.description


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
        if _is_call(v, "Key"):
          if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise ValueError(f"{where}:{v.lineno}: a Key's name must be a string literal")
          in_dicts[id(v)] = k.value
  out: dict[str, Declared] = {}
  for node in ast.walk(tree):
    if not _is_call(node, "Key"):
      continue
    if id(node) not in in_dicts:
      raise ValueError(
        f"{where}:{node.lineno}: declare a Key as a value of the keys dict literal, "
        '`keys={"<key>": Key(default, description, invalid)}`'
      )
    out[in_dicts[id(node)]] = Declared(module, _read_key(node, constants, f"{where}:{node.lineno}"))
  return out


def _read_key(node: ast.Call, constants: dict[str, ast.AST], where: str) -> Key:
  """The Key a Key(...) call declares, read from its arguments (its check left out)."""
  args = dict(zip(("default", "description", "invalid"), node.args, strict=False))
  args.update({kw.arg: kw.value for kw in node.keywords})
  unread = set(args) - set(_READ)
  if unread or "default" not in args or "description" not in args:
    raise ValueError(
      f"{where}: a Key needs a default and a description (and by name only "
      f"{', '.join(_READ[2:])}); got {sorted(args)}"
    )
  fields = {k: _value(args[k], constants, where) for k in _LITERAL if k in args}
  default, description = fields["default"], fields["description"]
  if type(default) not in TYPES or not isinstance(description, str) or not description:
    raise ValueError(
      f"{where}: a Key's default is a bool, int, float or str and its description a non-empty "
      f"string; got {default!r}, {description!r}"
    )
  if "hparam" in args:
    column = args["hparam"]
    if not _is_call(column, "Column") or column.keywords or len(column.args) != 2:
      raise ValueError(f"{where}: a Key's hparam is Column(<name literal>, <order literal>)")
    fields["hparam"] = Column(*(_value(a, constants, where) for a in column.args))
  if "type" in args:
    named = {t.__name__: t for t in TYPES}
    if not (isinstance(args["type"], ast.Name) and args["type"].id in named):
      raise ValueError(f"{where}: a Key's type is one of bool, int, float, str")
    fields["type"] = named[args["type"].id]
  return Key(**fields)


def _is_call(node: ast.AST, name: str) -> bool:
  if not isinstance(node, ast.Call):
    return False
  f = node.func
  return (isinstance(f, ast.Name) and f.id == name) or (
    isinstance(f, ast.Attribute) and f.attr == name
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
      f"{where}: a Key's default, description and column are literals (or a module "
      f"constant bound to one), read without importing the module: {ast.unparse(node)}"
    ) from None
