"""docs/results.md's escape-probability section, and the odds as the README's Results cite
them, from docs/survival/'s cells.csv and runs.csv rows (resnorm_jax/analysis/survival.py writes
them) and the 1,000-step lr grid's rows. Pure text from rows: scripts/claims.py reads the files
and writes the section between BEGIN and END. No JAX here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from resnorm_jax.analysis.stats import clopper_pearson
from resnorm_jax.analysis.style import lr_label, variant_label
from resnorm_jax.runs.outcome import STUCK_MARGIN

Row = Mapping[str, str]
BEGIN = "<!-- survival: written by scripts/claims.py from docs/survival/; edit there -->"
END = "<!-- end of survival -->"


def odds_by_cell(cells: Sequence[Row], long: bool) -> str:
  """The odds of an escape kept to the end, the first passages beside them, a group per
  (variant, depth): 'Post-LN 12L: 5e-4 11/12 (0.62-1.00; 11), ...' (long: kept of seeds, the
  kept fraction's 95% interval; first passages) or 'Post-LN 12 layers 11/12 kept at 5e-4 (11 first
  passages), ...' (short)."""
  groups: dict[tuple[str, str], list[Row]] = {}
  for c in cells:
    groups.setdefault((c["variant"], c["num_layers"]), []).append(c)
  out = []
  for (variant, depth), members in groups.items():
    if long:
      parts = []
      for c in members:
        kept, n = int(c["escaped_for_good"]), int(c["seeds"])
        lo, hi = clopper_pearson(kept, n)
        parts.append(
          f"{lr_label(float(c['lr']), 4)} {kept}/{n} ({lo:.2f}-{hi:.2f}; {c['escaped']})"
        )
      out.append(f"{variant_label(variant)} {depth}L: " + ", ".join(parts))
    else:
      parts = [
        f"{c['escaped_for_good']}/{c['seeds']} kept at {lr_label(float(c['lr']), 4)} "
        f"({c['escaped']} first passage{'s' if int(c['escaped']) != 1 else ''})"
        for c in members
      ]
      out.append(f"{variant_label(variant)} {depth} layers " + ", ".join(parts))
  return "; ".join(out)


def _seed_key(r: Row) -> tuple:
  return (r["variant"], int(r["num_layers"]), float(r["opt.lr"]), int(r["seed"]))


def _relapses(relapsed: Sequence[Row]) -> list[str]:
  """The sentence on the runs that came below the margin and went back above it."""
  if not relapsed:
    return []
  told = []
  for r in relapsed:
    steps = r["relapse_steps"].split()
    told.append(
      f"{r['name']} first came {STUCK_MARGIN:g} below at step {int(r['first_passage']):,} and "
      f"was back above at step{'s' if len(steps) > 1 else ''} "
      f"{', '.join(f'{int(x):,}' for x in steps)} (below at {float(r['fraction_below']):.0%} of "
      f"its evals, last eval {r['final_eval_gap']} from the no-context loss, late trend "
      f"{r['late_trend']})"
    )
  return ["", "Relapses: " + "; ".join(told) + ": an escape at the edge need not last."]


def _grid_agreement(runs: Sequence[Row], grid_rows: Sequence[Row]) -> list[str]:
  """The same seeds in the 1,000-step grid (same config and seed: the same batches and init):
  whether each escaped by step 1,000 there and here."""
  grid = {_seed_key(r): r["escape_step"] for r in grid_rows}
  same, differ = 0, []
  for r in runs:
    key = _seed_key(r)
    if key not in grid:
      continue
    first, old = r["first_passage"], grid[key]
    early = first if first and int(first) <= 1000 else ""
    if (early == "") == (old == ""):
      same += 1
    else:
      differ.append(f"{r['name']} (grid {old or 'never'}, here {first or 'never'})")
  return [
    "",
    f"Seeds shared with the 1,000-step loss-vs-lr grid (same config and seed: the same init and "
    f"batches): {same} of {same + len(differ)} agree on whether the run escaped by step 1,000"
    + (f"; they differ on {', '.join(differ)}" if differ else "")
    + ". Data: `docs/survival/runs.csv`, `docs/survival/cells.csv`; figure: "
    "[survival.png](survival/survival.png).",
  ]


def render(cells: Sequence[Row], runs: Sequence[Row], grid_rows: Sequence[Row]) -> str:
  """The section, markers included: the protocol, a table row per cell, the relapses and the
  agreement with the grid's seeds."""
  if not cells:
    return "\n".join([BEGIN, "No survival run has finished yet (configs/sweeps/survival.py).", END])
  horizon = int(cells[0]["horizon"])
  base = sorted({round(float(r["periodic_baseline"]), 3) for r in runs})
  lines = [
    BEGIN,
    f"One protocol for every cell: no warmup, constant lr, batch 16 x 128, a periodic eval every "
    f"25 steps on the same 8,192 held-out tokens (their no-context loss "
    f"{' / '.join(f'{b:.3f}' for b in base)}), {horizon:,} steps. The event is a run's first "
    f"periodic eval {STUCK_MARGIN:g} nats or more below that no-context loss (its first "
    "passage); a relapse is a later eval back above it; escaped for good is below at every eval "
    "to the end (the project's escape step). Intervals are exact (Clopper-Pearson) 95% "
    "intervals of k of n; the survival curves are Kaplan-Meier with Greenwood's interval. A run "
    "that never escaped is described by its late slope (second half) with its standard error: "
    "falling, flat or rising at 2 standard errors.",
    "",
    "| cell | escaped by step " + f"{horizon:,}" + " | 95% interval | first passages (steps) | "
    "relapsed | escaped for good | escaped at margin 0.05 / 0.1 / 0.2 | never escaped: falling "
    "/ flat / rising |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for c in cells:
    name = (
      f"{variant_label(c['variant'])}, {c['num_layers']} layers, lr {lr_label(float(c['lr']), 4)}"
    )
    lines.append(
      f"| {name} | {c['escaped']} of {c['seeds']} | {float(c['ci_lo']):.3f}-"
      f"{float(c['ci_hi']):.3f} | {c['first_passages'] or 'none'} | {c['relapsed_runs']} | "
      f"{c['escaped_for_good']} | {c['escaped_m0.05']} / {c['escaped_m0.1']} / "
      f"{c['escaped_m0.2']} | {c['never_falling']} / {c['never_flat']} / {c['never_rising']} |"
    )
  relapsed = [r for r in runs if r["relapses"] and int(r["relapses"]) > 0]
  lines += _relapses(relapsed) + _grid_agreement(runs, grid_rows) + [END]
  return "\n".join(lines)
