"""A run's status and outcome words are spelled once, in resnorm_jax/runs/status.py: every
library module names them through it, so a renamed or a new status cannot be missed in one
reader (a string literal that equals one, outside docstrings and f-string text, fails)."""

import ast
import glob
import os

from conftest import ROOT
from resnorm_jax.runs import status

WORDS = {*status.STATUSES, *status.OUTCOMES}
HOME = os.path.join("resnorm_jax", "runs", "status.py")


def spelled(source: str) -> list[tuple[int, str]]:
  """(line, word) of each string literal in `source` that is a status word, docstrings and
  the text parts of f-strings aside."""
  tree = ast.parse(source)
  skip = set()
  for node in ast.walk(tree):
    body = getattr(node, "body", None)
    if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        skip.add(id(body[0].value))
    if isinstance(node, ast.JoinedStr):
      skip.update(id(v) for v in node.values)
  return sorted(
    (n.lineno, n.value)
    for n in ast.walk(tree)
    if isinstance(n, ast.Constant) and n.value in WORDS and id(n) not in skip
  )


def test_the_check_sees_a_spelled_status_and_not_a_docstring_or_message():
  source = '"""completed"""\nx = "diverged"\ny = f"stuck {x}"\nz = status.STUCK\n'
  assert spelled(source) == [(2, "diverged")]


def test_no_library_module_spells_a_status_word():
  found = {}
  for path in glob.glob(os.path.join(ROOT, "resnorm_jax", "**", "*.py"), recursive=True):
    rel = os.path.relpath(path, ROOT)
    if rel == HOME:
      continue
    with open(path, encoding="utf-8") as f:
      hits = spelled(f.read())
    if hits:
      found[rel] = hits
  assert not found, f"status words spelled outside {HOME} (import them from there): {found}"
