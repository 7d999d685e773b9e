"""Python source read as a syntax tree, for the checks that read code (declared variant keys,
a named config's drawing constants, the config schema's comments, the tests on code shape).

CPython 3.11 can raise a spurious `SystemError: AST constructor recursion depth mismatch` from
`ast.parse` while another thread of the process is also converting a syntax tree: the depth
counter is shared (python/cpython#106905). It was seen in full test runs after checkpoint tests
left threads behind. The source is the same on a second try, so parse retries that one error.
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
