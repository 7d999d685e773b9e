"""The README's row of the init-or-data factorial at Post-LN's edge (docs/early_warning/
init_or_data.csv, scripts/init_or_data.py's; the grid is configs/sweeps/init_or_data.py): the
verdict its rule gives, or how far the factorial has run. No JAX."""

from __future__ import annotations

from resnorm_jax.analysis import init_or_data as iod
from resnorm_jax.analysis.claims.docs_data import Claim, optional

CSV = "docs/early_warning/init_or_data.csv"
PREDICTORS = "docs/early_warning/init_or_data_predictors.csv"
PAIRS = 16  # the grid's 4 x 4


def best_init_score() -> dict[str, str] | None:
  """The predictors table's best init-time score (the row with its best-of-the-scores test)."""
  return next((r for r in optional(PREDICTORS) if r.get("best_init_p")), None)


def row_init_or_data() -> Claim | None:
  runs = iod.from_csv(optional(CSV))
  if not runs:
    return None
  d = iod.decide(runs)
  kept = sum(r["kept"] for r in runs)
  if d is None:
    result = f"not decided yet: {len(runs)} of {PAIRS} runs, {kept} kept an escape"
    headline = result
  else:
    s, f = d["share_kept"], d["share_passage"]
    result = (
      f"variance share of the init / data seed: first passage "
      f"{iod.fmt(f['init'])} (p {iod.fmt(d['p_passage'][0], 3)}) / {iod.fmt(f['data'])} (p "
      f"{iod.fmt(d['p_passage'][1], 3)}); kept {iod.fmt(s['init'])} (p "
      f"{iod.fmt(d['p_kept'][0], 3)}) / {iod.fmt(s['data'])} (p "
      f"{iod.fmt(d['p_kept'][1], 3)}); {d['kept']} of {d['n']} kept"
    )
    best = best_init_score()
    if best:
      result += (
        f"; best init score {best['score']}: held-out AUC {float(best['loo_auc']):.2f} "
        f"({float(best['auc_lo']):.2f}-{float(best['auc_hi']):.2f}), best-of p "
        f"{float(best['best_init_p']):.3f}"
      )
    headline = (
      f"the init seed explains {iod.fmt(f['init'])} of the first passage's variance (p "
      f"{iod.fmt(d['p_passage'][0], 3)}), the data seed {iod.fmt(f['data'])}"
    )
  return Claim(
    "At the edge, init or data order?",
    result,
    "Post-LN 12L, lr 7e-4, 1,500 steps, no warmup; 4 init x 4 data seeds, one run each; "
    "permutation tests; stdlib",
    "[page](docs/early_warning/init_or_data.md), `docs/early_warning/init_or_data.csv`, "
    "`docs/early_warning/init_or_data_analysis.csv`, "
    "`docs/early_warning/init_or_data_predictors.csv`",
    headline,
    "Post-LN 12L at 7e-4, 1,500 steps; 4 init x 4 data seeds",
  )


README_ROWS = {195: row_init_or_data}
