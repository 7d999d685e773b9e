"""How the runs that leave Post-LN's plateau differ from those that stay, before they leave:
plain Post-LN, gated attention and the 0.5-scale control at the 12-layer lr 1e-3 cell over
their first 300 steps (configs/sweeps/gate_mechanism.py), from the per-layer diagnostics
logged at every step (resnorm_jax/train/train_step.py). One table (each quantity reduced over
the layers, per arm, seed and step) and one figure of every quantity against the step, one
colour per arm, one line per seed. No JAX here: metrics.jsonl only.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.style import (
  baseline_lines,
  pyplot,
  save_figure,
  variant_color,
)
from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.runs import record_files
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import curve_baseline

# (arm as its cell is named, label): the arms of the grid, in the figure's order
ARMS = (
  ("postnorm", "plain Post-LN"),
  ("postnorm-attngate", "gated attention"),
  ("postnorm-attnscale", "attention branch x 0.5, no gate"),
)
# (metric in metrics.jsonl, how the layers are reduced, panel title)
QUANTITIES = (
  ("attn_branch_rms", "mean", "attention branch RMS (mean over layers)"),
  ("attn_norm_in_rms", "mean", "RMS into attention's Post-LN norm: skip + branch"),
  ("attn_entropy", "mean", "attention entropy, nats (mean over layers)"),
  ("attn_sink_mass", "mean", "attention on the first token (mean over layers)"),
  ("stream_max", "max", "largest activation of the stream (max over layers)"),
  ("attn_gate_mean", "mean", "the gate's mean (mean over layers)"),
  ("attn_gate_std", "mean", "the gate's spread: std over batch, time, units (mean over layers)"),
  ("update_ratio_layer", "mean", "update / parameters per layer (mean over layers)"),
  ("grad_norm_layer", "first_over_last", "gradient norm, first layer / last"),
)
LOG_Y = ("update_ratio_layer", "grad_norm_layer")  # spans decades
TABLE_STEPS = (1, 5, 10, 25, 50, 75, 100, 150, 200, 250, 300)
NAME = re.compile(r"^(?P<arm>.+)-L(?P<layers>\d+)-lr(?P<lr>[0-9.e-]+)-s(?P<seed>\d+)$")


def _reduce(values: Sequence[float], how: str) -> float | None:
  values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
  if not values:
    return None
  if how == "max":
    return max(values)
  if how == "first_over_last":
    return values[0] / values[-1] if values[-1] else None
  return sum(values) / len(values)


def run_series(run_dir: str) -> dict[str, Any] | None:
  """{arm, seed, eval: [(step, loss)], baseline, quantities: {metric: [(step, value)]}} of a
  finished run folder of the grid, None for another folder."""
  m = NAME.match(os.path.basename(os.path.normpath(run_dir)))
  summary = read_json(os.path.join(run_dir, record_files.SUMMARY))
  path = os.path.join(run_dir, record_files.METRICS)
  if not m or not isinstance(summary, dict) or not os.path.isfile(path):
    return None
  records = read_metrics(path)
  series: dict[str, list[tuple[int, float]]] = {}
  for metric, how, _ in QUANTITIES:
    points = []
    for r in records:
      if isinstance(r.get(metric), list):
        value = _reduce(r[metric], how)
        if value is not None:
          points.append((r["step"], value))
    series[metric] = points
  evals = [(r["step"], r["eval/loss"]) for r in records if "eval/loss" in r]
  return {
    "arm": m["arm"],
    "seed": int(m["seed"]),
    "eval": evals,
    "baseline": curve_baseline(summary),
    "quantities": series,
  }


def collect(runs_dir: str) -> list[dict[str, Any]]:
  out = [run_series(os.path.join(runs_dir, d)) for d in sorted(os.listdir(runs_dir))]
  return [r for r in out if r is not None]


def escape_step(run: Mapping[str, Any], margin: float = 0.1) -> int | None:
  """The first periodic eval 0.1 nats below the eval set's no-context loss (first passage),
  within these 300 steps; None when the run stayed on the plateau."""
  base = run["baseline"]
  for step, loss in run["eval"]:
    if base is not None and loss <= base - margin:
      return step
  return None


def table(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """One row per (arm, seed, step of TABLE_STEPS): each quantity's layer-reduced value."""
  rows = []
  for run in sorted(runs, key=lambda r: ([a for a, _ in ARMS].index(r["arm"]), r["seed"])):
    for step in TABLE_STEPS:
      row: dict[str, Any] = {"arm": run["arm"], "seed": run["seed"], "step": step,
                             "first_passage": escape_step(run) or ""}  # fmt: skip
      for metric, *_ in QUANTITIES:
        values = dict(run["quantities"][metric])
        row[metric] = "" if step not in values else f"{values[step]:.6g}"
      rows.append(row)
  return rows


def write_table(path: str, rows: Sequence[Mapping[str, Any]]) -> str:
  """mechanism.csv: a row per (arm, seed, step), its quantities beside them."""
  columns = ["arm", "seed", "step", "first_passage", *(m for m, *_ in QUANTITIES)]
  return csv_table.write_csv(path, rows, columns, lineterminator="\n")


def plot(runs: Sequence[Mapping[str, Any]], out: str) -> str:
  """Eval loss, then every quantity against the step (log scale), one colour per arm, one
  line per seed; a dotted vertical line at each escaping run's first passage."""
  plt = pyplot()
  panels = 1 + len(QUANTITIES)
  cols = 5
  rows = math.ceil(panels / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.8 * rows))
  axes = axes.ravel()
  labels = dict(ARMS)
  colour = {a: variant_color(a.removeprefix("postnorm-") if a != "postnorm" else a) for a in labels}
  for run in runs:
    c = colour[run["arm"]]
    steps, losses = zip(*run["eval"], strict=True) if run["eval"] else ((), ())
    axes[0].plot(steps, losses, color=c, lw=1, alpha=0.8)
  base = next((r["baseline"] for r in runs if r["baseline"] is not None), None)
  baseline_lines(axes[0], base)
  axes[0].set_title("periodic eval loss (nats)", fontsize=9)
  axes[0].set_xscale("log")
  for ax, (metric, _, title) in zip(axes[1:], QUANTITIES, strict=False):
    for run in runs:
      points = run["quantities"][metric]
      if points:
        s, v = zip(*points, strict=True)
        ax.plot(s, v, color=colour[run["arm"]], lw=0.8, alpha=0.8)
      first = escape_step(run)
      if first is not None:
        ax.axvline(first, color=colour[run["arm"]], ls=":", lw=0.6, alpha=0.5)
    ax.set_title(title, fontsize=9)
    ax.set_xscale("log")
    if metric in LOG_Y:
      ax.set_yscale("log")
  for ax in axes[:panels]:
    ax.set_xlabel("step")
    ax.set_xlim(1, 320)  # one step axis for every panel (the eval's starts at 25)
  for ax in axes[panels:]:
    ax.axis("off")
  handles = [
    plt.Line2D([], [], color=colour[a], label=f"{lab} ({sum(r['arm'] == a for r in runs)} seeds)")
    for a, lab in ARMS
  ]
  fig.legend(handles=handles, loc="upper center", ncol=len(ARMS), frameon=False,
             bbox_to_anchor=(0.5, 0.955))  # fmt: skip
  fig.suptitle(
    "Post-LN 12 layers, lr 1e-3, no warmup: the first 300 steps, one line per seed (dotted: "
    "a run's first eval 0.1 below the no-context loss)",
    y=0.995,
    fontsize=11,
  )
  fig.tight_layout(rect=(0, 0, 1, 0.92))
  return save_figure(fig, out, tight=False)
