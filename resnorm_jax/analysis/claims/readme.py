"""The README's Results section and docs/results.md's generated parts, checked against the
files or written into them: the claims every module of this package declares (`README_ROWS`:
{place: row function returning a docs_data.Claim}, in the order of their places), each once in
a few words in the README under the answer (`render`) and once in full in docs/results.md's
"Every claim in full" (`render_full`), the short row linking to its full row's anchor; the
survival section; the facts in prose (`FACTS`). scripts/claims.py is the command line;
tests/test_claims.py runs the check. No JAX.
"""

from __future__ import annotations

import glob
import importlib
import os
import pkgutil
import re
from collections.abc import Callable
from types import ModuleType

from resnorm_jax.analysis import claims as _package
from resnorm_jax.analysis import doc_sections, survival_section
from resnorm_jax.analysis.claims import docs_data
from resnorm_jax.analysis.claims.lr_sensitivity import answer
from resnorm_jax.analysis.claims.survival import render_survival

Row = Callable[[], docs_data.Claim | None]

README = os.path.join(docs_data.ROOT, "README.md")
RESULTS_MD = os.path.join(docs_data.ROOT, "docs", docs_data.RESULTS_MD_NAME)
RESULTS_LINK = f"docs/{docs_data.RESULTS_MD_NAME}"  # from the README
BEGIN = "<!-- results: written by scripts/claims.py from docs/ data; edit there -->"
END = "<!-- end of results -->"
FULL_BEGIN = "<!-- claims in full: written by scripts/claims.py from docs/ data; edit there -->"
FULL_END = "<!-- end of claims in full -->"


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


def _facts(attr: str = "FACTS") -> dict[str, doc_sections.Fact]:
  """Every module's `attr` (FACTS: the README's and docs/results.md's; DOC_FACTS: a docs page's,
  by full path) in one table; a fact named twice refused."""
  facts: dict[str, doc_sections.Fact] = {}
  for module in row_modules():
    for name, fact in getattr(module, attr, {}).items():
      if name in facts:
        raise ValueError(f"fact {name} declared twice ({module.__name__})")
      facts[name] = fact
  return facts


ROWS = _rows()
FACTS = _facts()


def claims() -> list[docs_data.Claim]:
  """The claims the data support now, in the order of their places (a row function returns
  None while its sweep has not run)."""
  return [c for make in ROWS if (c := make()) is not None]


def anchor(claim: docs_data.Claim) -> str:
  """The id of a claim's full row in docs/results.md: its words, lower case, joined by '-'."""
  return re.sub(r"[^a-z0-9]+", "-", claim.claim.lower()).strip("-")


def _data_link(path: str) -> str:
  """'[results.csv](docs/lr_sensitivity/results.csv)'; a folder by its name: 'xiong_rescue/'."""
  name = os.path.basename(path.rstrip("/")) + ("/" if path.endswith("/") else "")
  return f"[{name}]({path})"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
  return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)] + [
    "| " + " | ".join(r) + " |" for r in rows
  ]


def render() -> str:
  """The README's Results section between its markers: the answer, then a short row per
  claim (claim, headline, seeds and budget, its full row and its data)."""
  found = claims()
  anchors = [anchor(c) for c in found]
  if len(set(anchors)) < len(anchors):
    raise ValueError(f"two claims share an anchor: {anchors}")
  rows = [
    c.short() + [f"[in full]({RESULTS_LINK}#{a}), " + ", ".join(_data_link(p) for p in c.data())]
    for c, a in zip(found, anchors, strict=True)
  ]
  head = ["claim", "result", "seeds, budget", "details"]
  return "\n".join([BEGIN, answer(), "", *_table(head, rows), END])


def render_full() -> str:
  """docs/results.md's "Every claim in full" between its markers: each claim's full row,
  anchored for the README's link, its links relative to docs/."""
  rows = []
  for c in claims():
    claim, result, budget, links = c.full()
    rows.append(
      [f'<a id="{anchor(c)}"></a>{claim}', result, budget, links.replace("](docs/", "](")]
    )
  head = ["claim", "what the runs show", "budget, seeds, corpus", "figure / data"]
  return "\n".join([FULL_BEGIN, *_table(head, rows), FULL_END])


def section(text: str, begin: str = BEGIN, end: str = END) -> str | None:
  """The README's Results section of `text` (markers included), None when absent."""
  return doc_sections.section(text, begin, end)


# (file, begin marker, end marker, renderer): every generated section
SECTIONS = (
  (README, BEGIN, END, render),
  (RESULTS_MD, FULL_BEGIN, FULL_END, render_full),
  (RESULTS_MD, survival_section.BEGIN, survival_section.END, render_survival),
)
PATHS = (README, RESULTS_MD)

# own file only: their name (README.md) is the top README's.
DOC_SECTIONS = tuple(s for m in row_modules() for s in getattr(m, "DOC_SECTIONS", ()))


DOC_FACTS = _facts("DOC_FACTS")


def doc_fact_files() -> list[str]:
  """The docs/ pages whose prose states facts: every .md under docs/ holding a fact marker or
  named by a DOC_FACTS entry (docs/results.md is checked with the README's FACTS)."""
  docs = os.path.join(docs_data.ROOT, "docs")
  found = {os.path.normpath(f[0]) for f in DOC_FACTS.values()}
  for path in glob.glob(os.path.join(docs, "**", "*.md"), recursive=True):
    if os.path.normpath(path) == os.path.normpath(RESULTS_MD) or os.path.islink(path):
      continue
    with open(path) as f:
      if "<!-- fact:" in f.read():
        found.add(os.path.normpath(path))
  return sorted(found)


def _facts_in(path: str) -> dict[str, doc_sections.Fact]:
  return {n: f for n, f in DOC_FACTS.items() if os.path.normpath(f[0]) == os.path.normpath(path)}


def check_docs() -> list[str]:
  """The differences between the docs pages' generated sections and facts and their data."""
  problems = [p for s in DOC_SECTIONS for p in doc_sections.check(s[0], [s])]
  for path in doc_fact_files():
    problems += doc_sections.check_facts(path, _facts_in(path), docs_data.run_fact)
  return problems


def write_docs() -> None:
  for s in DOC_SECTIONS:
    doc_sections.write(s[0], [s])
  for path in doc_fact_files():
    doc_sections.write_facts(path, _facts_in(path), docs_data.run_fact)


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
