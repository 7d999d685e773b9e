"""The README's row of the stabilizers at Post-LN's edge (docs/stabilizers/: the grid is
configs/sweeps/stabilizers.py, the tables scripts/survival.py's): each stabilizer's odds of an
escape kept to the end beside plain Post-LN's in the same cell (docs/survival/). No JAX."""

from __future__ import annotations

from resnorm_jax.analysis.claims.docs_data import optional
from resnorm_jax.analysis.claims.edges import survival_cells
from resnorm_jax.analysis.stats import clopper_pearson
from resnorm_jax.analysis.style import lr_label

CELLS = "docs/stabilizers/cells.csv"
BASE = "postnorm"  # the variant every stabilizer's cell is Post-LN plus one key of
# The stabilizers by their part of the cell's name (postnorm-<part>), in the grid's order.
LABELS = {
  "softcap": "softcap",
  "attngate": "gated attn",
  "sinks": "sinks",
  "qknorm": "qk-norm",
  "zloss": "z-loss",
  "adamatan2": "Adam-atan2",
  "muon": "Muon",
}
# A cell of fewer seeds is listed with its k/n, marked a screen ('*'), and no interval.
MIN_SEEDS = 4


def kept_odds(cell: dict[str, str]) -> str:
  """'k/n (lo-hi)': the escapes kept to the end of n seeds and the kept fraction's 95%
  interval (Clopper-Pearson); 'k/n*', a screen, under MIN_SEEDS seeds."""
  kept, n = int(cell["escaped_for_good"]), int(cell["seeds"])
  if n < MIN_SEEDS:
    return f"{kept}/{n}*"
  lo, hi = clopper_pearson(kept, n)
  return f"{kept}/{n} ({lo:.2f}-{hi:.2f})"


def stabilizer_of(variant: str) -> str | None:
  """'attngate' of 'postnorm-attngate'; None for another cell's name."""
  part = variant.removeprefix(f"{BASE}-")
  return part if part != variant and part in LABELS else None


def odds_at_edge(cells: list[dict[str, str]], base: list[dict[str, str]]) -> list[str]:
  """Per (depth, lr) of the stabilizers' cells: 'Post-LN 12L at 1e-3: plain 0/12 (...);
  gated attn 1/1*; ...', the stabilizers in LABELS' order."""
  groups: dict[tuple[int, float], dict[str, dict[str, str]]] = {}
  for c in cells:
    name = stabilizer_of(c["variant"])
    if name:
      groups.setdefault((int(c["num_layers"]), float(c["lr"])), {})[name] = c
  out = []
  for (depth, lr), by_name in sorted(groups.items()):
    plain = [
      c
      for c in base
      if c["variant"] == BASE and int(c["num_layers"]) == depth and float(c["lr"]) == lr
    ]
    parts = [f"plain {kept_odds(plain[0])}" if plain else "plain not run"]
    parts += [f"{LABELS[n]} {kept_odds(by_name[n])}" for n in LABELS if n in by_name]
    out.append(f"Post-LN {depth}L at {lr_label(lr, 4)}: " + "; ".join(parts))
  return out


def row_stabilizers() -> list[str] | None:
  cells = [c for c in optional(CELLS) if stabilizer_of(c["variant"])]
  if not cells:
    return None
  horizon = int(cells[0]["horizon"])
  seeds = sorted({int(c["seeds"]) for c in cells})
  n_seeds = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
  return [
    "What practitioners reach for, at Post-LN's edge",
    f"escapes kept to step {horizon:,}, of n seeds (95% interval): "
    + " / ".join(odds_at_edge(cells, survival_cells()))
    + f" (*: under {MIN_SEEDS} seeds, a screen)",
    f"{horizon:,} steps, no warmup, constant lr, eval every 25 steps on 8,192 tokens; "
    f"{n_seeds} seed{'s' if seeds != [1] else ''} per stabilizer cell, 12 for plain Post-LN; "
    "stdlib",
    "[stabilizers](docs/stabilizers/survival.png), `docs/stabilizers/cells.csv`",
  ]


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  25: row_stabilizers,
}
