"""Tell a doomed run early: how well the metrics of a run's first k steps predict that it will
leave the plateau and keep its escape, evaluated on cells it never saw.

python scripts/early_warning.py [--out_dir=docs/early_warning] [--replicates=1000]

Reads committed runs (no training): the survival runs (docs/survival/runs.csv: label = an
escape that lasts to the end, docs/survival's kept), the stdlib loss-vs-lr runs
(docs/lr_sensitivity/runs, docs/depth_transfer/runs, docs/width/runs: label = trained at the
end) and, held out, the Shakespeare runs (docs/second_corpus/runs, docs/xiong_rescue/runs
shakespeare-*). Writes into
--out_dir:
  results.csv   per data set, k and predictor: held-out AUC (whole cells held out) with a
                cluster-bootstrap 95% interval (auc_lo, auc_hi), and the AUC within cells
                with a bootstrap of seeds within each cell (within_cell_auc_lo, _hi), both
                seeded; set 'shakespeare' is the model fitted on every stdlib run and
                scored on Shakespeare
  savings.csv   per k: the stop rule replayed on every committed stdlib loss-vs-lr run
                (threshold: stop no training-set run that kept its escape)
  auc_vs_k.png  AUC against k with 95% intervals: on top the README's quoted points
                (resnorm_jax/analysis/early_warning_figure.py), below each signal per data set
  README.md     the page: what was measured, how, the tables above and what they say
  stop_rule_k<K>.json  the stop rule at step K fitted on every stdlib run, as data with its
                provenance: what train.stop_when reads
The rules are resnorm_jax/analysis/early_warning.py's. No JAX here.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re

from resnorm_jax.analysis import early_warning as ew  # (no JAX)
from resnorm_jax.analysis import early_warning_figure
from resnorm_jax.analysis.style import save_figure
from resnorm_jax.files import csv_table
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.runs import record_files, stop_features
from resnorm_jax.runs.metrics_file import read_metrics as read_all_metrics
from resnorm_jax.runs.outcome import STUCK_MARGIN, curve_baseline

STDLIB_GRIDS = ("docs/lr_sensitivity/runs", "docs/depth_transfer/runs", "docs/width/runs")
HELD_OUT = ("docs/second_corpus/runs/shakespeare-*", "docs/xiong_rescue/runs/shakespeare-*")


def _summary(run_dir: str) -> dict | None:
  path = os.path.join(run_dir, record_files.SUMMARY)
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    return json.load(f)


def run_record(run_dir: str, label: int | None = None, escape_at: int | None = None) -> dict | None:
  """A finished run's label, cell, cost and features at every k (None: not finished)."""
  s = _summary(run_dir)
  if (
    not s
    or s.get("status") != "completed"
    or not os.path.isfile(os.path.join(run_dir, record_files.METRICS))
  ):
    return None
  rows = ew.read_metrics(run_dir)
  entropy = float(s.get("unigram_entropy") or 0.0)
  name = os.path.basename(run_dir)
  return {
    "name": name,
    "group": re.sub(r"-s\d+$", "", name),
    "label": int(s.get("outcome") == "trained") if label is None else label,
    # On the plateau at k is what is known at k, for every run: its first passage (the first
    # periodic eval 0.1 below the eval set's no-context loss), not its lasting escape.
    "escape_at": first_passage(run_dir, s) if label is None else escape_at,
    "wall_seconds": float(s.get("wall_seconds") or 0.0),
    "steps": int(s.get("steps") or 0),
    "features": {k: stop_features.features(rows, k, entropy) for k in stop_features.KS},
  }


def first_passage(run_dir: str, summary: dict) -> int | None:
  """The step of a run's first periodic eval STUCK_MARGIN below its eval set's no-context
  loss (what a rule at step k can know), None when there is none."""
  base = curve_baseline(summary)
  if base is None:
    return None
  for r in read_all_metrics(os.path.join(run_dir, record_files.METRICS)):
    loss = r.get("eval/loss")
    if isinstance(loss, (int, float)) and loss <= base - STUCK_MARGIN:
      return r["step"]
  return None


def survival_runs() -> list[dict]:
  out = []
  for r in csv_table.read_csv("docs/survival/runs.csv"):
    # docs/survival's kept: an escape that lasts to the end (escape_step), relapses or not
    kept = int(bool(r["escape_step"]))
    first = int(float(r["first_passage"])) if r["first_passage"] else None
    rec = run_record(os.path.join("docs/survival/runs", r["name"]), kept, first)
    if rec:
      out.append(rec)
  return out


def grid_runs(dirs) -> list[dict]:
  out = []
  for pattern in dirs:
    paths = glob.glob(pattern) if "*" in pattern else glob.glob(os.path.join(pattern, "*"))
    for d in sorted(paths):
      if os.path.isdir(d):
        rec = run_record(d)
        if rec:
          out.append(rec)
  return out


def write_csv(path: str, rows: list[dict]) -> str:
  """`rows` under the first row's columns, floats to 4 decimals."""
  fixed = [{k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows]
  return csv_table.write_csv(path, fixed, list(rows[0]))


PAGE = """# Early warning: can the first steps tell a doomed run?

Written by `python scripts/early_warning.py` from the committed runs (no training); the rules
are `resnorm_jax/analysis/early_warning.py`'s. Regenerate after new runs land.

Within one cell at the edge, whether a run's fate is set by its initialization or by its data
order, and whether any score at init can tell it: [init_or_data.md](init_or_data.md) (a
factorial of init seeds x data seeds, `data.seed`).

A run's **label** is 1 when its escape from the no-context plateau lasted to its end (survival
runs: an escape that lasts to step 1,500, docs/survival's kept; loss-vs-lr runs: trained at the
end). A run counts as on the plateau at k when its first passage (the first periodic eval 0.1
below the no-context loss, known at k) comes after k, for every run alike.
Its **features at step k** are, for each logged signal (train loss as a gap to the corpus's
unigram entropy, gradient, update and parameter norms, attention-logit max, output-logit RMS),
the level at k, the slope over [k/2, k] and the change since step 10. Predictors: one signal
(its feature and direction chosen on the training folds) and a logistic regression on the
four signals every run logs. **Whole cells (variant, depth, lr, corpus) are held out**: a cell
never trains the model that scores it. AUC intervals: 95% percentile bootstrap over cells
(1,000 replicates, seeded); the AUC within cells: 95% percentile bootstrap over the seeds
within each cell (the cells kept).
*On the plateau at k*: only the runs that had not escaped by step k, the runs a stop rule has
to judge (a run already off the plateau at k is no decision).

- **survival**: the 60 runs of docs/survival (5 cells x 12 seeds, 1,500 steps). The question
  there is which seeds of one configuration escape; the AUC pooled over held-out cells mixes
  cells with different odds, so the AUC within each cell's seeds is given beside it.
- **stdlib grid**: every finished loss-vs-lr, depth-transfer and width run on stdlib.
- **shakespeare**: the model fitted on every stdlib run, scored on the Shakespeare runs of
  docs/second_corpus and docs/xiong_rescue (a corpus it never saw).

![AUC against k](auc_vs_k.png)

The figure's top row is the README's Results row: the all-core-signals predictor on the runs
still on the plateau at k, the AUC within a cell's seeds for survival (the pooled AUC beside
it, grey) and the pooled AUC for the grid and Shakespeare, each value written above its 95%
interval, and the stop at k = 50 whose savings the row quotes. Below, each signal alone.

{tables}

**The stop rule replayed** (`savings.csv`): each fold of cells scored by the model fitted on
the others, stopped below the highest threshold that stops none of the training folds' runs
that kept an escape; saved is the stopped runs' remaining wall time (2-core CPU, one job per
core), lost is a stopped run that would have trained.

{savings}
"""


def _table(rows: list[dict], name: str) -> str:
  mine = [r for r in rows if r["set"] == name]
  if not mine:
    return ""
  head = "| k | predictor | runs (escaped) | cells | AUC (95%) | AUC within cells (95%) |"
  lines = [f"**{name}**", "", head, "| --- | --- | --- | --- | --- | --- |"]
  for r in mine:
    fmt = lambda v: "-" if not math.isfinite(v) else f"{v:.2f}"
    lines.append(
      f"| {r['k']} | {r['predictor']} | {r['runs']} ({r['positives']}) | {r['cells']} | "
      f"{fmt(r['auc'])} ({fmt(r['auc_lo'])}-{fmt(r['auc_hi'])}) | "
      f"{fmt(r.get('within_cell_auc', math.nan))}"
      f"{_interval(r, 'within_cell_auc', fmt)} |"
    )
  return "\n".join(lines) + "\n"


def _interval(r: dict, column: str, fmt) -> str:
  """' (low-high)' of a column's interval where it has one, else ''."""
  lo, hi = r.get(f"{column}_lo", math.nan), r.get(f"{column}_hi", math.nan)
  return f" ({fmt(lo)}-{fmt(hi)})" if math.isfinite(lo) and math.isfinite(hi) else ""


def page(rows: list[dict], savings: list[dict]) -> str:
  order = []
  for r in rows:
    if r["set"] not in order:
      order.append(r["set"])
  tables = "\n".join(_table(rows, name) for name in sorted(order))
  head = (
    "| sweep | k | runs | trained | stopped | of them would have trained | core-hours saved / all |"
  )
  lines = [head, "| --- | --- | --- | --- | --- | --- | --- |"] + [
    f"| {s['sweep']} | {s['k']} | {s['runs']} | {s['escaped']} | {s['stopped']} | "
    f"{s['stopped_that_would_have_escaped']} | {s['core_hours_saved']:.1f} / "
    f"{s['core_hours_total']:.1f} |"
    for s in savings
  ]
  return PAGE.format(tables=tables, savings="\n".join(lines))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out_dir", default=os.path.join("docs", "early_warning"))
  parser.add_argument("--replicates", type=int, default=1000)
  args = parser.parse_args()
  os.makedirs(args.out_dir, exist_ok=True)
  surv, grid, held = survival_runs(), grid_runs(STDLIB_GRIDS), grid_runs(HELD_OUT)
  print(f"runs: {len(surv)} survival, {len(grid)} stdlib grid, {len(held)} Shakespeare")
  rows = []
  for k in stop_features.KS:
    for name, runs in (("survival", surv), ("stdlib grid", grid)):
      rows += [{"set": name, **r} for r in ew.evaluate(runs, k, args.replicates)]
      on = ew.still_on_plateau(runs, k)
      rows += [
        {"set": f"{name}, on the plateau at k", **r} for r in ew.evaluate(on, k, args.replicates)
      ]
    t = ew.transfer(surv + grid, held, k, args.replicates)
    if t:
      rows.append({"set": "shakespeare", **t})
    t = ew.transfer(
      ew.still_on_plateau(surv + grid, k), ew.still_on_plateau(held, k), k, args.replicates
    )
    if t:
      rows.append({"set": "shakespeare, on the plateau at k", **t})
  savings = [
    {"sweep": name, **s}
    for name, runs in (("stdlib grid", grid), ("survival", surv))
    for k in stop_features.KS
    if (s := ew.replay(runs, k))
  ]
  paths = [
    write_csv(os.path.join(args.out_dir, "results.csv"), rows),
    write_csv(os.path.join(args.out_dir, "savings.csv"), savings),
    save_figure(
      early_warning_figure.draw(rows, savings),
      os.path.join(args.out_dir, "auc_vs_k.png"),
      tight=False,
    ),
  ]
  for k in (100, 200):
    rule = ew.fit_rule(
      surv + grid,
      k,
      {
        "fitted_by": "scripts/early_warning.py",
        "runs_from": ["docs/survival/runs", *STDLIB_GRIDS],
        "corpus": "stdlib bytes (Python 3.11)",
        "label": "escape kept to the end (survival) or trained at the end (grid)",
        "threshold_rule": "the highest that stops no fitting run that kept its escape",
      },
    )
    path = os.path.join(args.out_dir, f"stop_rule_k{k}.json")
    with open_nofollow(path, "w") as f:
      json.dump(rule, f, indent=1)
    paths.append(path)
  readme = os.path.join(args.out_dir, "README.md")
  with open_nofollow(readme, "w") as f:
    f.write(page(rows, savings))
  paths.append(readme)
  for k in stop_features.KS:
    for name in sorted({r["set"] for r in rows}):
      mine = [r for r in rows if r["set"] == name and r["k"] == k and math.isfinite(r["auc"])]
      if mine:
        best = max(mine, key=lambda r: r["auc"])
        print(f"k={k} {name}: best {best['predictor']} AUC {best['auc']:.3f} "
              f"({best['auc_lo']:.3f}-{best['auc_hi']:.3f}; {best['runs']} runs)")  # fmt: skip
  print("\n".join(paths))


if __name__ == "__main__":
  main()
