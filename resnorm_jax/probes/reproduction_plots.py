"""Figures of the paper reproductions (experiments/grad_norms_at_init.py, model_update.py,
grad_flow.py) from their rows or their committed CSVs, in style.py's palette: each config in
its variant's colour (the config label is the variant's name). `replot` redraws a folder's
figures from its CSVs without measuring anything (the experiments' --from_data). No JAX here.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Sequence
from typing import Any

from resnorm_jax.analysis import style
from resnorm_jax.files import csv_table
from resnorm_jax.runs import status

Row = dict[str, Any]
# Runs of one config at several depths: one colour (the variant's), a line style per depth.
DEPTH_STYLES = ("-", "--", ":", "-.")
# grad_flow's states: init grey, after training the variant's colour (solid), each reset the
# variant's colour dashed with its own marker.
RESET_MARKERS = ("o", "s", "^", "v", "D", "P")


def write_csv(path: str, rows: Sequence[Row]) -> str:
  """Rows (dicts with the same keys) to a CSV file; returns the path."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  plain = [{k: (float(v) if _is_np_float(v) else v) for k, v in r.items()} for r in rows]
  return csv_table.write_csv(path, plain, list(rows[0]) if rows else [])


def _is_np_float(v: Any) -> bool:
  return type(v).__module__ == "numpy" and hasattr(v, "dtype") and v.dtype.kind == "f"


def _value(text: str) -> Any:
  """A CSV cell as an int, a float ('nan' included) or the text."""
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text


def read_csv(path: str) -> list[Row]:
  """A CSV written by write_csv, its numbers parsed."""
  return [{k: _value(v) for k, v in r.items()} for r in csv_table.read_csv(path)]


def by(rows: Sequence[Row], *keys: str) -> dict[tuple, list[Row]]:
  """Rows grouped by the values of `keys`, in first-seen order."""
  groups: dict[tuple, list[Row]] = {}
  for r in rows:
    groups.setdefault(tuple(r[k] for k in keys), []).append(r)
  return groups


def config_color(label: str) -> str:
  """A config label's colour: its variant's (the longest palette name it starts with, so
  'postnorm-smoke' is Post-LN's red and 'postnorm_deepinit' its own), else style's fallback."""
  names = [v for v in style.palette() if label == v or label.startswith(v + "-")]
  return style.variant_color(max(names, key=len) if names else label)


def _depth_style(rows: Sequence[Row], depth: int) -> str:
  depths = sorted({r["depth"] for r in rows})
  return DEPTH_STYLES[depths.index(depth) % len(DEPTH_STYLES)]


def vs_depth_figure(rows: Sequence[Row], key: str, *, ylabel: str, title: str):
  """(figure, axes): `key` against depth on log-log axes, a line per config in its colour."""
  fig, ax = style.pyplot().subplots(figsize=(5.5, 4))
  for (label,), rs in by(rows, "config").items():
    ax.plot(
      [r["depth"] for r in rs],
      [r[key] for r in rs],
      "o-",
      color=config_color(label),
      label=label,
    )
  ax.set(xscale="log", yscale="log", xlabel="layers N", ylabel=ylabel)
  ax.set_title(title)
  return fig, ax


def grad_norms_per_layer_figure(per_layer: Sequence[Row]):
  """Per-layer FFN W1 and W2 gradient norms at init, a line per config in its colour."""
  fig, axes = style.pyplot().subplots(1, 2, figsize=(11, 4))
  for (label, n), rows in by(per_layer, "config", "num_layers").items():
    for ax, key in zip(axes, ("w1_grad_norm", "w2_grad_norm"), strict=True):
      ax.plot(
        [r["layer"] for r in rows],
        [r[key] for r in rows],
        marker=".",
        color=config_color(label),
        label=f"{label} (N={n})",
      )
  for ax, name in zip(axes, ("W1 (ffn_in)", "W2 (ffn_out)"), strict=True):
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set(xlabel="layer", ylabel="||E[grad]||_F", title=f"FFN {name} gradient norm at init")
    ax.legend()
  return fig


def grad_norms_vs_depth_figure(vs_depth: Sequence[Row]):
  """The last layer's W2 gradient norm at init against depth, with a 1/sqrt(N) guide."""
  fig, ax = vs_depth_figure(
    vs_depth,
    "last_w2_grad_norm",
    ylabel="||E[grad W2]||_F, last layer",
    title="last layer's FFN W2 gradient norm at init",
  )
  depths = sorted({r["depth"] for r in vs_depth})
  ref = max(r["last_w2_grad_norm"] for r in vs_depth if r["depth"] == depths[0])
  ax.plot(depths, [ref * math.sqrt(depths[0] / d) for d in depths], "k:", label="1/sqrt(N)")
  ax.legend()
  return fig


def model_update_figure(rows: Sequence[Row]):
  """Model update and norm-input RMS against step, a colour per config, a style per depth."""
  fig, axes = style.pyplot().subplots(1, 2, figsize=(13, 4.2))
  for (label, depth), run in by(rows, "config", "depth").items():
    color, ls = config_color(label), _depth_style(rows, depth)
    later = [r for r in run if r["step"] > 0]
    axes[0].plot(
      [r["step"] for r in later],
      [r["update"] for r in later],
      ls=ls,
      color=color,
      label=f"{label} N={depth}",
    )
    steps = [r["step"] for r in run]
    axes[1].plot(steps, [r["norm_in_rms_max"] for r in run], ls=ls, color=color, lw=1.6)
    mean = [r["norm_in_rms_mean"] for r in run]
    axes[1].plot(steps, mean, ls=ls, color=color, lw=0.7, marker=".", ms=3)
  axes[0].set(yscale="log", xlabel="step", ylabel="||F(x,θ_t) - F(x,θ_0)|| (logits, per token)")
  axes[0].set_title("model update on a fixed batch")
  handles, labels = axes[0].get_legend_handles_labels()
  axes[1].legend(
    handles,
    labels,
    fontsize="small",
    loc="center left",
    bbox_to_anchor=(1.02, 0.5),
    ncol=1 if len(labels) <= 12 else 2,
  )
  axes[1].set(yscale="log", xlabel="step", ylabel="norm-input RMS (thick: max; thin, dots: mean)")
  axes[1].set_title("norm inputs (RMS 1 = ||x|| of sqrt(d))")
  return fig


def early_update_figure(early: Sequence[Row]):
  """The largest early update against depth: per unit lr when the rows have it (the linear
  regime's measure), else the raw update (CSVs that predate it)."""
  per_lr = all("early_update_per_lr" in r for r in early)
  fig, ax = vs_depth_figure(
    early,
    "early_update_per_lr" if per_lr else "early_update",
    ylabel="max update / lr, early steps" if per_lr else "max update, early steps",
    title="early model update vs depth",
  )
  ax.legend()
  return fig


def grad_flow_figure(rows: Sequence[Row]):
  """Per-layer gradient norm, a panel per config and depth: init grey, after training the
  variant's colour, each reset the variant's colour dashed with its own marker."""
  runs = by(rows, "config", "depth")
  fig, axes = style.pyplot().subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False)
  for ax, ((label, depth), run) in zip(axes[0], runs.items(), strict=True):
    color = config_color(label)
    resets = 0
    for (name,), rs in by(run, "state").items():
      layers, norms = [r["layer"] for r in rs], [r["grad_norm"] for r in rs]
      if name == "init":
        ax.plot(layers, norms, color="0.55", lw=1.5, label=name)
      elif name == status.TRAINED:
        ax.plot(layers, norms, color=color, lw=2, label=name)
      else:
        marker = RESET_MARKERS[resets % len(RESET_MARKERS)]
        resets += 1
        every = max(1, len(layers) // 12)
        ax.plot(
          layers, norms, "--", color=color, lw=1, marker=marker, ms=4, markevery=every, label=name
        )
    ax.set(yscale="log", xlabel="layer", ylabel="||grad|| of the layer's parameters")
    ax.set_title(
      f"{label} N={depth}: after {run[0]['steps']} steps", fontsize="medium", color=color
    )
    ax.legend(fontsize="small")
  return fig


def save(fig, path: str) -> str:
  """style.save_figure, the path returned."""
  return style.save_figure(fig, path)


def replot(folder: str) -> list[str]:
  """Every reproduction figure of `folder` redrawn from the CSV beside it (same stem):
  grad_norms_per_layer*.csv, grad_norms_vs_depth.csv, model_update.csv,
  model_update_vs_depth.csv, grad_flow.csv. ValueError when it holds none of them."""
  figures = {
    "grad_norms_per_layer": grad_norms_per_layer_figure,
    "grad_norms_vs_depth": grad_norms_vs_depth_figure,
    "model_update_vs_depth": early_update_figure,
    "model_update": model_update_figure,
    "grad_flow": grad_flow_figure,
  }
  out = []
  for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.csv"))):
    stem = os.path.splitext(os.path.basename(path))[0]
    kind = next((k for k in figures if stem == k or stem.startswith(k + "_L")), None)
    if kind:
      out.append(save(figures[kind](read_csv(path)), os.path.join(folder, stem + ".png")))
  if not out:
    raise ValueError(f"{folder}: no reproduction CSV ({', '.join(figures)})")
  return out
