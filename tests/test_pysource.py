"""pysource.parse retries CPython 3.11's spurious AST recursion-depth SystemError, and only it."""

import ast
import gc
import sys

import pytest

from resnorm_jax.files import pysource

MARK = "# " + "parsed by a test"  # split: pytest parsing this file is not caught
MISMATCH = "AST constructor recursion depth mismatch (before=144, after=195)"


def _flaky(monkeypatch, errors):
  """ast.parse raising each of `errors` once, in order, on the tests' sources (those holding
  MARK), then parsing; every other parse of the process (pytest's own) is left alone."""
  real, left, calls = ast.parse, list(errors), []

  def parse(source, *args, **kwargs):
    if MARK not in source:
      return real(source, *args, **kwargs)
    calls.append(kwargs.get("filename"))
    if left:
      raise left.pop(0)
    return real(source, *args, **kwargs)

  monkeypatch.setattr(pysource.ast, "parse", parse)
  return calls


def test_a_spurious_mismatch_is_retried_and_the_tree_is_the_file(monkeypatch, tmp_path):
  path = tmp_path / "m.py"
  path.write_text(f"X = 'a'  {MARK}\n", encoding="utf-8")
  calls = _flaky(monkeypatch, [SystemError(MISMATCH), SystemError(MISMATCH)])
  tree = pysource.parse_file(str(path))
  assert len(calls) == 3 and set(calls) == {str(path)}
  assert isinstance(tree.body[0], ast.Assign) and tree.body[0].value.value == "a"


def test_a_mismatch_on_every_try_is_raised(monkeypatch):
  calls = _flaky(monkeypatch, [SystemError(MISMATCH)] * 3)
  with pytest.raises(SystemError, match="recursion depth mismatch"):
    pysource.parse(f"X = 1  {MARK}\n")
  assert len(calls) == 3


def test_other_errors_are_raised_at_once(monkeypatch):
  calls = _flaky(monkeypatch, [SystemError("some other fault")])
  with pytest.raises(SystemError, match="some other fault"):
    pysource.parse(f"X = 1  {MARK}\n")
  assert len(calls) == 1
  monkeypatch.undo()
  with pytest.raises(SyntaxError):
    pysource.parse("def (:\n")


class _ParsesWhenCollected:
  """An object in a reference cycle (freed by the collector only) whose finalizer parses, as a
  collected asyncio task's error log does when it formats a traceback on CPython 3.11."""

  def __init__(self):
    self.me = self

  def __del__(self):
    ast.parse("f(x)[0]")


def _parse_with_a_parse_collected(parse, source: str):
  """parse(source) with an object left for the collector whose finalizer parses."""
  threshold = gc.get_threshold()
  gc.set_threshold(1)  # collect at the first allocations of the tree's conversion
  try:
    _ParsesWhenCollected()
    return parse(source)
  finally:
    gc.set_threshold(*threshold)


def test_a_parse_run_by_the_collector_inside_a_parse_is_survived():
  source = "\n".join(f"def f{i}(a):\n  return [a + {i} for _ in range(3)]" for i in range(300))
  if sys.version_info[:2] == (3, 11):  # the interpreter's own parse fails the same way
    with pytest.raises(SystemError, match="recursion depth mismatch"):
      _parse_with_a_parse_collected(ast.parse, source)
  tree = _parse_with_a_parse_collected(pysource.parse, source)
  assert [f.name for f in tree.body] == [f"f{i}" for i in range(300)]
