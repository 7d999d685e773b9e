"""Loss curves of several runs on one figure (scripts/plot_curves.py), and the no-context
losses every curve figure marks: the periodic eval's baseline (dashed, the escape threshold
dotted below it) and the end-of-run verdict's. The palette and style are style.py's.
No JAX here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from resnorm_jax.analysis.style import (
  CURVE_BASELINE_LABEL,
  SEED_STYLES,
  baseline_handles,
  baseline_lines,
  final_baseline_handle,
  final_baseline_mark,
  lr_label,
  pyplot,
  save_figure,
  variant_color,
  variant_label,
)
from resnorm_jax.runs.curves import BASELINE_KINDS, run_record
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE, is_finite_number

# Runs of one variant in a curves figure: a line style and an eval marker each.
EVAL_MARKERS = ("o", "s", "^", "v")
NORM_NAMES = {None: "", "layernorm": "", "rmsnorm": "RMSNorm"}


def _differing(records: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
  """(parts every run shares, for the title; per run the parts that differ, for its label):
  variant, depth, corpus, lr, warmup, norm."""
  parts = [
    [
      variant_label(r["variant"]),
      f"{r['num_layers']} layers",
      r["corpus"],
      f"lr {lr_label(r['lr'])}" if is_finite_number(r["lr"]) else "lr ?",
      f"{r['warmup']:,} warmup steps" if r["warmup"] else "no warmup",
      NORM_NAMES.get(r.get("norm"), str(r.get("norm"))),
    ]
    for r in records
  ]
  same = [all(p[i] == parts[0][i] for p in parts) for i in range(len(parts[0]))] if parts else []
  common = [x for i, x in enumerate(parts[0] if parts else []) if same[i] and x]
  labels = [", ".join(x for i, x in enumerate(p) if not same[i] and x) for p in parts]
  return common, labels


def _fate(r: dict[str, Any]) -> str:
  """'escaped at step 150' or 'never escaped in 600 steps' (the rule's escape step)."""
  if r["escape_step"] is not None:
    return f"escaped at step {r['escape_step']:,}"
  return f"never escaped in {r['steps']:,} steps"


def draw_baselines(ax, values: Sequence[float | None], margin: bool = True) -> list[float]:
  """baseline_lines at each distinct value (to 4 decimals), each labelled with its value at
  the right edge when they differ; returns the values drawn."""
  drawn = sorted({round(v, 4) for v in values if is_finite_number(v)})
  for v in drawn:
    baseline_lines(ax, v, margin=margin)
    if len(drawn) > 1:
      ax.annotate(
        f"{v:.3f}",
        (1, v),
        xycoords=("axes fraction", "data"),
        xytext=(2, 0),
        textcoords="offset points",
        va="center",
        fontsize="x-small",
        color="0.25",
      )
  return drawn


def mark_final_baselines(
  ax, records: Sequence[dict[str, Any]], drawn: Sequence[float]
) -> list[float]:
  """final_baseline_mark at each end-of-run verdict's no-context loss of runs with an
  end-of-run eval, unless it is one of the `drawn` curve baselines; returns those marked."""
  values = {round(r["final_baseline"], 4) for r in records if r["final"] and r["final_baseline"]}
  marked = sorted(v for v in values if v not in drawn)
  for v in marked:
    final_baseline_mark(ax, v)
  return marked


def draw_curves(run_dirs: Sequence[str], title: str = ""):
  """The figure of `plot_curves` (matplotlib Figure, not saved)."""
  from matplotlib.lines import Line2D

  plt = pyplot()
  records = [run_record(r) for r in run_dirs]
  common, labels = _differing(records)
  fig, ax = plt.subplots(figsize=(9, 5.5))
  styles: dict[str, int] = {}
  handles = []
  for r, label in zip(records, labels, strict=True):
    color = variant_color(r["variant"])
    k = styles.setdefault(r["variant"], 0)
    styles[r["variant"]] += 1
    style, marker = SEED_STYLES[k % len(SEED_STYLES)], EVAL_MARKERS[k % len(EVAL_MARKERS)]
    few = len(r["train"][0]) < 3  # a line of one point is invisible
    ax.plot(*r["train"], ls=style, lw=1.2, marker="." if few else None, color=color)
    ax.plot(*r["eval"], marker, ls="", ms=3.5, color=color)
    if r["final"]:
      ax.plot(*r["final"], "D", ms=5, color=color, mfc="white", mew=1.3)
    text = f"{label or variant_label(r['variant'])}: {_fate(r)}"
    handles.append(Line2D([], [], ls=style, marker=marker, ms=3.5, color=color, label=text))
  drawn = draw_baselines(ax, [r["baseline"] for r in records])
  finals = mark_final_baselines(ax, records, drawn)
  ax.set(xlabel="step", ylabel="loss (nats/token)")
  ax.set_title(title or ", ".join(common), fontsize="medium")
  ax.grid(alpha=0.3)
  handles += [
    Line2D([], [], color="0.3", label="train loss"),
    Line2D([], [], ls="", marker="o", ms=3.5, color="0.3", label="periodic eval"),
    Line2D([], [], ls="", marker="D", mfc="white", color="0.3", label="end-of-run eval"),
    *baseline_handles(label=baseline_label(records)),
    *([final_baseline_handle()] if finals else []),
  ]
  ax.legend(handles=handles, fontsize="small")
  return fig


def baseline_label(records: Sequence[dict[str, Any]]) -> str:
  """The legend text of the curve baselines drawn for `records`."""
  kinds = list(dict.fromkeys(r["baseline_kind"] for r in records if r["baseline_kind"]))
  if kinds == [EVAL_SET_BASELINE] or not kinds:
    return CURVE_BASELINE_LABEL
  note = {k: "" if k == EVAL_SET_BASELINE else " (runs without it)" for k in kinds}
  words = [BASELINE_KINDS[k] + note[k] for k in kinds]
  return "no-context loss the escape is judged against: " + "; ".join(words)


def plot_curves(run_dirs: Sequence[str], out: str, title: str = "") -> str:
  """Train loss (a line), periodic eval (dots) and end-of-run eval (a diamond) of every run in
  its variant's colour (runs of one variant told apart by line style), labelled with what
  differs between the runs and its escape step; the no-context loss of the periodic eval's
  tokens dashed and the escape threshold 0.1 below it dotted."""
  return save_figure(draw_curves(run_dirs, title), out)
