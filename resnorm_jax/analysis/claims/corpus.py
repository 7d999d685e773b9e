"""The README's row of the corpus axis (docs/second_corpus/; the analysis is
resnorm_jax/analysis/corpus.py): the edges on a second corpus."""

from __future__ import annotations

import functools
import os

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  MAIN,
  RESULTS_MD_NAME,
  ROOT,
  Claim,
  exists,
  lr_text,
  read,
  tokens_note,
)
from resnorm_jax.analysis.claims.edges import edge, edge_lr, kept_cells, lr_cells_of
from resnorm_jax.analysis.claims.width import wall_seconds
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.runs import status


def row_second_corpus() -> Claim | None:
  """At 12 layers, each variant's largest lr that trains on some seed and its best lr, on the
  stdlib and on the second corpus (docs/second_corpus/results.csv: both columns)."""
  path = "docs/second_corpus/results.csv"
  if not exists(path):
    return None
  rows = read(path)
  corpora = sorted({r["data"] for r in rows}, key=lambda c: (c != "stdlib bytes", c))
  if len(corpora) < 2:
    return None
  short = {"stdlib bytes": "stdlib", "tinyshakespeare.txt": "Shakespeare"}
  edges = {(r["variant"], r["data"]): r for r in read("docs/second_corpus/edges.csv")}
  parts, moved = [], []
  for variant in MAIN:
    reach, best = [], []
    for c in corpora:
      e = edges.get((variant, c))
      cells = lr_cells_of([r for r in rows if r["data"] == c])
      # stdlib's survival cells (12 seeds, 1,500 steps) stand for its grid's: kept escapes
      reach.append(edge(kept_cells(cells) if c == "stdlib bytes" else cells, variant, 12))
      best.append(lr_text(float(e["best_lr"])) if e and e["best_lr"] else "none")
    parts.append(f"{variant_label(variant)} to {' / '.join(reach)}, best {' / '.join(best)}")
    moved.append(f"{variant_label(variant)} {' / '.join(edge_lr(t) for t in reach)}")
  seeds = sorted({r["seed"] for r in rows if r["data"] != "stdlib bytes"}, key=int)
  names = " / ".join(short.get(c, c) for c in corpora)
  extra = f", {seeds[0]}-{seeds[-1]} on Shakespeare next to edges" if len(seeds) > 1 else ""
  return Claim(
    "The edges on a second corpus",
    f"12 layers, largest lr whose escape lasts on some seed on {names}: " + "; ".join(parts),
    f"1,000 steps, no warmup, constant lr 1.25e-4 to 3.2e-2; seed 0{extra}; each corpus "
    "against its own no-context loss; "
    + tokens_note("docs/second_corpus/runs/shakespeare-deepnorm-L12-lr0.000125-s0"),
    "[curves](docs/second_corpus/curves.png), `docs/second_corpus/edges.csv`",
    f"largest lr that trains at 12 layers, {names}: " + ", ".join(moved),
    f"1,000 steps; seed 0{extra}",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  190: row_second_corpus,
}


# Numbers in docs/second_corpus/README.md's prose and its hand-typed table, from the two CSVs
# scripts/second_corpus.py writes (results.csv: a row per run, the stdlib column's 12-layer
# rows included; edges.csv: a row per variant and corpus).
README = os.path.join(ROOT, "docs", "second_corpus", "README.md")
RESULTS = "docs/second_corpus/results.csv"
EDGES = "docs/second_corpus/edges.csv"
CORPORA = {"stdlib": "stdlib bytes", "shakespeare": "tinyshakespeare.txt"}  # name: `data`


def outcome_count(outcome: str, variant: str, corpus: str, lr: float) -> str:
  """'2 of 3': the runs of one cell (variant, corpus, lr; results.csv) with that outcome."""
  runs = [
    r
    for r in read(RESULTS)
    if r["variant"] == variant and r["data"] == CORPORA[corpus] and float(r["opt.lr"]) == lr
  ]
  return f"{sum(r['outcome'] == outcome for r in runs)} of {len(runs)}"


def best_lr(variant: str, corpus: str) -> str:
  """'4e-3': a variant's best lr on a corpus (edges.csv: the lowest loss, seed means)."""
  row = next(r for r in read(EDGES) if r["variant"] == variant and r["data"] == CORPORA[corpus])
  return lr_text(float(row["best_lr"]))


def no_context(corpus: str) -> str:
  """'3.347': a corpus's no-context loss (its runs' `baseline`, the held-out unigram entropy);
  'a / b' should its runs disagree."""
  values = sorted(
    {f"{float(r['baseline']):.3f}" for r in read(RESULTS) if r["data"] == CORPORA[corpus]}
  )
  return " / ".join(values)


def diverged(corpus: str) -> str:
  """'0 of 35': a corpus's runs that diverged (results.csv)."""
  runs = [r for r in read(RESULTS) if r["data"] == CORPORA[corpus]]
  return f"{sum(r['outcome'] == status.DIVERGED for r in runs)} of {len(runs)}"


RUNS = "docs/second_corpus/runs"


def _wall_seconds() -> dict[str, float]:
  return wall_seconds(RUNS)


def wall_range() -> str:
  """'4-6': the shortest and longest wall time of the Shakespeare runs, in whole minutes."""
  walls = _wall_seconds().values()
  return f"{round(min(walls) / 60)}-{round(max(walls) / 60)}"


# (outcome, variant, corpus, lr): the cells whose k-of-n the page states
COUNTED = (
  (status.TRAINED, "postnorm", "stdlib", 5e-4),
  (status.TRAINED, "postnorm", "stdlib", 1e-3),
  (status.TRAINED, "postnorm", "shakespeare", 5e-4),
  (status.STUCK, "postnorm", "shakespeare", 1e-3),
  (status.TRAINED, "deepnorm", "stdlib", 4e-3),
  (status.STUCK, "deepnorm", "stdlib", 8e-3),
  (status.TRAINED, "deepnorm", "shakespeare", 1e-3),
  (status.STUCK, "deepnorm", "shakespeare", 2e-3),
)
DOC_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"second_corpus.{o}:{v}:{c}:{lr_text(lr)}": (
      README,
      functools.partial(outcome_count, o, v, c, lr),
    )
    for o, v, c, lr in COUNTED
  },
  **{
    f"second_corpus.best_lr:{v}:{c}": (README, functools.partial(best_lr, v, c))
    for v in MAIN
    for c in CORPORA
  },
  **{f"second_corpus.no_context:{c}": (README, functools.partial(no_context, c)) for c in CORPORA},
  "second_corpus.diverged:shakespeare": (README, functools.partial(diverged, "shakespeare")),
  "second_corpus.wall_minutes": (README, wall_range),
}


def train_entropy() -> str:
  """'3.252': the unigram entropy of the stdlib's train split (docs/runs/results.csv's
  `unigram_entropy`); 'a / b' should its runs disagree."""
  values = {f"{float(r['unigram_entropy']):.3f}" for r in read("docs/runs/results.csv")}
  return " / ".join(sorted(values))


# Numbers in docs/results.md's prose computed here (resnorm_jax.analysis.claims.readme).
FACTS: dict[str, doc_sections.Fact] = {
  "corpus.train_entropy.stdlib": (RESULTS_MD_NAME, train_entropy),
  "corpus.no_context.stdlib": (RESULTS_MD_NAME, functools.partial(no_context, "stdlib")),
  "corpus.no_context.shakespeare": (RESULTS_MD_NAME, functools.partial(no_context, "shakespeare")),
  **{
    f"corpus.count:{o}:{v}:{c}:{lr_text(lr)}": (
      RESULTS_MD_NAME,
      functools.partial(outcome_count, o, v, c, lr),
    )
    for o, v, c, lr in (
      (status.TRAINED, "deepnorm", "shakespeare", 1e-3),
      (status.STUCK, "deepnorm", "shakespeare", 2e-3),
      (status.TRAINED, "postnorm", "shakespeare", 5e-4),
      (status.TRAINED, "postnorm", "stdlib", 5e-4),
      (status.STUCK, "postnorm", "shakespeare", 1e-3),
      (status.TRAINED, "postnorm", "stdlib", 1e-3),
    )
  },
}
