"""Generated sections of a Markdown file: the text between a begin and an end marker, written
from data and checked against it, so a number and its sentence cannot disagree.

A section is (file, begin marker, end marker, renderer); the renderer returns the whole
section, markers included. `check` compares a file's sections with their renderers' text,
`write` replaces them. scripts/claims.py holds the project's sections. No JAX here.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence

Section = tuple[str, str, str, Callable[[], str]]


def section(text: str, begin: str, end: str) -> str | None:
  """The text between the markers (markers included), None when absent."""
  if begin not in text or end not in text:
    return None
  start = text.index(begin)
  return text[start : text.index(end, start) + len(end)]


def _mine(path: str, sections: Sequence[Section]) -> list[Section]:
  """The sections of the file of `path`'s name (a copy elsewhere is checked as its original)."""
  return [s for s in sections if os.path.basename(s[0]) == os.path.basename(path)]


def check(path: str, sections: Sequence[Section]) -> list[str]:
  """The differences between a file's generated sections and their renderers' text: empty
  when they agree; a missing pair of markers is one problem naming them."""
  with open(path) as f:
    text = f.read()
  problems = []
  for _, begin, end, render in _mine(path, sections):
    have = section(text, begin, end)
    if have is None:
      problems.append(f"{path}: no results markers ({begin!r} ... {end!r})")
      continue
    want = render()
    if have != want:
      problems += difflib.unified_diff(have.splitlines(), want.splitlines(), path, "data", n=0)
  return problems


def write(path: str, sections: Sequence[Section]) -> None:
  """Rewrites a file's generated sections; ValueError naming the markers when one is absent."""
  with open(path) as f:
    text = f.read()
  for _, begin, end, render in _mine(path, sections):
    have = section(text, begin, end)
    if have is None:
      raise ValueError(f"{path}: add the markers {begin!r} and {end!r} where the section goes")
    text = text.replace(have, render())
  with open(path, "w") as f:
    f.write(text)
