"""The README's row of the early warning (docs/early_warning/; the analysis is
resnorm_jax/analysis/early_warning.py): can the first steps tell a doomed run?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from resnorm_jax.analysis.claims.docs_data import Claim, optional

# What the row quotes (docs/early_warning/auc_vs_k.png marks the same points): the
# all-core-signals predictor on runs still on the plateau at k, per data set: (results.csv's
# set, its name in the row, the AUC column quoted). The survival cells are 12 seeds of one
# config each: the question there is which seeds of a cell escape (the AUC within a cell);
# across the grid's cells, which cells (pooled AUC).
QUOTED_PREDICTOR = "all core signals"
QUOTED = (
  ("survival, on the plateau at k", "survival seeds", "within_cell_auc"),
  ("stdlib grid, on the plateau at k", "grid", "auc"),
  ("shakespeare, on the plateau at k", "Shakespeare", "auc"),
)
QUOTED_STOP_SWEEP = "stdlib grid"


def quoted_stop(savings: Sequence[Mapping[str, str]]) -> Mapping[str, str] | None:
  """The savings.csv row the README quotes: the stdlib grid's stop at its smallest k."""
  save = [r for r in savings if r["sweep"] == QUOTED_STOP_SWEEP]
  return min(save, key=lambda r: int(r["k"])) if save else None


def row_early_warning() -> Claim | None:
  """Held-out AUC of the pre-specified all-core-signals predictor on runs still on the
  plateau at step k, per data set; the earliest k at AUC >= 0.9; the replayed stop rule."""
  rows = optional("docs/early_warning/results.csv")
  if not rows:
    return None
  ks = sorted({int(r["k"]) for r in rows})
  parts, early, first_k = [], [], []
  for key, name, column in QUOTED:
    got = {
      int(r["k"]): float(r[column])
      for r in rows
      if r["set"] == key and r["predictor"] == QUOTED_PREDICTOR and r[column] not in ("", "nan")
    }
    if not got:
      continue
    parts.append(f"{name} " + "/".join(f"{got[k]:.2f}" if k in got else "-" for k in ks))
    if ks[0] in got:
      first_k.append(f"{name} {got[ks[0]]:.2f}")
    first = next((k for k in ks if got.get(k, 0) >= 0.9), None)
    early.append(f"{name.split(' ')[0]} at {first}" if first else f"{name.split(' ')[0]} never")
  stop = quoted_stop(optional("docs/early_warning/savings.csv"))
  text = (
    f"held-out AUC at k = {'/'.join(map(str, ks))}: "
    + "; ".join(parts)
    + f" (0.9: {', '.join(early)})"
  )
  if stop:
    text += (
      f"; a stop at {stop['k']} saves {float(stop['core_hours_saved']):.1f} of "
      f"{float(stop['core_hours_total']):.1f} core-hours "
      f"({stop['stopped_that_would_have_escaped']} of {stop['escaped']} trained lost)"
    )
  return Claim(
    "Early warning: can the first steps tell a doomed run?",
    text,
    "runs on the plateau at k (survival: AUC within a cell's seeds); logistic regression on "
    "loss, gradient, update, parameter norms; cells held out; fit on stdlib; committed runs",
    "[figure](docs/early_warning/auc_vs_k.png), `docs/early_warning/results.csv`",
    f"held-out AUC at step {ks[0]}: " + ", ".join(first_k),
    "committed runs on the plateau at k; cells held out",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  200: row_early_warning,
}
