"""The package's layout: subpackages in floors (files < config < model, data < runs < train <
sweeps, hardware, probes; analysis on files, config, data and runs alone), each importing only
the floors below it, lazily or not; no flat module beside them; files, runs and analysis import
no JAX; no script or entry point editing sys.path (the package, configs and experiments are
installed)."""

import ast
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from resnorm_jax.files import pysource

PACKAGE = os.path.join(ROOT, "resnorm_jax")
# What each subpackage may import (itself included). files is the ground floor, below config
# (file helpers that know nothing of configs or runs): every subpackage may import it, and it
# imports only itself. model and data are one floor: neither imports the other (the run setup
# resolves the data's vocabulary and passes it down). runs is what a run leaves behind and its
# readers: train writes through it, analysis reads through it and never imports train (nor JAX,
# test_files_runs_and_analysis_import_no_jax).
ALLOWED = {
  "files": {"files"},
  "config": {"files", "config"},
  "model": {"files", "config", "model"},
  "data": {"files", "config", "data"},
  "runs": {"files", "config", "data", "runs"},
  "train": {"files", "config", "model", "data", "runs", "train"},
  "sweeps": {"files", "config", "model", "data", "runs", "train", "sweeps"},
  "hardware": {"files", "config", "model", "data", "runs", "train", "hardware"},
  "analysis": {"files", "config", "data", "runs", "analysis"},
  "probes": {"files", "config", "model", "data", "runs", "train", "analysis", "probes"},
}
NO_JAX = ("analysis", "files", "runs")  # importing any of their modules loads none of these
JAX_PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax")


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
  src.write_text("def f():\n  from resnorm_jax.sweeps import grid\n")
  assert _project_imports(str(src)) == [(2, "resnorm_jax.sweeps")]


MODEL = os.path.join(PACKAGE, "model")
REGISTRY = "resnorm_jax.model.variants"  # imports each module of its package by name (pkgutil)


def _module_name(path: str) -> str:
  rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
  return rel.removesuffix(".__init__")


def _model_graph() -> dict[str, set[str]]:
  """{module: the modules of resnorm_jax/model/ it imports} (lazy imports too; `from a import
  b` is an import of a.b where that is a module, else of a), and the registry's import of
  every module of its package, which it makes by name."""
  modules = {_module_name(p): p for p in _modules(MODEL)}
  graph = {}
  for name, path in modules.items():
    out = set()
    for node in ast.walk(pysource.parse_file(path)):
      if isinstance(node, ast.ImportFrom) and node.module in modules:
        out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                else node.module for a in node.names}  # fmt: skip
      elif isinstance(node, ast.Import):
        out |= {a.name for a in node.names if a.name in modules}
    graph[name] = out - {name}
  graph[REGISTRY] |= {m for m in modules if m.startswith(REGISTRY + ".")}
  return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
  """One import cycle of `graph` ([a, b, ..., a]), or [] if there is none."""
  state: dict[str, int] = {}  # 1: on the current path, 2: done

  def visit(node: str, path: list[str]) -> list[str]:
    state[node] = 1
    for nxt in sorted(graph.get(node, ())):
      if state.get(nxt) == 1:
        return [*path[path.index(nxt) :], node, nxt] if nxt in path else [node, nxt]
      if nxt not in state and (found := visit(nxt, [*path, node])):
        return found
    state[node] = 2
    return []

  for start in sorted(graph):
    if start not in state and (found := visit(start, [])):
      return found
  return []


def test_the_model_has_no_import_cycle():
  """The model's modules import each other as a tree: the registry imports the variant
  modules, they import hooks.py (the records) and the model modules below them, never the
  registry; norms.py and width_param.py import no registry either."""
  graph = _model_graph()
  assert {"resnorm_jax.model.variants.hooks", "resnorm_jax.model.norms"} <= set(graph)
  assert "resnorm_jax.model.variants.standard" in graph[REGISTRY]
  assert _cycle(graph) == []


def test_the_cycle_check_can_fail():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
  assert _cycle(graph) == ["a", "b", "c", "a"]
  assert _cycle({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("sub", NO_JAX)
def test_files_runs_and_analysis_import_no_jax(sub):
  """Every module of the no-JAX floors imported in a fresh process (the ones it imports too,
  at module level): none of JAX, Flax, Optax or Orbax is loaded."""
  names = sorted(
    "resnorm_jax." + os.path.relpath(p, PACKAGE)[:-3].replace(os.sep, ".").removesuffix(".__init__")
    for p in _modules(os.path.join(PACKAGE, sub))
  )
  code = (
    "import importlib, sys\n"
    f"for name in {names!r}:\n"
    "  importlib.import_module(name)\n"
    f"print(sorted(m for m in sys.modules if m.split('.')[0] in {JAX_PACKAGES!r}))\n"
  )
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.strip() == "[]", f"{sub} loads {proc.stdout.strip()}"


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
