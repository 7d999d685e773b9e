"""The README's rows of depth transfer (docs/depth_transfer/; the analysis is
resnorm_jax/analysis/depth_transfer.py): the slope of the best lr, CompleteP's best loss,
CompleteP and the edges."""

from __future__ import annotations

import collections

from resnorm_jax.analysis.claims.docs_data import Claim, exists, optional, read, tokens_note
from resnorm_jax.analysis.claims.edges import edge, edge_lr, kept_cells, lr_cells_of
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.runs import status


def row_depth_transfer() -> Claim | None:
  """Each parametrization's slope of log2(best lr) on log2(L) as the range over three fits of
  the same best lrs (weighted 5-point vertex, its OLS, the 3-point vertex), and the
  CompleteP-minus-sp difference with its OLS standard error, and at 24 layers over seeds."""
  path = "docs/depth_transfer/slopes.csv"
  if not exists(path):
    return None
  names = {"depth_mup": "depth-muP", "sp": "sp", "completep": "CompleteP"}
  fits = ("5pt", "5pt-ols", "3pt")
  slopes = collections.defaultdict(dict)
  for r in read(path):
    if r["variant"] == "prenorm" and r["fit"] in fits:
      slopes[r["depth_param"]][r["fit"]] = r
  parts = []
  for p, name in names.items():
    if p in slopes:
      vals = sorted(float(r["slope"]) for r in slopes[p].values())
      parts.append(f"{name} {vals[0]:+.3f} to {vals[-1]:+.3f}")
  depths = next(iter(slopes.values()))["5pt"]["depths"].split()
  text = f"d log2(best lr) / d log2(L), {depths[0]}-{depths[-1]} layers, over 3 fits: " + ", ".join(
    parts
  )
  contrast = [
    r for r in optional("docs/depth_transfer/contrast.csv") if "ols slope" in r["quantity"]
  ]
  if contrast:
    c = contrast[0]
    d, se = float(c["difference"]), float(c["difference_se"])
    verdict = "undecided" if abs(d) < 2 * se else ("CompleteP higher" if d > 0 else "sp higher")
    text += f"; CompleteP - sp {d:+.3f} +- {se:.3f} (OLS, seed 0): {verdict}"
  seeded = [
    r for r in optional("docs/depth_transfer/contrast.csv") if "log2 best lr" in r["quantity"]
  ]
  interval = "95% seed bootstrap"
  if seeded:
    c = seeded[0]
    interval = c["interval"]
    text += (
      f"; at {c['depths']} layers, seeds {c['seeds'].replace(' ', ', ')}: log2 best lr "
      f"{float(c['difference']):+.2f} ({float(c['ci_lo']):+.2f} to "
      f"{float(c['ci_hi']):+.2f})"
    )
  return Claim(
    "Depth transfer of Pre-LN's best lr",
    text,
    f"0 = transfer; 1,000 steps, 7 lrs ({len(depths)} depths; 3 lrs, a 3-point vertex, at 48 "
    f"under depth-muP and CompleteP); seed 0; at 24 layers {interval}; stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "[figure](docs/depth_transfer/prenorm.png), `docs/depth_transfer/slopes.csv`, "
    "`docs/depth_transfer/contrast.csv`",
    "slope of log2(best lr) on log2(depth), 0 = transfer: " + ", ".join(parts),
    f"1,000 steps, 7 lrs, {depths[0]}-{depths[-1]} layers; seed 0",
  )


def row_completep_loss() -> Claim | None:
  """CompleteP's and sp's best Pre-LN loss at each depth, and at 24 layers the seed-mean
  contrast on the lrs both ran with every seed (docs/depth_transfer/contrast.csv)."""
  best = [r for r in optional("docs/depth_transfer/best_lr.csv") if r["variant"] == "prenorm"]
  if not best:
    return None
  by = {(r["depth_param"], int(r["num_layers"])): float(r["grid_best_loss"]) for r in best}
  depths = sorted({d for p, d in by if p == "completep"})
  losses = "; ".join(
    f"{name} " + " / ".join(f"{by[(p, d)]:.3f}" for d in depths)
    for p, name in (("completep", "CompleteP"), ("sp", "sp"))
  )
  text = f"best loss at {' / '.join(map(str, depths))} layers: {losses}"
  seeded = [
    r
    for r in optional("docs/depth_transfer/contrast.csv")
    if r["quantity"].startswith("best loss at")
  ]
  budget = "1,000 steps, lrs 2.5e-4 to 1.6e-2; seed 0 (seed means where seeds ran)"
  if seeded:
    c = seeded[0]
    text += (
      f"; at {c['depths']} layers, seeds {c['seeds'].replace(' ', ', ')} on the lrs both ran: "
      f"CompleteP minus sp {float(c['difference']):+.3f} ({c['interval']}: "
      f"{float(c['ci_lo']):+.3f} to {float(c['ci_hi']):+.3f})"
    )
  else:
    text += "; the 24-layer seeds at every lr around the best are not all run yet"

  def falls(p: str) -> str:
    seq = [by[(p, d)] for d in depths]
    return "falls" if all(b < a for a, b in zip(seq, seq[1:], strict=False)) else "does not fall"

  ends = ", ".join(
    f"{name} {by[(p, depths[0])]:.3f} to {by[(p, depths[-1])]:.3f}"
    for p, name in (("completep", "CompleteP"), ("sp", "sp"))
  )
  return Claim(
    f"CompleteP's best loss {falls('completep')} with depth, sp's {falls('sp')}",
    text,
    budget + "; stdlib; " + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "`docs/depth_transfer/best_lr.csv`, `docs/depth_transfer/contrast.csv`",
    f"best loss from {depths[0]} to {depths[-1]} layers: {ends}",
    budget.split(" (")[0],
  )


def row_param_edges() -> Claim | None:
  """Post-LN's and DeepNorm's edge (largest lr that trains on some seed) under sp and under
  CompleteP, at the depths CompleteP was run, and the best loss there."""
  path = "docs/depth_transfer/results.csv"
  if not exists(path):
    return None
  rows = read(path)
  best = {
    (r["variant"], r["depth_param"], int(r["num_layers"])): r
    for r in read("docs/depth_transfer/best_lr.csv")
  }
  parts, short, all_depths = [], [], set()
  for variant in ("postnorm", "deepnorm"):
    cp = [r for r in rows if r["variant"] == variant and r["depth_param"] == "completep"]
    # above the base depth (at 6 layers CompleteP's runs are sp's)
    depths = sorted({int(r["num_layers"]) for r in cp} - {6})
    if not depths:
      continue
    all_depths |= set(depths)
    text, lrs = [], {}
    for param, name in (("sp", "sp"), ("completep", "CompleteP")):
      cells = lr_cells_of([r for r in rows if r["depth_param"] == param])
      # sp's survival cells (12 seeds) stand for the grid's in the edge: kept escapes
      kept = kept_cells(cells) if param == "sp" else cells
      edges = " / ".join(edge(kept, variant, d) for d in depths)
      lrs[name] = " / ".join(edge_lr(edge(kept, variant, d)) for d in depths)
      losses = []
      for d in depths:
        b = best.get((variant, param, d))
        # the rule's own verdict at the best lr, not the margin worked out again here
        trained = b and status.TRAINED in cells.get((variant, d, float(b["grid_best_lr"])), [])
        losses.append(f"{float(b['grid_best_loss']):.3f}" if trained else "-")
      text.append(f"{name} {edges} (best loss {' / '.join(losses)})")
    parts.append(f"{variant_label(variant)}: " + ", ".join(text))
    short.append(
      f"{variant_label(variant)} {lrs['sp']} under both"
      if len(set(lrs.values())) == 1
      else f"{variant_label(variant)} " + ", ".join(f"{n} {t}" for n, t in lrs.items())
    )
  if not parts:
    return None
  at = " / ".join(str(d) for d in sorted(all_depths))
  seeds = "seed 0, 0-2 at some cells"
  return Claim(
    "CompleteP moves Post-LN's edge",
    f"largest lr whose escape lasts on some seed at {at} layers: " + "; ".join(parts),
    f"1,000 steps, no warmup, constant lr 2.5e-4 to 1.6e-2; {seeds}; stdlib; "
    + tokens_note("docs/depth_transfer/runs/postnorm-completep-L24-lr0.002-s0"),
    "[figure](docs/depth_transfer/postnorm.png), `docs/depth_transfer/results.csv`",
    f"largest lr that trains at {at} layers: " + "; ".join(short),
    f"1,000 steps; {seeds}",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  140: row_depth_transfer,
  150: row_completep_loss,
  160: row_param_edges,
}
