"""The package's layout: subpackages in floors (config < model, data < train < tools), each
importing only the floors below it, lazily or not; no flat module beside them; no script or
entry point editing sys.path (the package, configs and experiments are installed)."""

import ast
import os

import pytest

from conftest import ROOT
from resnorm_jax.config import pysource

PACKAGE = os.path.join(ROOT, "resnorm_jax")
# What each subpackage may import (itself included). model and data are one floor: neither
# imports the other (the run setup resolves the data's vocabulary and passes it down).
ALLOWED = {
  "config": {"config"},
  "model": {"config", "model"},
  "data": {"config", "data"},
  "train": {"config", "model", "data", "train"},
  "tools": {"config", "model", "data", "train", "tools"},
}


def _project_imports(path: str) -> list[tuple[int, str]]:
  """(line, module) of every resnorm_jax import in a file, inside functions too."""
  out = []
  for node in ast.walk(pysource.parse_file(path)):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("resnorm_jax"):
      if node.module == "resnorm_jax":
        out += [(node.lineno, f"resnorm_jax.{a.name}") for a in node.names]
      else:
        out.append((node.lineno, node.module))
    elif isinstance(node, ast.Import):
      out += [(node.lineno, a.name) for a in node.names if a.name.startswith("resnorm_jax")]
  return out


def _modules(folder: str) -> list[str]:
  return [
    os.path.join(root, f) for root, _, files in os.walk(folder) for f in files if f.endswith(".py")
  ]


def test_the_package_is_its_subpackages():
  flat = sorted(f for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py")
  assert flat == []
  found = {
    d for d in os.listdir(PACKAGE) if os.path.isfile(os.path.join(PACKAGE, d, "__init__.py"))
  }
  assert found == set(ALLOWED)


@pytest.mark.parametrize("sub", sorted(ALLOWED))
def test_a_subpackage_imports_only_the_floors_below_it(sub):
  bad = []
  for path in _modules(os.path.join(PACKAGE, sub)):
    for line, module in _project_imports(path):
      parts = module.split(".")
      if module == "resnorm_jax":  # the package root: ROOT, no subpackage
        continue
      if parts[1] not in ALLOWED[sub]:
        bad.append(f"{os.path.relpath(path, ROOT)}:{line} imports {module}")
  assert bad == []


def test_the_check_sees_a_lazy_import(tmp_path):
  """The check above can fail: an import inside a function is found."""
  src = tmp_path / "x.py"
  src.write_text("def f():\n  from resnorm_jax.tools import sweep_grid\n")
  assert _project_imports(str(src)) == [(2, "resnorm_jax.tools")]


@pytest.mark.parametrize("folder", ["scripts", "experiments", "configs", "tests", "resnorm_jax"])
def test_nothing_edits_sys_path(folder):
  """Scripts run as files and config files import the installed package (`pip install -e .`,
  a line of requirements.txt), so none puts the checkout on sys.path."""
  edits = []
  for path in _modules(os.path.join(ROOT, folder)):
    if os.path.basename(path) == "test_layout.py":
      continue
    for node in ast.walk(pysource.parse_file(path)):
      if (
        isinstance(node, ast.Attribute)
        and node.attr in ("insert", "append")
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "path"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "sys"
      ):
        edits.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
  assert edits == []
