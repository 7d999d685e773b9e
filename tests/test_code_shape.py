"""Shape of the library code: no function in resnorm_jax/ longer than 100 lines, and no
script or test importing a script (code scripts and tests share lives in the library), by an
import statement or by loading the file by path."""

import ast
import glob
import os
import re

from resnorm_jax.files import pysource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 100
# What loads a Python file by path, past any import statement: importlib.util's
# spec_from_file_location, runpy.run_path, importlib.machinery.SourceFileLoader.
LOADERS = ("spec_from_file_location", "run_path", "SourceFileLoader")
SCRIPT = re.compile(r"(?:^|/)(scripts(?:/+[\w.-]+)?)")
# The one exception, (test file, script): scripts/torch_reference.py promises to run with torch
# and numpy alone, without this package; test_standalone_scripts.py keeps that promise by
# running the file itself by path in a bare interpreter (no test imports its code).
STANDALONE = {("test_standalone_scripts.py", "scripts/torch_reference.py")}


def _functions(path: str):
  tree = pysource.parse_file(path)
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def test_no_library_function_is_longer_than_100_lines():
  paths = sorted(glob.glob(os.path.join(ROOT, "resnorm_jax", "**", "*.py"), recursive=True))
  assert len(paths) > 20
  long = [
    f"{os.path.relpath(p, ROOT)}:{line} {name} ({n} lines)"
    for p in paths
    for name, line, n in _functions(p)
    if n > MAX_LINES
  ]
  assert not long, long


def test_the_line_count_sees_a_long_function(tmp_path):
  body = "\n".join(f"  x{i} = {i}" for i in range(MAX_LINES))
  path = tmp_path / "m.py"
  path.write_text(f"def f():\n{body}\n")
  assert [n for _, _, n in _functions(str(path))] == [MAX_LINES + 1]


def test_scripts_and_tests_do_not_import_scripts():
  """Code a script and a test share lives in the library: no script imports another, no test
  imports a script (scripts/ is not a package on the path)."""
  scripts = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "scripts", "*.py"))}
  offenders = []
  for folder in ("scripts", "tests"):
    for path in glob.glob(os.path.join(ROOT, folder, "*.py")):
      for node in ast.walk(pysource.parse_file(path)):
        if isinstance(node, ast.Import):
          names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
          names = [node.module or ""]
        else:
          continue
        bad = [n for n in names if n in scripts or n.split(".")[0] == "scripts"]
        offenders += [f"{folder}/{os.path.basename(path)}: {n}" for n in bad]
  assert not offenders, offenders


def _own_nodes(scope: ast.AST):
  """The nodes of a module or function body, not those of the functions inside it."""
  todo = list(ast.iter_child_nodes(scope))
  while todo:
    node = todo.pop()
    yield node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      todo += ast.iter_child_nodes(node)


def _assigned(scope: ast.AST) -> dict[str, list[ast.AST]]:
  """name -> the values a module or function body assigns it."""
  out: dict[str, list[ast.AST]] = {}
  for node in _own_nodes(scope):
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
      for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
        if isinstance(target, ast.Name):
          out.setdefault(target.id, []).append(node.value)
  return out


def _pieces(node: ast.AST, scopes: list[dict[str, list[ast.AST]]], seen: set[str]) -> list[str]:
  """The string pieces of an expression, a name followed to what its function assigns it, or
  else the module (`path = os.path.join(ROOT, "scripts", ...)` in a test's helper)."""
  out = []
  for child in ast.walk(node):
    if isinstance(child, ast.Constant) and isinstance(child.value, str):
      out.append(child.value)
    elif isinstance(child, ast.Name) and child.id not in seen:
      seen.add(child.id)
      values = next((s[child.id] for s in scopes if child.id in s), [])
      for value in values:
        out += _pieces(value, scopes, seen)
  return out


def _loader_args(node: ast.AST) -> list[ast.AST]:
  """The arguments of a call of one of LOADERS, or the fields of an f-string of code that
  calls one (the `runpy.run_path({path!r})` a subprocess runs); [] for any other node."""
  if isinstance(node, ast.Call):
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in LOADERS:
      return [*node.args, *(k.value for k in node.keywords)]
  elif isinstance(node, ast.JoinedStr):
    text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if any(f"{name}(" in text for name in LOADERS):
      return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
  return []


def _script_loads(path: str) -> list[tuple[int, str]]:
  """(line, script) of every load by path of a file under scripts/ in a Python file: a loader
  whose path argument names scripts/ (_loader_args)."""
  tree = pysource.parse_file(path)
  module = _assigned(tree)
  found = []
  nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
  for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, nested))]:
    scopes = [module] if scope is tree else [_assigned(scope), module]
    for node in _own_nodes(scope):
      for arg in _loader_args(node):
        match = SCRIPT.search("/".join(_pieces(arg, scopes, set())))
        if match:
          found.append((node.lineno, re.sub("/+", "/", match[1])))
  return sorted(found)


def test_tests_do_not_load_scripts_by_path():
  """A test reaches a script's code through the library: none loads a file under scripts/ by
  path (which the import check above does not see), save STANDALONE's."""
  loads = []
  for path in sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True)):
    name = os.path.basename(path)
    loads += [
      f"{os.path.relpath(path, ROOT)}:{line} loads {script}"
      for line, script in _script_loads(path)
      if (name, script) not in STANDALONE
    ]
  assert not loads, loads


def test_the_load_check_sees_each_way_of_loading_a_script(tmp_path):
  """The check above can fail: each loader, the path as os.path.join's parts, an f-string or a
  name its helper assigns, and code run in a subprocess; a config file is not a script; the
  torch_reference exception is a load the check sees."""
  src = tmp_path / "test_x.py"
  src.write_text(
    "import importlib.util, os, runpy\n"
    "from importlib.machinery import SourceFileLoader\n"
    "ROOT = os.path.dirname(__file__)\n"
    "importlib.util.spec_from_file_location('a', os.path.join(ROOT, 'scripts', 'a.py'))\n"
    "def _module():\n"
    "  path = os.path.join(ROOT, 'scripts/b.py')\n"
    "  return importlib.util.spec_from_file_location('b', path)\n"
    "runpy.run_path(f'{ROOT}/scripts/c.py')\n"
    "SourceFileLoader('d', 'scripts/d.py').load_module()\n"
    'CODE = f\'import runpy; runpy.run_path({os.path.join(ROOT, "scripts", "e.py")!r})\'\n'
    "importlib.util.spec_from_file_location('c', os.path.join(ROOT, 'configs', 'c.py'))\n"
  )
  assert _script_loads(str(src)) == [
    (4, "scripts/a.py"),
    (7, "scripts/b.py"),
    (8, "scripts/c.py"),
    (9, "scripts/d.py"),
    (10, "scripts/e.py"),
  ]
  standalone = os.path.join(ROOT, "tests", "test_standalone_scripts.py")
  assert {("test_standalone_scripts.py", s) for _, s in _script_loads(standalone)} == STANDALONE
