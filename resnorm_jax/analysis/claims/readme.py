"""The README's Results section and docs/results.md's generated parts: the rows every module of
this package declares (`README_ROWS`, in the order of their places), the answer on top, the
survival section, the facts in prose (`FACTS`); checked against the files, or written into
them. scripts/claims.py is the command line; tests/test_claims.py runs the check. No JAX.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from types import ModuleType

from resnorm_jax.analysis import claims as _package
from resnorm_jax.analysis import doc_sections, survival_section
from resnorm_jax.analysis.claims import docs_data
from resnorm_jax.analysis.claims.lr_sensitivity import answer
from resnorm_jax.analysis.claims.survival import render_survival

Row = Callable[[], list[str] | None]

README = os.path.join(docs_data.ROOT, "README.md")
RESULTS_MD = os.path.join(docs_data.ROOT, "docs", docs_data.RESULTS_MD_NAME)
BEGIN = "<!-- results: written by scripts/claims.py from docs/ data; edit there -->"
END = "<!-- end of results -->"


def row_modules() -> list[ModuleType]:
  """Every module of this package, imported (those that declare rows or facts among them)."""
  return [
    importlib.import_module(f"{_package.__name__}.{m.name}")
    for m in sorted(pkgutil.iter_modules(_package.__path__), key=lambda m: m.name)
  ]


def _rows() -> tuple[Row, ...]:
  """The README's rows in the order of their declared places; two rows in one place refused."""
  placed: dict[int, Row] = {}
  for module in row_modules():
    for place, row in getattr(module, "README_ROWS", {}).items():
      if place in placed:
        raise ValueError(f"README row place {place}: {placed[place].__name__} and {row.__name__}")
      placed[place] = row
  return tuple(placed[p] for p in sorted(placed))


def _facts() -> dict[str, doc_sections.Fact]:
  """Every module's FACTS in one table; a fact named twice refused."""
  facts: dict[str, doc_sections.Fact] = {}
  for module in row_modules():
    for name, fact in getattr(module, "FACTS", {}).items():
      if name in facts:
        raise ValueError(f"fact {name} declared twice ({module.__name__})")
      facts[name] = fact
  return facts


ROWS = _rows()
FACTS = _facts()


def render() -> str:
  """The Results section's body between the markers."""
  lines = [
    BEGIN,
    answer(),
    "",
    "| claim | what the runs show | budget, seeds, corpus | figure / data |",
    "| --- | --- | --- | --- |",
  ]
  for make in ROWS:
    row = make()
    if row:
      lines.append("| " + " | ".join(row) + " |")
  lines.append(END)
  return "\n".join(lines)


def section(text: str, begin: str = BEGIN, end: str = END) -> str | None:
  """The README's Results section of `text` (markers included), None when absent."""
  return doc_sections.section(text, begin, end)


# (file, begin marker, end marker, renderer): every generated section
SECTIONS = (
  (README, BEGIN, END, render),
  (RESULTS_MD, survival_section.BEGIN, survival_section.END, render_survival),
)
PATHS = (README, RESULTS_MD)
# The docs READMEs' generated sections (each module's DOC_SECTIONS), checked against their
# own file only: their name (README.md) is the top README's.
DOC_SECTIONS = tuple(s for m in row_modules() for s in getattr(m, "DOC_SECTIONS", ()))


# The docs READMEs whose prose states run facts (`<!-- fact:gap:<run> -->`...: docs_data.run_fact).
DOC_FACT_FILES = (os.path.join(docs_data.ROOT, "docs", "stabilizers", "README.md"),)


def check_docs() -> list[str]:
  """The differences between the docs READMEs' generated sections and facts and their data."""
  problems = [p for s in DOC_SECTIONS for p in doc_sections.check(s[0], [s])]
  for path in DOC_FACT_FILES:
    problems += doc_sections.check_facts(path, {}, docs_data.run_fact)
  return problems


def write_docs() -> None:
  for s in DOC_SECTIONS:
    doc_sections.write(s[0], [s])
  for path in DOC_FACT_FILES:
    doc_sections.write_facts(path, {}, docs_data.run_fact)


def check(path: str = README) -> list[str]:
  """The differences between a file's generated sections and facts (those of the file of the
  same name: README.md, results.md) and the data's: empty when they agree."""
  return doc_sections.check(path, SECTIONS) + doc_sections.check_facts(
    path, FACTS, docs_data.run_fact
  )


def write(path: str) -> None:
  """Rewrites a file's generated sections and facts from the data (ValueError: markers
  missing)."""
  doc_sections.write(path, SECTIONS)
  doc_sections.write_facts(path, FACTS, docs_data.run_fact)
