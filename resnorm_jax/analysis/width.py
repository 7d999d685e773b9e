"""The width axis: loss against lr at d_model 64, 128 and 256, each variant's edge
and best lr against width, and which kind of failure each run above its edge shows.
scripts/width.py is the command line; configs/sweeps/width.py the grid. No JAX here.

The rows are the loss-vs-lr grid's (resnorm_jax/analysis/lr_sweep_rows.py: capped loss,
outcome, escape and divergence steps, late trend) plus the width and the failure-kind
diagnostics every run logs (train_step.py): the largest attention logit and the output
logits' RMS, at the first logged step and at their largest over the logged steps. Runs
from before those metrics were logged (the d_model-64 column) leave them empty.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis import lr_axis, lr_sweep_rows
from resnorm_jax.analysis.style import (
  PARAM_LABELS,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_label,
  variant_order,
)
from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.runs import record_files
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import is_finite_number
from resnorm_jax.runs.sweep_results import dotted

Row = dict[str, Any]
DIAGNOSTICS = ("attn_logit_max", "output_logit_rms")
RESULT_COLUMNS = (
  *lr_sweep_rows.RESULT_COLUMNS,
  "d_model",
  "num_heads",
  *(f"{k}{s}" for k in DIAGNOSTICS for s in ("_first", "_peak")),
)
EDGE_COLUMNS = ("variant", "d_model", *lr_axis.EDGE_FIELDS)
# Width in a sequential blue, lighter for narrower: the variant is the panel.
WIDTH_COLORS = {64: "#9ecae1", 128: "#3182bd", 256: "#08306b"}
# The d_model-64 column: the loss-vs-lr grid's rows of these variants at this depth.
REFERENCE_WIDTH = 64
NUM_LAYERS = 12


VARIANTS = ("postnorm", "prenorm", "deepnorm")


def row_order(r: Mapping[str, Any]) -> tuple:
  """Rows by variant, width, lr and seed."""
  return (r["variant"], int(r["d_model"]), float(r["opt.lr"]), r["seed"])


def width_color(d_model: int) -> str:
  return WIDTH_COLORS.get(int(d_model), "0.5")


def diagnostics(run_dir: str) -> dict[str, float | None]:
  """`<metric>_first` and `<metric>_peak` of each diagnostic over the run's logged rows; a
  per-layer list counts by its largest layer; non-finite values are left out."""
  path = os.path.join(run_dir, record_files.METRICS)
  records = read_metrics(path) if os.path.isfile(path) else []
  out: dict[str, float | None] = {}
  for key in DIAGNOSTICS:
    values = []
    for r in records:
      v = r.get(key) if isinstance(r, dict) else None
      v = max(v, default=None) if isinstance(v, list) else v
      if is_finite_number(v):
        values.append(float(v))
    out[f"{key}_first"] = values[0] if values else None
    out[f"{key}_peak"] = max(values) if values else None
  return out


def run_rows(runs_dir: str, width_param: str = "sp") -> list[Row]:
  """The finished runs of the width sweep under `width_param` (sp or mup: a run's
  model.width_param, sp in configs from before the key), with width, heads and diagnostics."""
  rows = lr_sweep_rows.finished_rows(runs_dir)
  kept = []
  for r in rows:
    run_dir = os.path.join(runs_dir, r["name"])
    config = read_json(os.path.join(run_dir, record_files.CONFIG)) or {}
    if (dotted(config, "model.width_param") or "sp") != width_param:
      continue
    for key in ("d_model", "num_heads"):
      r[key] = dotted(config, f"resolved_model.{key}") or dotted(config, f"model.{key}")
    r.update(diagnostics(run_dir))
    kept.append(r)
  return [r for r in kept if r["d_model"]]


def reference_rows(csv_path: str, variants: Sequence[str], num_layers: int = NUM_LAYERS):
  """The d_model-64 column: the loss-vs-lr grid's results.csv rows of `variants` at
  `num_layers` (their runs are all d_model 64, 4 heads)."""
  rows = lr_axis.grid_rows(csv_path, variants, num_layers)
  for r in rows:
    r.update(d_model=REFERENCE_WIDTH, num_heads=4)
  return rows


WIDTH_PARAMS = {"sp": "standard parametrization", "mup": "muP (base width 64)"}


def axis(width_param: str = "sp") -> lr_axis.Axis:
  """d_model as the sweep's second axis; the figure's title names the width parametrization."""
  return lr_axis.Axis(
    key="d_model",
    order=int,
    color=width_color,
    label=lambda d: f"d_model {d}",
    title=f"Final eval loss against lr by width, {NUM_LAYERS} layers, {WIDTH_PARAMS[width_param]}",
  )


def edge_table(rows: Sequence[Mapping[str, Any]]) -> list[Row]:
  """A row per (variant, width): lr_axis.edge_row's best, boundary and failing lr."""
  return lr_axis.edge_table(rows, axis())


def draw_curves(
  rows: Sequence[Mapping[str, Any]],
  width_param: str = "sp",
  reference: Sequence[Mapping[str, Any]] = (),
):
  """Capped final eval loss against lr: a panel per variant, a colour per width; with
  `reference` (sp's rows beside muP's), a second row of panels draws sp's."""
  names = (
    (PARAM_LABELS[width_param], f"{PARAM_LABELS['sp']}, the reference") if reference else ("", "")
  )
  return lr_axis.draw_curves(rows, axis(width_param), reference, names)


def lowest_lrs(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], float]:
  """(variant, d_model) -> the smallest lr run there: a best lr equal to it is not bracketed."""
  low: dict[tuple[str, int], float] = {}
  for r in rows:
    key, lr = (r["variant"], int(r["d_model"])), float(r["opt.lr"])
    low[key] = min(lr, low.get(key, lr))
  return low


def draw_edges(
  table: Sequence[Mapping[str, Any]],
  width_param: str = "sp",
  lowest: Mapping[tuple[str, int], float] | None = None,
):
  """Best lr (open squares, dotted) and failing lr (filled, solid) against width, a colour per
  variant. A best lr at the smallest lr run at its width (`lowest`, from lowest_lrs) is an
  open downward triangle: the best there may lie lower."""
  plt = pyplot()
  lowest = lowest or {}
  fig, ax = plt.subplots(figsize=(6.8, 4.4))
  variants = variant_order(t["variant"] for t in table)
  for i, variant in enumerate(variants):
    pts = [t for t in table if t["variant"] == variant]
    color, shift = variant_color(variant), 1.03 ** (i - (len(variants) - 1) / 2)
    bests = [t for t in pts if t.get("best_lr")]
    fail = [(t["d_model"] * shift, t["failing_lr"]) for t in pts if t.get("failing_lr")]
    if bests:
      ax.plot(
        [t["d_model"] * shift for t in bests], [t["best_lr"] for t in bests], ":", color=color
      )
      for t in bests:
        open_below = lowest.get((variant, int(t["d_model"]))) == float(t["best_lr"])
        marker = "v" if open_below else "s"
        ax.plot(t["d_model"] * shift, t["best_lr"], marker, mfc="white", color=color)
    if fail:
      ax.plot(*zip(*fail, strict=True), "-o", color=color)
  widths = sorted({t["d_model"] for t in table})
  lr_ticks = sorted({t[k] for t in table for k in ("best_lr", "failing_lr") if t.get(k)})
  ax.set(xscale="log", yscale="log", xlabel="d_model", ylabel="peak lr (Adam)")
  ax.set_xticks(widths, [str(w) for w in widths])
  ax.set_yticks(lr_ticks, [lr_label(x) for x in lr_ticks])
  ax.minorticks_off()
  ax.grid(alpha=0.3)
  handles = [
    plt.Line2D([], [], color=variant_color(v), lw=6, label=variant_label(v)) for v in variants
  ]
  handles += [
    plt.Line2D([], [], ls=":", marker="s", mfc="white", color="0.35", label="best lr"),
    plt.Line2D(
      [], [], ls="", marker="v", mfc="white", color="0.35", label="best at the smallest lr run"
    ),
    plt.Line2D(
      [], [], ls="-", marker="o", color="0.35", label="failing lr (plateau or divergence)"
    ),
  ]
  ax.legend(handles=handles, fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
  ax.set_title(f"Edges against width, {NUM_LAYERS} layers, {WIDTH_PARAMS[width_param]}")
  return fig


def write_outputs(
  rows: Sequence[Mapping[str, Any]],
  out_dir: str,
  width_param: str = "sp",
  reference: Sequence[Mapping[str, Any]] = (),
) -> dict[str, str]:
  """results.csv, edges.csv, curves.png and edges.png in `out_dir`; `reference` rows (sp's,
  beside muP's) are drawn in curves.png only."""
  os.makedirs(out_dir, exist_ok=True)
  names = ("results.csv", "edges.csv", "curves.png", "edges.png")
  paths = {n: os.path.join(out_dir, n) for n in names}
  table = edge_table(rows)
  csv_table.write_csv(paths["results.csv"], rows, RESULT_COLUMNS, extrasaction="ignore")
  csv_table.write_csv(paths["edges.csv"], table, EDGE_COLUMNS, extrasaction="ignore")
  save_figure(draw_curves(rows, width_param, reference), paths["curves.png"])
  save_figure(draw_edges(table, width_param, lowest_lrs(rows)), paths["edges.png"])
  return paths
