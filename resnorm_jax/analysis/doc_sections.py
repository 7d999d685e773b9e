"""Generated sections of a Markdown file: the text between a begin and an end marker, written
from data and checked against it, so a number and its sentence cannot disagree.

A section is (file, begin marker, end marker, renderer); the renderer returns the whole
section, markers included. `check` compares a file's sections with their renderers' text,
`write` replaces them. scripts/claims.py holds the project's sections. No JAX here.

A number inside prose is a fact: `<!-- fact:NAME -->250 / 500 / 500<!-- /fact -->` (the
markers do not render), whose text a function computes from data. `check_facts` names every
fact whose text is not its function's, every fact name no function knows and every known fact
missing from its file; `write_facts` rewrites their texts.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Sequence

from resnorm_jax.files.nofollow import open_nofollow

Section = tuple[str, str, str, Callable[[], str]]
Fact = tuple[str, Callable[[], str]]  # (the file it is stated in, its text from the data)
Resolver = Callable[[str], "str | None"]  # a fact's text from its name alone; None: unknown
FACT = re.compile(r"<!-- fact:([\w.:/=-]+) -->(.*?)<!-- /fact -->", re.S)


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
  with open_nofollow(path, "w") as f:
    f.write(text)


def _facts_of(path: str, facts: dict[str, Fact]) -> dict[str, Fact]:
  return {n: f for n, f in facts.items() if os.path.basename(f[0]) == os.path.basename(path)}


def _want(name: str, facts: dict[str, Fact], resolve: Resolver | None) -> str | None:
  if name in facts:
    return facts[name][1]()
  return resolve(name) if resolve else None


def check_facts(path: str, facts: dict[str, Fact], resolve: Resolver | None = None) -> list[str]:
  """The facts of a file that disagree with their data, are unknown, or are missing. A name
  not in `facts` is asked of `resolve` (facts named by what they read, e.g. a run folder)."""
  with open(path) as f:
    text = f.read()
  mine, problems, seen = _facts_of(path, facts), [], set()
  for m in FACT.finditer(text):
    name, have = m.group(1), m.group(2)
    line = text.count("\n", 0, m.start()) + 1
    want = _want(name, facts, resolve)
    if want is None:
      problems.append(f"{path}:{line}: fact {name!r} is computed nowhere (scripts/claims.py FACTS)")
      continue
    seen.add(name)
    if have != want:
      problems.append(f"{path}:{line}: fact {name!r} says {have!r}; the data say {want!r}")
  problems += [f"{path}: fact {n!r} is not stated (add its markers)" for n in mine if n not in seen]
  return problems


def write_facts(path: str, facts: dict[str, Fact], resolve: Resolver | None = None) -> None:
  """Rewrites the text of every known fact of a file from its data."""
  with open(path) as f:
    text = f.read()

  def fill(m: re.Match) -> str:
    name = m.group(1)
    want = _want(name, facts, resolve)
    return m.group(0) if want is None else f"<!-- fact:{name} -->{want}<!-- /fact -->"

  new = FACT.sub(fill, text)
  if new != text:  # a page whose facts agree is left untouched
    with open_nofollow(path, "w") as f:
      f.write(new)


# A number as run results are written: 3 or 4 decimals (a loss, a gap) or a count "k of n".
RUN_NUMBER = re.compile(r"(?<![\w.])[+-]?\d\.\d{3,4}\b|\b\d+ of \d+\b")
_GENERATED_BEGIN = re.compile(r"<!-- .*(written by|generated)|<!-- boundary-table")
_GENERATED_END = re.compile(r"<!-- (end|/boundary)")


def untagged_numbers(text: str) -> list[tuple[int, str]]:
  """(line number, line) of each line stating a RUN_NUMBER outside a fact, a generated section
  and a code block: the numbers a page states by hand, which nothing checks."""
  found, generated, code = [], False, False
  for number, line in enumerate(text.splitlines(), 1):
    if line.startswith("```"):
      code = not code
      continue
    if _GENERATED_BEGIN.match(line):
      generated = True
      continue
    if _GENERATED_END.match(line):
      generated = False
      continue
    if not (generated or code) and RUN_NUMBER.search(FACT.sub("", line)):
      found.append((number, line))
  return found
