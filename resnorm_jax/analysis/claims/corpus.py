"""The README's row of the corpus axis (docs/second_corpus/; the analysis is
resnorm_jax/analysis/corpus.py): the edges on a second corpus."""

from __future__ import annotations

from resnorm_jax.analysis.claims.docs_data import MAIN, Claim, exists, lr_text, read, tokens_note
from resnorm_jax.analysis.claims.edges import edge, edge_lr, kept_cells, lr_cells_of
from resnorm_jax.analysis.style import variant_label


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
