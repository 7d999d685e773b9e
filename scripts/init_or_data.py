"""At Post-LN's edge, init or data order? The factorial of configs/sweeps/init_or_data.py ->
docs/early_warning/init_or_data.md (the page), init_or_data.csv (one row per run) and
init_or_data_predictors.csv (each score's leave-one-run-out AUC within the cell), every number
from the run folders and experiments/init_predictors.py's CSV
(resnorm_jax/analysis/init_or_data.py). No JAX here.

python scripts/init_or_data.py [--runs=docs/early_warning/init_or_data] \
    [--init_scores=docs/early_warning/init_predictors.csv] [--out_dir=docs/early_warning]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence

from resnorm_jax.analysis import init_or_data as iod
from resnorm_jax.analysis.stats import clopper_pearson
from resnorm_jax.files import csv_table
from resnorm_jax.files.nofollow import open_nofollow

SEEDS = 4  # the grid's init and data seeds (configs/sweeps/init_or_data.py's default)
PREDICTOR_COLUMNS = (
  "kind", "k", "score", "loo_auc", "separation", "auc_lo", "auc_hi", "best_init_p",
)  # fmt: skip
ANALYSIS_COLUMNS = ("outcome", "factor", "share", "permutation_p")


def write_lines(path: str, fields: Sequence[str], cells: list[list]) -> str:
  """A CSV of "\n"-ended lines: the header `fields`, then a row per list of `cells`."""
  rows = [dict(zip(fields, c, strict=True)) for c in cells]
  return csv_table.write_csv(path, rows, fields, lineterminator="\n")


def _fate(r: dict) -> str:
  if r["kept"]:
    return f"kept ({r['first_passage']})"
  if r["first_passage"] is not None:
    return f"fell back ({r['first_passage']})"
  return "stuck"


BEST_DRAWS = 400  # permutations of the best-of-the-init-scores test


def seed_table(runs) -> list[str]:
  """Kept per init seed and per data seed, with exact 95% intervals."""
  lines = ["| factor | seed | kept | 95% interval |", "| --- | --- | --- | --- |"]
  for factor in ("init", "data"):
    for s, k, n in iod.seed_odds(runs, factor):
      lo, hi = clopper_pearson(k, n)
      lines.append(f"| {factor} seed | {s} | {k}/{n} | {lo:.2f}-{hi:.2f} |")
  return lines


def page(runs, grid, init_scores, preds, best_p=float("nan")) -> str:
  lines = [
    "# At the edge, init or data order?",
    "",
    "Post-LN at 12 layers, lr 7e-4, no warmup, the survival protocol (1,500 steps, an eval "
    "every 25 on 8,192 tokens, stdlib corpus), run as a factorial of init seeds (`seed`: the "
    "parameters) x data seeds (`data.seed`: the batches). Written by `python "
    "scripts/init_or_data.py` from the run folders under `init_or_data/`; the grid is "
    "configs/sweeps/init_or_data.py, the init-time scores experiments/init_predictors.py's.",
    "",
  ]
  inits = sorted({r["init"] for r in runs} | set(range(SEEDS)))
  datas = sorted({r["data"] for r in runs} | set(range(SEEDS)))
  by = {(r["init"], r["data"]): r for r in runs}
  lines += [
    "Fate of each run (kept: an escape that lasts to step 1,500; the step of its first eval "
    "0.1 below the no-context loss in brackets):",
    "",
    "| init \\ data | " + " | ".join(f"data seed {d}" for d in datas) + " |",
    "| --- |" + " --- |" * len(datas),
  ]
  for i in inits:
    cells = [_fate(by[(i, d)]) if (i, d) in by else "not run" for d in datas]
    lines.append(f"| init seed {i} | " + " | ".join(cells) + " |")
  lines.append("")
  if grid is None:
    lines.append(
      f"{len(runs)} runs have finished; the analysis of variance needs every pair of the "
      "factorial (configs/sweeps/init_or_data.py: 16)."
    )
    return "\n".join(lines) + "\n"
  d = iod.decide(runs)
  share_k, share_p, pk, pp = d["share_kept"], d["share_passage"], d["p_kept"], d["p_passage"]
  horizon, n = d["horizon"], d["n"]
  dev = iod.logistic_deviance(runs, *grid)
  lines += [
    d["verdict"],
    "",
    "| outcome | init seed's share | p | data seed's share | p | residual share |",
    "| --- | --- | --- | --- | --- | --- |",
    f"| kept (0/1) | {iod.fmt(share_k['init'])} | {iod.fmt(pk[0], 3)} | "
    f"{iod.fmt(share_k['data'])} | {iod.fmt(pk[1], 3)} | {iod.fmt(share_k['residual'])} |",
    f"| first passage (never: {horizon + 25}) | {iod.fmt(share_p['init'])} | "
    f"{iod.fmt(pp[0], 3)} | "
    f"{iod.fmt(share_p['data'])} | {iod.fmt(pp[1], 3)} | {iod.fmt(share_p['residual'])} |",
    "",
    "Each seed's runs (exact binomial intervals, 4 runs a seed: they say how little one seed's "
    "4 runs pin down):",
    "",
    *seed_table(runs),
    "",
    f"Shares: a two-way analysis of variance with one run per pair; p: {iod.PERMUTATIONS:,} "
    "permutations of a factor's labels within each level of the other. A logistic model of "
    f"kept with both factors (ridge {iod.L2}): deviance {iod.fmt(dev['null'])} with neither, "
    f"{iod.fmt(dev['both'])} with both; the init seed removes {iod.fmt(dev['init_beside_data'])} "
    f"beside the data seed, the data seed {iod.fmt(dev['data_beside_init'])} beside the init seed.",
    "",
  ]
  if preds:
    init_rows = [p for p in preds if p["kind"] == "init" and not math.isnan(p["loo_auc"])]
    best = max(init_rows, key=lambda p: p["loo_auc"], default=None)
    lines += [
      "Can a score tell the fate within the cell? Leave-one-run-out AUC over the "
      f"{n} runs (0.5: chance; a direction fitted on the other runs, so below 0.5 is worse "
      "than chance: with 16 runs a score that carries nothing often lands far below), and "
      "the in-sample separation max(AUC, 1 - AUC), an upper bound (its direction chosen on "
      "the same runs):",
      "",
      "| score | at | AUC held out | 95% interval | separation in sample |",
      "| --- | --- | --- | --- | --- |",
    ]
    for p in preds:
      at = "init" if p["kind"] == "init" else f"step {p['k']}"
      inside = 0 < p["loo_auc"] < 1  # the standard error vanishes at 0 and 1: no interval
      band = f"{iod.fmt(p['auc_lo'])}-{iod.fmt(p['auc_hi'])}" if inside else "-"
      lines.append(
        f"| {p['score']} | {at} | {iod.fmt(p['loo_auc'])} | {band} | {iod.fmt(p['separation'])} |"
      )
    n_kept = sum(r["kept"] for r in runs)
    lines += ["", "Intervals: the AUC's standard error from the counts of each class (Hanley "
              f"and McNeil 1982; {n_kept} kept, {n - n_kept} not); none at an AUC of 0 or 1, "
              "where it vanishes."]  # fmt: skip
    if best is not None:
      lines += [
        "",
        f"The best init-time score within the cell is `{best['score']}`: held-out AUC "
        f"{iod.fmt(best['loo_auc'])} (95% {iod.fmt(best['auc_lo'])}-{iod.fmt(best['auc_hi'])}) "
        f"over {n} runs (in-sample separation {iod.fmt(best['separation'])}). Picked as the "
        f"best of {len(init_rows)} init-time scores, it is paid for by a permutation test of "
        f"the best: with the runs' kept labels permuted {BEST_DRAWS:,} times and every "
        f"init-time score refitted, the best held-out AUC reaches it with p "
        f"{iod.fmt(best_p, 3)}.",
      ]
  return "\n".join(lines) + "\n"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default="docs/early_warning/init_or_data")
  parser.add_argument("--init_scores", default="docs/early_warning/init_predictors.csv")
  parser.add_argument("--out_dir", default="docs/early_warning")
  args = parser.parse_args()
  if not os.path.isdir(args.runs):
    sys.exit(f"--runs={args.runs}: no such folder")
  runs = iod.read_runs(args.runs)
  if not runs:
    sys.exit(f"no finished run of configs/sweeps/init_or_data.py under {args.runs}")
  grid = iod.complete_grid(runs)
  scores = iod.read_init_scores(args.init_scores)
  preds = iod.predictors(runs, scores) if grid else []
  labels = [r["kept"] for r in runs]
  best_p = iod.best_of_p(iod.init_columns(runs, scores), labels, BEST_DRAWS) if preds else None
  os.makedirs(args.out_dir, exist_ok=True)
  table = os.path.join(args.out_dir, "init_or_data.csv")
  cells = [[r["name"], r["init"], r["data"], r["kept"], r["first_passage"] or "", r["horizon"],
            f"{r['final_eval_loss']:.4f}"] for r in runs]  # fmt: skip
  write_lines(table, iod.CSV_COLUMNS, cells)
  if preds:
    top = max((p["loo_auc"] for p in preds if p["kind"] == "init"), default=None)
    cells = [[p["kind"], p["k"], p["score"], iod.fmt(p["loo_auc"], 4),
              iod.fmt(p["separation"], 4), iod.fmt(p["auc_lo"], 4), iod.fmt(p["auc_hi"], 4),
              iod.fmt(best_p, 4) if p["kind"] == "init" and p["loo_auc"] == top else ""]
             for p in preds]  # fmt: skip
    write_lines(os.path.join(args.out_dir, "init_or_data_predictors.csv"), PREDICTOR_COLUMNS, cells)
  if grid:
    d = iod.decide(runs)
    cells = []
    for outcome, share, p in (("first_passage", d["share_passage"], d["p_passage"]),
                              ("kept", d["share_kept"], d["p_kept"])):  # fmt: skip
      for i, factor in enumerate(("init_seed", "data_seed")):
        cells.append([outcome, factor, iod.fmt(share[factor.split("_")[0]]), iod.fmt(p[i], 3)])
      cells.append([outcome, "residual", iod.fmt(share["residual"]), ""])
    write_lines(os.path.join(args.out_dir, "init_or_data_analysis.csv"), ANALYSIS_COLUMNS, cells)
  with open_nofollow(os.path.join(args.out_dir, "init_or_data.md"), "w") as f:
    f.write(page(runs, grid, scores, preds, best_p))
  print(f"{len(runs)} runs ({'complete' if grid else 'incomplete'} grid) -> {args.out_dir}")


if __name__ == "__main__":
  main()
