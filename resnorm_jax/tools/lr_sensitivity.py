"""Loss against learning rate over depth, and LR sensitivity (Wortsman et al. 2023,
arXiv 2309.14322): tables and figures of an lr sweep's run folders (configs/sweeps/
lr_sensitivity.py). scripts/lr_sensitivity.py is the command line. No JAX here.

Each finished run's final eval loss is capped at its no-context baseline (a diverged run, or a
non-finite loss, counts as the baseline): a run that learned nothing is as bad as the baseline,
however far above it the loss ended. LR sensitivity of a curve (one variant at one depth) is
the mean over its lrs of the seed-mean capped loss, minus the best (lowest) of them:
E_lr[min(loss, cap)] - min_lr loss.
"""

from __future__ import annotations

import csv
import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.data.fs import read_json
from resnorm_jax.tools import stats
from resnorm_jax.tools.style import (
  BASELINE_STYLE,
  FINAL_BASELINE_LABEL,
  VARIANT_COLORS,
  baseline_lines,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
)
from resnorm_jax.tools.sweep_grid import POINT_FILE
from resnorm_jax.tools.sweep_results import dotted, run_row
from resnorm_jax.train.metrics_file import read_metrics
from resnorm_jax.train.outcome import STUCK_MARGIN, is_finite_number

Row = dict[str, Any]
FINISHED = ("trained", "stuck", "diverged")
# A sensitivity needs the curve's shape on both sides of its best lr: with fewer lrs the mean
# over the grid is an average of whichever points ran first.
MIN_LRS = 5
# An lr is as good as the best when its seed-mean capped loss is within this many nats of the
# best: the stuck margin, the smallest difference the project reads as a real change in loss
# (0.1 nats is 2.6 of the std of the 16k-token eval loss, and wider than the seed-to-seed
# spread of a trained cell, 1.947-1.979 in docs/xiong_rescue), so one threshold means "no
# distinguishable loss" everywhere.
BOUNDARY_TOLERANCE = STUCK_MARGIN
# A run's late trend is read from its periodic evals at steps from this fraction of its
# budget on: the second half, where a trained run's curve has flattened and a slow plateau
# run's is still coming down.
LATE_FROM = 0.5
RESULT_COLUMNS = (
  "name",
  "variant",
  "num_layers",
  "opt.lr",
  "opt.warmup_steps",
  "opt.schedule",
  "seed",
  "train.steps",
  "steps",
  "data",
  "final_eval_loss",
  "baseline",
  "capped_loss",
  "outcome",
  "escape_step",
  "diverged_step",
  "late_slope",
  "late_slope_se",
  "late_trend",
)


def variant_order(names) -> list[str]:
  """Variants in the palette's order (the main three first), others after, by name."""
  known = list(VARIANT_COLORS)
  return sorted(set(names), key=lambda v: (known.index(v) if v in known else len(known), v))


def corpus_name(config: Mapping[str, Any]) -> str:
  """A run's corpus in words: 'stdlib bytes', or the text file's name."""
  source, path = dotted(config, "data.source"), dotted(config, "data.path")
  if source == "stdlib":
    return "stdlib bytes"
  return os.path.basename(path) if path else str(source)


def capped_loss(row: Mapping[str, Any]) -> float | None:
  """The final eval loss capped at the baseline; a diverged or non-finite run is the baseline."""
  loss, cap = row.get("final_eval_loss"), row.get("baseline")
  if not is_finite_number(cap):
    return None
  if row.get("outcome") == "diverged" or not is_finite_number(loss):
    return cap
  return min(loss, cap)


def eval_curve(run_dir: str) -> tuple[list[int], list[float]]:
  """(steps, periodic eval losses) of a run folder's metrics.jsonl; torn lines and
  non-finite losses skipped."""
  path = os.path.join(run_dir, "metrics.jsonl")
  records = read_metrics(path) if os.path.isfile(path) else []
  points = [
    (int(r["step"]), float(r["eval/loss"]))
    for r in records
    if isinstance(r, dict) and is_finite_number(r.get("eval/loss"))
  ]
  return [s for s, _ in points], [v for _, v in points]


def late_fit(
  steps: Sequence[int], losses: Sequence[float], budget: int, late_from: float = LATE_FROM
) -> tuple[float, float] | None:
  """(late_slope, its standard error) in nats per 1,000 steps; None with fewer than 3 evals."""
  late = [(s / 1000, v) for s, v in zip(steps, losses, strict=True) if s >= late_from * budget]
  return stats.slope_with_se([x for x, _ in late], [y for _, y in late])


def late_slope(
  steps: Sequence[int], losses: Sequence[float], budget: int, late_from: float = LATE_FROM
) -> float | None:
  """The least-squares slope of the periodic eval loss over the evals at steps >=
  `late_from` x `budget`, in nats per 1,000 steps: negative while the loss is still coming
  down (a slow run), about 0 on a flat plateau; None with fewer than 3 such evals.

  A measurement, not a verdict: it says whether a run that has not escaped by its last step
  was still moving, the question a verdict at one step cannot answer."""
  fit = late_fit(steps, losses, budget, late_from)
  return fit[0] if fit else None


def result_row(run_dir: str) -> Row:
  """One run folder's row: variant (its sweep point's config), depth, lr, seed and budget
  (its config.json), verdict, losses, escape and divergence steps (its summary)."""
  row = run_row(run_dir)
  config = row["_config"]
  out = {
    **{k: row.get(k) for k in RESULT_COLUMNS},
    **{k: dotted(config, k) for k in ("opt.lr", "opt.warmup_steps", "opt.schedule")},
    "train.steps": dotted(config, "train.steps"),
    "data": corpus_name(config) if config else None,
  }
  out["capped_loss"] = capped_loss(out)
  if out["outcome"] != "diverged" and is_finite_number(out["steps"]):
    fit = late_fit(*eval_curve(run_dir), int(out["steps"]))
    if fit:
      out["late_slope"], out["late_slope_se"] = fit
      out["late_trend"] = stats.trend(*fit)  # falling / flat / rising at 2 standard errors
  return out


def finished_rows(runs_dir: str) -> list[Row]:
  """Rows of the finished runs (trained, stuck, diverged) under `runs_dir`, sorted by
  variant, depth, lr and seed; running, interrupted and pending points are left out."""
  dirs = [os.path.join(runs_dir, n) for n in sorted(os.listdir(runs_dir))]
  rows = [result_row(d) for d in dirs if os.path.isfile(os.path.join(d, "summary.json"))]
  rows = [r for r in rows if r["outcome"] in FINISHED and r["opt.lr"] and r["num_layers"]]
  return sorted(rows, key=lambda r: (r["variant"], r["num_layers"], r["opt.lr"], r["seed"]))


def grid_lrs(runs_dir: str) -> list[float]:
  """The sweep's grid, ascending: every lr planned (sweep_point.json, run or not) for at least
  half of the sweep's (config, depth) curves. An lr planned for fewer (the left edge, run for
  deep Post-LN alone) is an extension: drawn, but outside the grid the curves are compared on."""
  planned: dict[tuple[str, Any], set[float]] = {}
  for name in os.listdir(runs_dir):
    point = read_json(os.path.join(runs_dir, name, POINT_FILE)) or {}
    overrides = point.get("overrides") or {}
    lr = overrides.get("opt.lr")
    if is_finite_number(lr):
      key = (str(point.get("config")), overrides.get("model.num_layers"))
      planned.setdefault(key, set()).add(float(lr))
  lrs = set().union(*planned.values())
  return sorted(lr for lr in lrs if 2 * sum(lr in p for p in planned.values()) >= len(planned))


def lr_curve(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Per lr (ascending) of one curve: the capped losses of its seeds and their mean."""
  by_lr: dict[float, list[Mapping[str, Any]]] = {}
  for r in rows:
    if r.get("capped_loss") is not None:
      by_lr.setdefault(float(r["opt.lr"]), []).append(r)
  return [
    {
      "lr": lr,
      "losses": [m["capped_loss"] for m in members],
      "seeds": [m["seed"] for m in members],
      "diverged": [m["outcome"] == "diverged" for m in members],
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


def setting_title(rows: Sequence[Mapping[str, Any]]) -> str:
  """The runs' shared setting in words: corpus, budget, warmup, schedule (each value seen)."""

  def words(key: str, fmt) -> str:
    values = sorted({r.get(key) for r in rows}, key=str)
    return " / ".join("?" if v is None else fmt(v) for v in values)

  if not rows:
    return "no finished run yet"

  warm = lambda w: "no warmup" if not w else f"{w:,} warmup steps"
  return ", ".join(
    [
      words("data", str),
      words("train.steps", lambda s: f"{s:,} steps"),
      words("opt.warmup_steps", warm),
      words("opt.schedule", lambda s: f"{s} lr"),
    ]
  )


def draw_curves(rows: Sequence[Mapping[str, Any]]):
  """The figure of `plot_curves` (matplotlib Figure, not saved)."""
  plt = pyplot()
  depths = sorted({int(r["num_layers"]) for r in rows})
  variants = variant_order(r["variant"] for r in rows)
  panels = max(len(depths), 1)
  fig, axes = plt.subplots(1, panels, figsize=(max(4.2 * panels + 2.4, 8.5), 4.8), sharey=True)
  axes = list(axes) if len(depths) > 1 else [axes]
  lrs = sorted({float(r["opt.lr"]) for r in rows})
  losses = [r["capped_loss"] for r in rows if r["capped_loss"] is not None]
  caps = [r["baseline"] for r in rows if is_finite_number(r["baseline"])]
  for ax, depth in zip(axes, depths, strict=False):
    panel = [r for r in rows if int(r["num_layers"]) == depth]
    for variant in variants:
      curve = lr_curve([r for r in panel if r["variant"] == variant])
      if curve:
        _draw_curve(ax, curve, variant_color(variant))
    for cap in sorted({round(r["baseline"], 4) for r in panel if is_finite_number(r["baseline"])}):
      baseline_lines(ax, cap, margin=False)
    ax.set(xscale="log", title=f"{depth} layers", xlabel="peak lr (Adam)")
    ax.set_xticks(lrs, [lr_label(lr) for lr in lrs], rotation=45, ha="right", fontsize="small")
    ax.minorticks_off()
    ax.grid(alpha=0.3)
  if losses and caps:
    axes[0].set_ylim(min(losses) - 0.08, max(caps) + 0.12)
  axes[0].set_ylabel("final eval loss, capped at the baseline")
  handles = [plt.Line2D([], [], color=variant_color(v), marker="o", label=v) for v in variants]
  grey = "0.35"
  handles += [
    plt.Line2D([], [], color=grey, marker="o", ms=4, label="seed 0 (the line joins its lrs)"),
    plt.Line2D([], [], color=grey, marker="o", ms=4, mfc="white", ls="", label="other seeds"),
    plt.Line2D([], [], color=grey, marker="_", ms=14, mew=2, ls="", label="mean over seeds"),
    plt.Line2D([], [], color=grey, marker="x", ls="", label="diverged (drawn at the cap)"),
    plt.Line2D([], [], **BASELINE_STYLE, label=FINAL_BASELINE_LABEL),
  ]
  axes[-1].legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
  fig.suptitle(
    f"Final eval loss against lr\n{setting_title(rows)}; every run a marker, "
    "the seed mean a bar where an lr has several seeds"
  )
  return fig


def plot_curves(rows: Sequence[Mapping[str, Any]], out: str) -> str:
  """Capped final eval loss against lr, a panel per depth, a colour per variant: every run a
  marker (seed 0 filled, others open, x for a diverged run), a line only through seed 0's
  runs (each vertex a run's loss), the seed mean a bar at each lr with several seeds; the
  held-out no-context baseline dashed. Nothing is drawn between lrs but seed 0's line."""
  return save_figure(draw_curves(rows), out)


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


def _draw_curve(ax, curve: Sequence[Mapping[str, Any]], color: str) -> None:
  """One variant on one panel: a marker per run, seed 0's runs joined, the seed mean a bar."""
  seed0 = [
    (p["lr"], loss)
    for p in curve
    for loss, seed in zip(p["losses"], p["seeds"], strict=True)
    if seed == 0
  ]
  if len(seed0) > 1:
    ax.plot([x for x, _ in seed0], [y for _, y in seed0], "-", color=color, lw=1.4)
  for p in curve:
    for loss, seed, diverged in zip(p["losses"], p["seeds"], p["diverged"], strict=True):
      if diverged:
        ax.plot(p["lr"], loss, "x", color=color, ms=7)
      else:
        ax.plot(p["lr"], loss, "o", color=color, ms=4, mfc=color if seed == 0 else "white")
    if len(p["losses"]) > 1:
      ax.plot(p["lr"], p["mean"], "_", color=color, ms=14, mew=2)


def plot_sensitivity(table: Sequence[Mapping[str, Any]], out: str, title: str = "") -> str:
  """LR sensitivity against depth, a line per variant; the boundary lr beside it."""
  plt = pyplot()
  fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
  computed = [t for t in table if t["lr_sensitivity"] is not None]
  # A curve with no lr off the plateau has a sensitivity of ~0 by construction: drawn as a
  # labelled cross, not as a measured point of its line.
  done = [t for t in computed if t["boundary_lr"] is not None]
  untrained = [t for t in computed if t["boundary_lr"] is None]
  depths = sorted({t["num_layers"] for t in computed})
  variants = variant_order(t["variant"] for t in done)
  for i, variant in enumerate(variants):
    pts = [t for t in done if t["variant"] == variant]
    color = variant_color(variant)
    xs = [t["num_layers"] for t in pts]
    left.plot(xs, [t["lr_sensitivity"] for t in pts], "-o", color=color, label=variant)
    partial = [t for t in pts if t["note"].startswith("partial")]  # open: lrs still to run
    for t in partial:
      left.plot(t["num_layers"], t["lr_sensitivity"], "o", color=color, mfc="white", ms=7)
    # Several variants often share an lr of the grid: each is shifted sideways by 2% of its
    # depth so none hides another; the lr (the y value) is drawn exactly.
    shift = 1.02 ** (i - (len(variants) - 1) / 2)
    bounded = [t for t in pts if t["boundary_lr"]]
    right.plot(
      [t["num_layers"] * shift for t in bounded],
      [t["boundary_lr"] for t in bounded],
      "-o",
      color=color,
      label=variant,
    )
    best = [t["best_lr"] for t in pts]
    right.plot([x * shift for x in xs], best, ":s", mfc="white", color=color, alpha=0.7)
  for t in untrained:
    color = variant_color(t["variant"])
    left.plot(t["num_layers"], t["lr_sensitivity"], "x", color=color, ms=9, mew=2)
    left.annotate(
      f"{t['variant']}: no lr trained",
      (t["num_layers"], t["lr_sensitivity"]),
      textcoords="offset points",
      xytext=(-6, 8),
      ha="right",
      fontsize="small",
      color=color,
    )
  lrs = sorted({t[k] for t in done for k in ("best_lr", "boundary_lr") if t[k]})
  for t in untrained:  # no boundary to draw: named at the foot of its depth
    right.annotate(
      f"{t['variant']}: none",
      (t["num_layers"], 0.02),
      xycoords=("data", "axes fraction"),
      ha="right",
      fontsize="small",
      color=variant_color(t["variant"]),
    )
  left.set(ylabel="LR sensitivity (nats)", title="E_lr[min(loss, baseline)] - min_lr loss")
  right.set(yscale="log", ylabel="peak lr", title="largest lr within 0.1 nats of the best")
  right.set_yticks(lrs, [lr_label(lr) for lr in lrs])
  for ax in (left, right):
    ax.set(xscale="log", xlabel="layers N")
    if depths:
      ax.set_xticks(depths, [str(d) for d in depths])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
  right.plot([], [], ":s", mfc="white", color="0.35", label="best lr (dotted)")
  if any(t["note"].startswith("partial") for t in done):
    left.plot([], [], "o", color="0.35", mfc="white", label="partial curve (lrs to run)")
    left.legend(fontsize="small")
  if not computed:
    left.text(
      0.5, 0.5, f"no curve with >= {MIN_LRS} lrs yet", ha="center", transform=left.transAxes
    )
  right.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
  fig.suptitle(title or "LR sensitivity against depth (Wortsman et al. 2023)")
  return save_figure(fig, out)


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


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: str) -> str:
  """`rows` as a csv of `columns` (the header alone when there are none)."""
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
  return path


def write_outputs(
  rows: Sequence[Mapping[str, Any]], out_dir: str, grid: Sequence[float] = ()
) -> dict[str, str]:
  """results.csv, sensitivity.csv, curves.png and sensitivity.png of finished runs' rows
  (`grid`: the sweep's lrs, to note partial curves)."""
  table = sensitivity_table(rows, grid=grid)
  os.makedirs(out_dir, exist_ok=True)
  names = ("results.csv", "sensitivity.csv", "curves.png", "sensitivity.png")
  paths = {name: os.path.join(out_dir, name) for name in names}
  write_csv(rows, RESULT_COLUMNS, paths["results.csv"])
  write_csv(table, TABLE_COLUMNS, paths["sensitivity.csv"])
  plot_curves(rows, paths["curves.png"])
  plot_sensitivity(table, paths["sensitivity.png"], f"LR sensitivity: {setting_title(rows)}")
  return paths
