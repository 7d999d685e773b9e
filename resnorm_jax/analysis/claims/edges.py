"""The edge of a curve: the largest lr that trained on some seed, over the loss-vs-lr grid's
cells (variant, depth or width, lr), with the survival cells (12 seeds, 1,500 steps) standing for
the grid's where an escape has to last. No JAX."""

from __future__ import annotations

import collections

from resnorm_jax.analysis.claims.docs_data import exists, lr_text, read
from resnorm_jax.runs import status


def lr_cells(path: str = "docs/lr_sensitivity/results.csv") -> dict[tuple, list[str]]:
  """(variant, depth, lr) -> the outcomes of its seeds."""
  return lr_cells_of(read(path))


def lr_cells_of(rows: list[dict[str, str]], axis: str = "num_layers") -> dict[tuple, list[str]]:
  """(variant, axis value, lr) -> the outcomes of its seeds, from results.csv rows; the axis is
  the depth unless said (d_model for the width sweep)."""
  cells: dict[tuple, list[str]] = collections.defaultdict(list)
  for r in rows:
    cells[(r["variant"], int(r[axis]), float(r["opt.lr"]))].append(r["outcome"])
  return cells


def edge(cells: dict[tuple, list[str]], variant: str, depth: int, unit: str = " seeds") -> str:
  """The largest lr at which some seed trained, with '(k/n seeds)' when not every seed did
  ('(k/n)' with unit='')."""
  trained = [
    (lr, o)
    for (v, d, lr), o in cells.items()
    if v == variant and d == depth and status.TRAINED in o
  ]
  if not trained:
    return "none"
  lr, outcomes = max(trained)
  k, n = outcomes.count(status.TRAINED), len(outcomes)
  return lr_text(lr) + ("" if k == n else f" ({k}/{n}{unit})")


def edge_lr(text: str) -> str:
  """The lr of an edge() or kept_edge() text alone: '5e-4 (11/12 seeds; ...)' -> '5e-4'."""
  return text.split(" (")[0]


def across(values: list[str], at: list, unit: str = "layers") -> str:
  """'4e-3 at every depth' when the values agree, '2e-3 / 5e-4 at 6 / 12 layers' otherwise."""
  if len(set(values)) == 1:
    return f"{values[0]} at every {'depth' if unit == 'layers' else 'width'}"
  return f"{' / '.join(values)} at {' / '.join(map(str, at))} {unit}"


def kept_cells(
  cells: dict[tuple, list[str]], surv: list[dict[str, str]] | None = None
) -> dict[tuple, list[str]]:
  """`cells` with each survival cell (same variant, depth and lr, 12 seeds at 1,500 steps)
  standing for the grid's: its seeds' outcomes are 'trained' for an escape kept to the end and
  'fell back' / 'stuck' otherwise, so an edge is stated on escapes that last."""
  out = dict(cells)
  for c in survival_cells() if surv is None else surv:
    kept, fell = int(c["escaped_for_good"]), int(c["escaped"]) - int(c["escaped_for_good"])
    rest = int(c["seeds"]) - kept - fell
    out[(c["variant"], int(c["num_layers"]), float(c["lr"]))] = (
      [status.TRAINED] * kept + ["fell back"] * fell + [status.STUCK] * rest
    )
  return out


def kept_edge(cells: dict[tuple, list[str]], variant: str, depth: int) -> str:
  """edge() on kept escapes, with the lrs above it where some seed escaped and fell back:
  '5e-4 (11/12 seeds; 1e-3: 1 of 12 escaped, none kept)'."""
  text, note = edge(cells, variant, depth), first_passage_note(cells, variant, depth)
  if not note:
    return text
  return f"{text[:-1]}; {note})" if text.endswith(")") else f"{text} ({note})"


def first_passage_note(cells: dict[tuple, list[str]], variant: str, depth: int) -> str:
  """'1e-3: 1 of 12 escaped, none kept' for each lr above the kept edge where some seed escaped
  and fell back; '' where there is none."""
  kept = [
    lr for (v, d, lr), o in cells.items() if (v, d) == (variant, depth) and status.TRAINED in o
  ]
  top = max(kept, default=0.0)
  notes = [
    f"{lr_text(lr)}: {o.count('fell back')} of {len(o)} escaped, none kept"
    for (v, d, lr), o in sorted(cells.items())
    if (v, d) == (variant, depth) and lr > top and "fell back" in o
  ]
  return "; ".join(notes)


def survival_cells() -> list[dict[str, str]]:
  path = "docs/survival/cells.csv"
  return read(path) if exists(path) else []
