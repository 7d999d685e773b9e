"""Shape of the library code: no function in resnorm_jax/ longer than 100 lines, and no
script or test importing a script (code scripts and tests share lives in the library)."""

import ast
import glob
import os

from resnorm_jax.config import pysource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 100


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
