"""The README's row of the survival cells (docs/survival/; the analysis is
resnorm_jax/analysis/survival.py) and docs/results.md's escape-probability section."""

from __future__ import annotations

from resnorm_jax.analysis import survival_section
from resnorm_jax.analysis.claims.docs_data import Claim, read, tokens_note
from resnorm_jax.analysis.claims.edges import survival_cells
from resnorm_jax.analysis.survival_section import odds_by_cell


def row_survival() -> Claim | None:
  cells = survival_cells()
  if not cells:
    return None
  horizon = int(cells[0]["horizon"])
  low, high = min(int(c["seeds"]) for c in cells), max(int(c["seeds"]) for c in cells)
  n_seeds = f"{low}" if low == high else f"{low}-{high}"
  relapsed = sum(int(c["relapsed_runs"]) for c in cells)
  runs = sum(int(c["seeds"]) for c in cells)
  odds = sorted(cells, key=lambda c: int(c["escaped_for_good"]) / int(c["seeds"]))
  span = " to ".join(f"{c['escaped_for_good']}/{c['seeds']}" for c in (odds[0], odds[-1]))
  return Claim(
    "The odds at the edges",
    f"kept to step {horizon:,} (95% interval; first passages): "
    + odds_by_cell(cells, long=True)
    + f"; {relapsed} of {runs} fell back",
    f"{horizon:,} steps, eval every 25 steps on 8,192 tokens, {n_seeds} seeds per cell; stdlib; "
    + tokens_note("docs/survival/runs/deepnorm-L24-lr0.004-s0"),
    "[survival](docs/survival/survival.png), `docs/survival/cells.csv`",
    f"escape kept to the end on {span} seeds in {len(cells)} edge cells; {relapsed} of {runs} "
    "runs fell back",
    f"{horizon:,} steps; {n_seeds} seeds per cell",
  )


def render_survival() -> str:
  """docs/results.md's escape-probability section (resnorm_jax/analysis/survival_section.py)."""
  cells = survival_cells()
  runs = read("docs/survival/runs.csv") if cells else []
  return survival_section.render(cells, runs, read("docs/lr_sensitivity/results.csv"))


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  20: row_survival,
}
