"""Python source read as a syntax tree, for the checks that read code (declared variant keys,
a named config's drawing constants, the config schema's comments, the tests on code shape).

CPython 3.11 can raise a spurious `SystemError: AST constructor recursion depth mismatch` from
`ast.parse` when a second parse runs inside the first one's conversion of the tree: the depth
counter is shared (python/cpython#106905). Garbage collection during the conversion can run such
a parse: a full test run failed on it when an asyncio task left by orbax's restore of a damaged
checkpoint was collected, and its "exception was never retrieved" log formatted a traceback,
which 3.11 does by parsing the source lines. The source is the same on a second try, so parse
retries that one error.
"""

import ast

_SPURIOUS = "AST constructor recursion depth mismatch"
_TRIES = 3


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
  """ast.parse, retried on CPython 3.11's spurious recursion-depth SystemError only."""
  for _ in range(_TRIES - 1):
    try:
      return ast.parse(source, filename=filename)
    except SystemError as e:
      if _SPURIOUS not in str(e):
        raise
  return ast.parse(source, filename=filename)  # a last failure is raised


def parse_file(path: str) -> ast.Module:
  """The syntax tree of one UTF-8 Python file."""
  with open(path, encoding="utf-8") as f:
    return parse(f.read(), filename=path)
