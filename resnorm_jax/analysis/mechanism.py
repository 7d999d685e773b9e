"""Why deep Post-LN stalls where DeepNorm and Pre-LN train, from per-layer diagnostics over
training (configs/sweeps/mechanism.py): one table and one figure of three quantities DeepNet
(Wang et al. 2022, Fig. 4-5) reads the failure from, per variant at one depth and lr:

- the model update per step (`update_norm`: the global norm of Adam's parameter update);
- the gradient norm of the lowest layers against the highest (`grad_norm_layer`): a ratio far
  below 1 is a gradient that no longer reaches the bottom of the stack;
- the LayerNorm input RMS per layer (`ffn_norm_in_rms`, the FFN's norm): the size of what each
  norm divides by, which for Post-LN is the sum of the skip and the branch.

No JAX here: it reads metrics.jsonl and summary.json of finished run folders.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.lr_sweep_rows import eval_curve
from resnorm_jax.analysis.style import (
  baseline_lines,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_label,
)
from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.runs import record_files
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import curve_baseline
from resnorm_jax.runs.sweep_results import dotted, run_row

LOW = 3  # the "lower layers": the first LOW layers' gradient norms, averaged
NORM_KEY = "ffn_norm_in_rms"
COLUMNS = (
  "variant",
  "num_layers",
  "lr",
  "step",
  "train_loss",
  "update_norm",
  "grad_low",
  "grad_high",
  "grad_low_over_high",
  "norm_in_rms_first",
  "norm_in_rms_mid",
  "norm_in_rms_last",
)


def layer_records(run_dir: str) -> list[dict[str, Any]]:
  """The metrics rows of a run that carry per-layer diagnostics, by step."""
  path = os.path.join(run_dir, record_files.METRICS)
  rows = read_metrics(path) if os.path.isfile(path) else []
  rows = [r for r in rows if isinstance(r, dict) and isinstance(r.get("grad_norm_layer"), list)]
  return sorted(rows, key=lambda r: r["step"])


def low_over_high(grad_norm_layer: Sequence[float], low: int = LOW) -> tuple[float, float]:
  """(mean gradient norm of the first `low` layers, of the last `low`)."""
  k = max(1, min(low, len(grad_norm_layer) // 2))
  return statistics.fmean(grad_norm_layer[:k]), statistics.fmean(grad_norm_layer[-k:])


def table_rows(run_dir: str) -> list[dict[str, Any]]:
  """A row per logged step of one run: the three quantities, summarised per layer."""
  run = run_row(run_dir)
  out = []
  for r in layer_records(run_dir):
    low, high = low_over_high(r["grad_norm_layer"])
    rms = r.get(NORM_KEY) or [math.nan]
    out.append(
      {
        "variant": run["variant"],
        "num_layers": run["num_layers"],
        "lr": dotted(run["_config"], "opt.lr"),
        "step": r["step"],
        "train_loss": r.get("train/loss"),
        "update_norm": r.get("update_norm"),
        "grad_low": low,
        "grad_high": high,
        "grad_low_over_high": low / high if high > 0 else math.nan,
        "norm_in_rms_first": rms[0],
        "norm_in_rms_mid": rms[len(rms) // 2],
        "norm_in_rms_last": rms[-1],
      }
    )
  return out


def finished_runs(runs_dir: str) -> list[str]:
  """Run folders under `runs_dir` with a summary.json, in the palette's variant order."""
  dirs = [os.path.join(runs_dir, n) for n in sorted(os.listdir(runs_dir))]
  dirs = [d for d in dirs if os.path.isfile(os.path.join(d, record_files.SUMMARY))]
  order = ("postnorm", "deepnorm", "prenorm")
  key = lambda d: next(
    (i for i, v in enumerate(order) if os.path.basename(d).startswith(v + "-")), 9
  )
  return sorted(dirs, key=key)


def write_csv(path: str, rows: Sequence[Mapping[str, Any]]) -> str:
  """mechanism.csv: `rows` under COLUMNS, its folder made where missing."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  return csv_table.write_csv(path, rows, COLUMNS, lineterminator="\n")


def profile_steps(steps: Sequence[int], n: int = 4) -> list[int]:
  """`n` logged steps spread over a run on a log scale (the first, the last, between)."""
  if len(steps) <= n:
    return list(steps)
  lo, hi = math.log(steps[0]), math.log(steps[-1])
  want = [math.exp(lo + (hi - lo) * i / (n - 1)) for i in range(n)]
  return sorted({min(steps, key=lambda s, w=w: abs(math.log(s) - math.log(w))) for w in want})


def plot(run_dirs: Sequence[str], out: str) -> str:
  """Top row: periodic eval against its no-context loss, the update per step, the lower layers'
  gradient against the higher layers'; bottom row: the norm input RMS per layer at a few steps,
  a panel per variant. One colour per variant (style.py)."""
  plt = pyplot()
  n = len(run_dirs)
  fig, axes = plt.subplots(2, max(3, n), figsize=(4.2 * max(3, n), 7.4))
  ev, up, gr = axes[0][:3]
  title = ""
  for d in run_dirs:
    run = run_row(d)
    variant, recs = run["variant"], layer_records(d)
    color, label = variant_color(variant), variant_label(variant)
    steps, losses = eval_curve(d)
    base = curve_baseline(read_json(os.path.join(d, record_files.SUMMARY)) or {})
    if base is not None:
      ev.plot(steps, [v - base for v in losses], color=color, label=label)
    s = [r["step"] for r in recs]
    up.plot(s, [r["update_norm"] for r in recs], color=color, label=label)
    ratio = [low_over_high(r["grad_norm_layer"]) for r in recs]
    gr.plot(s, [lo / hi for lo, hi in ratio], color=color, label=label)
    title = f"{run['num_layers']} layers, lr {lr_label(dotted(run['_config'], 'opt.lr'))}"
  baseline_lines(ev, 0.0)
  ev.set(title="periodic eval minus its no-context loss", xlabel="step", ylim=(-1.6, 0.4))
  up.set(title="model update per step (norm of Adam's update)", xlabel="step", yscale="log")
  gr.set(title=f"gradient norm, first {LOW} layers / last {LOW}", xlabel="step", yscale="log")
  gr.axhline(1.0, color="0.6", lw=0.8)
  ev.legend(fontsize=8)
  for ax, d in zip(axes[1], run_dirs, strict=False):
    run, recs = run_row(d), layer_records(d)
    by_step = {r["step"]: r for r in recs}
    chosen = profile_steps(sorted(by_step))
    for i, step in enumerate(chosen):
      rms = by_step[step].get(NORM_KEY) or []
      shade = 0.25 + 0.75 * i / max(1, len(chosen) - 1)
      ax.plot(
        range(len(rms)),
        rms,
        color=variant_color(run["variant"]),
        alpha=shade,
        lw=1.4,
        label=f"step {step}",
      )
    ax.set(
      title=f"{variant_label(run['variant'])}: FFN norm input RMS per layer",
      xlabel="layer",
      yscale="log",
    )
    ax.legend(fontsize=7)
  drawn = list(axes[1][: len(run_dirs)])
  values = [y for ax in drawn for line in ax.get_lines() for y in line.get_ydata() if y > 0]
  for ax in drawn:  # one scale: the variants' norm inputs compare across panels
    ax.set_ylim(min(values) / 1.1, max(values) * 1.1)
  for ax in list(axes[0][3:]) + list(axes[1][len(run_dirs) :]):
    ax.axis("off")
  fig.suptitle(f"Why deep Post-LN stalls: per-layer diagnostics, {title}, no warmup")
  return save_figure(fig, out)
