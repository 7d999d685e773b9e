"""The one palette and style of every figure: a colour per variant (the same in every figure),
a line style per seed, the variants' display names, the status colours of maps, how the
no-context baseline and the escape margin are drawn, and matplotlib set up for files. No JAX
here; matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from resnorm_jax.train.outcome import STUCK_MARGIN

STATUS_COLORS = {
  "trained": "#66bb6a",
  "stuck": "#ffa726",
  "diverged": "#ef5350",
  "interrupted": "#90a4ae",
  "failed": "#8d6e63",
  "pending": "#eeeeee",
  "unknown": "#bdbdbd",
}


# One colour per variant in every figure (the main three first: Post-LN red, Pre-LN blue,
# DeepNorm green); any 13 variants one figure shows together are told apart. Close relatives
# share a hue (deepnorm_frozen a lighter green, postnorm_deepinit a lighter red).
VARIANT_COLORS = {
  "postnorm": "#d62728",
  "prenorm": "#1f77b4",
  "deepnorm": "#2ca02c",
  "sandwich": "#9467bd",
  "dyt": "#ff7f0e",
  "subln": "#8c564b",
  "hyperconn": "#e377c2",
  "rezero": "#17becf",
  "rmsnorm_prenorm": "#bcbd22",
  "admin": "#7f7f7f",
  "lnscale": "#e6ab02",
  "mixln": "#000000",
  "ngpt": "#1b9e77",
  "batchnorm": "#d95f02",
  "layerscale": "#aec7e8",
  "noresidual": "#c49c94",
  "parallel": "#f7b6d2",
  "deepnorm_frozen": "#98df8a",
  "postnorm_deepinit": "#ff9896",
}
# A variant not named above: a fixed colour from its name (the same in every figure and run).
_OTHER_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")


def variant_color(name: str) -> str:
  """The colour of a variant in every figure (VARIANT_COLORS, else fixed by its name)."""
  if name in VARIANT_COLORS:
    return VARIANT_COLORS[name]
  return _OTHER_COLORS[zlib.crc32(name.encode()) % len(_OTHER_COLORS)]


VARIANT_LABELS = {"postnorm": "Post-LN", "prenorm": "Pre-LN", "deepnorm": "DeepNorm"}
SEED_STYLES = ("-", "--", ":", "-.")  # seed 0, 1, 2, 3 (then again)


def pyplot():
  """matplotlib.pyplot on the Agg backend (files only, no display)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def save_figure(fig, out: str, tight: bool = True) -> str:
  """Writes `fig` to `out` (its folder created; laid out tight unless already), closes it;
  returns `out`."""
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  if tight:
    fig.tight_layout()
  fig.savefig(out, dpi=120)
  pyplot().close(fig)
  return out


# The no-context loss is dashed, the escape threshold STUCK_MARGIN below it dotted, both grey,
# in every figure that draws them.
BASELINE_STYLE = {"ls": "--", "lw": 1, "color": "0.25"}
MARGIN_STYLE = {"ls": ":", "lw": 1, "color": "0.45"}


def baseline_lines(ax, baseline: float | None, margin: bool = True) -> None:
  """The no-context loss (dashed) and, with `margin`, the trained/escape threshold
  STUCK_MARGIN below it (dotted)."""
  if baseline is None:
    return
  ax.axhline(baseline, **BASELINE_STYLE)
  if margin:
    ax.axhline(baseline - STUCK_MARGIN, **MARGIN_STYLE)


def baseline_handles(margin: bool = True) -> list[Any]:
  """Legend entries of baseline_lines."""
  from matplotlib.lines import Line2D

  handles = [Line2D([], [], **BASELINE_STYLE, label="no-context loss (held-out unigram)")]
  if margin:
    label = f"{STUCK_MARGIN:g} nats below it (trained / escaped under it)"
    handles.append(Line2D([], [], **MARGIN_STYLE, label=label))
  return handles
