"""LR sensitivity (Wortsman et al. 2023, arXiv 2309.14322) of an lr sweep's rows
(lr_sweep_rows.py) and the boundary lr: a curve per variant and depth, its sensitivity, best
and boundary lr, as a table. lr_figures.py draws them; scripts/lr_sensitivity.py is the
command line. No JAX here.

LR sensitivity of a curve (one variant at one depth) is the mean over its lrs of the seed-mean
capped loss, minus the best (lowest) of them: E_lr[min(loss, cap)] - min_lr loss.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.lr_sweep_rows import Row
from resnorm_jax.runs import status
from resnorm_jax.runs.outcome import STUCK_MARGIN, is_finite_number

# A sensitivity needs the curve's shape on both sides of its best lr: with fewer lrs the mean
# over the grid is an average of whichever points ran first.
MIN_LRS = 5
# An lr is as good as the best when its seed-mean capped loss is within this many nats of the
# best: the stuck margin, the smallest difference the project reads as a real change in loss
# (0.1 nats is 2.6 of the std of the 16k-token eval loss, and wider than the seed-to-seed
# spread of a trained cell, 1.947-1.979 in docs/xiong_rescue), so one threshold means "no
# distinguishable loss" everywhere.
BOUNDARY_TOLERANCE = STUCK_MARGIN


def lr_curve(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Per lr (ascending) of one curve: the capped losses of its seeds, which diverged and which
  trained (outcome), and their mean."""
  by_lr: dict[float, list[Mapping[str, Any]]] = {}
  for r in rows:
    if r.get("capped_loss") is not None:
      by_lr.setdefault(float(r["opt.lr"]), []).append(r)
  return [
    {
      "lr": lr,
      "losses": [m["capped_loss"] for m in members],
      "seeds": [m["seed"] for m in members],
      status.DIVERGED: [m["outcome"] == status.DIVERGED for m in members],
      status.TRAINED: [m.get("outcome") == status.TRAINED for m in members],
      "mean": statistics.fmean(m["capped_loss"] for m in members),
    }
    for lr, members in sorted(by_lr.items())
  ]


def sensitivity(curve: Sequence[Mapping[str, Any]]) -> float:
  """Mean over the curve's lrs of the seed-mean capped loss, minus the lowest of them."""
  means = [p["mean"] for p in curve]
  return statistics.fmean(means) - min(means)


def boundary_lr(
  curve: Sequence[Mapping[str, Any]],
  baseline: float,
  tolerance: float = BOUNDARY_TOLERANCE,
  margin: float = STUCK_MARGIN,
) -> float | None:
  """The largest lr whose seed-mean capped loss is within `tolerance` nats of the curve's
  best; None when no lr trained (the best is not `margin` nats below the baseline)."""
  best = min(p["mean"] for p in curve)
  if best > baseline - margin:
    return None
  return max(p["lr"] for p in curve if p["mean"] <= best + tolerance)


def sensitivity_table(
  rows: Sequence[Mapping[str, Any]], min_lrs: int = MIN_LRS, grid: Sequence[float] = ()
) -> list[Row]:
  """A row per (variant, depth): LR sensitivity, best lr and loss, boundary lr; left empty,
  with a note, for a curve of fewer than `min_lrs` lrs; a curve missing some of the `grid`'s
  lrs (not run yet) is noted as partial: its mean is over the lrs it has."""
  groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
  for r in rows:
    groups.setdefault((r["variant"], int(r["num_layers"])), []).append(r)
  table = []
  for (variant, depth), members in sorted(groups.items()):
    curve = lr_curve(members)
    # lrs outside the common grid (an extension run for some curves only) are drawn but not
    # averaged: every curve's sensitivity is over the same lrs
    extra = [p for p in curve if grid and p["lr"] not in grid]
    curve = [p for p in curve if p not in extra]
    seeds = sorted({s for p in curve for s in p["seeds"]})
    row: Row = {
      "variant": variant,
      "num_layers": depth,
      "lr_sensitivity": None,
      "best_lr": None,
      "best_loss": None,
      "boundary_lr": None,
      "lrs_trained": None,
      "n_lrs": len(curve),
      "seeds": " ".join(str(s) for s in seeds),
      "n_runs": sum(len(p["losses"]) for p in curve),
      "note": "",
    }
    if len(curve) < min_lrs:
      row["note"] = f"{len(curve)} lrs (< {min_lrs}): not computed"
      table.append(row)
      continue
    best = min(curve, key=lambda p: p["mean"])
    cap = statistics.fmean(m["baseline"] for m in members if is_finite_number(m["baseline"]))
    row.update(
      lr_sensitivity=sensitivity(curve),
      best_lr=best["lr"],
      best_loss=best["mean"],
      boundary_lr=boundary_lr(curve, cap),
      # how many of the curve's lrs leave the plateau (seed-mean capped loss margin below it):
      # the sensitivity is read beside it, never alone
      lrs_trained=sum(1 for p in curve if p["mean"] <= cap - STUCK_MARGIN),
    )
    if row["boundary_lr"] is None:
      # Every lr on the plateau: the formula gives ~0 (every loss at the cap), which reads as
      # "insensitive"; there is no sensitivity of a curve that never trains, and the best of
      # plateau losses is no best lr.
      row["best_lr"] = row["lr_sensitivity"] = None
    missing = [lr for lr in grid if lr not in {p["lr"] for p in curve}]
    notes = [f"partial: {len(curve)} of {len(curve) + len(missing)} lrs"] if missing else []
    if extra:
      lrs = " ".join(f"{p['lr']:g}" for p in extra)
      notes.append(f"{len(extra)} lr{'s' * (len(extra) > 1)} outside the grid, not averaged: {lrs}")
    row["note"] = "; ".join(notes + (["no lr trained"] if row["boundary_lr"] is None else []))
    table.append(row)
  return table


def seeded_runs(curve: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
  """The curve's stretches of consecutive lrs that each have more than one seed."""
  runs: list[list[Mapping[str, Any]]] = []
  previous = False
  for p in curve:
    several = len(p["losses"]) > 1
    if several and previous:
      runs[-1].append(p)
    elif several:
      runs.append([p])
    previous = several
  return runs


TABLE_COLUMNS = (
  "variant",
  "num_layers",
  "lr_sensitivity",
  "best_lr",
  "best_loss",
  "boundary_lr",
  "lrs_trained",
  "n_lrs",
  "seeds",
  "n_runs",
  "note",
)


CONTRAST_COLUMNS = (
  "variant", "versus", "num_layers", "lr", "kind", "seeds", "difference", "se", "lo", "hi",
)  # fmt: skip


def seed_contrast(
  rows: Sequence[Mapping[str, Any]], variant: str, versus: str, depth: int, lr: float
) -> list[dict[str, Any]]:
  """`variant` minus `versus` in final eval loss at one depth: at `lr` over the seeds each ran
  (kind 'seed mean': Welch's difference and 95% interval, stats.mean_difference), and seed 0's
  difference at every lr both ran at that depth (kind 'seed 0'). [] when they share no lr."""
  from resnorm_jax.analysis import stats  # (no JAX)

  def losses(v: str) -> dict[float, dict[int, float]]:
    out: dict[float, dict[int, float]] = {}
    for r in rows:
      if r["variant"] == v and int(r["num_layers"]) == depth and r.get("final_eval_loss"):
        out.setdefault(float(r["opt.lr"]), {})[int(r["seed"])] = float(r["final_eval_loss"])
    return out

  a, b = losses(variant), losses(versus)
  base = {"variant": variant, "versus": versus, "num_layers": depth}
  out = []
  for x in sorted(set(a) & set(b)):
    if 0 in a[x] and 0 in b[x]:
      out.append({**base, "lr": x, "kind": "seed 0", "seeds": "0",
                  "difference": a[x][0] - b[x][0]})  # fmt: skip
  at = next((x for x in a if abs(x / lr - 1) < 1e-6), None)
  if at is not None and at in b and len(a[at]) >= 2 and len(b[at]) >= 2:
    d = stats.mean_difference(list(a[at].values()), list(b[at].values()))
    seeds = f"{' '.join(map(str, sorted(a[at])))} / {' '.join(map(str, sorted(b[at])))}"
    stat = {"difference": d["difference"], "se": d["se"], "lo": d["lo"], "hi": d["hi"]}
    out.append({**base, "lr": at, "kind": "seed mean", "seeds": seeds, **stat})
  return out
