"""The one palette and style of every figure: a colour per variant (the same in every figure),
a marker per variant, a colour per parametrization, a line style per seed, the variants'
display names, which runs a seed mean may pool, the status colours of maps, how the
no-context baseline and the escape margin are drawn, and matplotlib set up for files. No JAX
here; matplotlib is imported only when a figure is drawn.

A variant added after this palette declares its own colour and name in its named config,
configs/<name>_96L.py, as module constants `COLOR = "#rrggbb"` and `LABEL = "..."` (read from
the file's source, not imported), so adding a variant touches no module here.
"""

from __future__ import annotations

import ast
import functools
import glob
import math
import os
import zlib
from collections.abc import Sequence
from typing import Any

from resnorm_jax.files import pysource
from resnorm_jax.runs import status
from resnorm_jax.runs.outcome import STUCK_MARGIN

# The status of a run or cell (maps, boundary): a grey ramp, dark = stuck, so no status reads as
# a variant (every hue is some variant's). tests/test_figures_rule.py keeps each at least
# STATUS_DISTANCE (RGB, 0-255) from every variant colour. The statuses that are no verdict
# (interrupted, failed, unknown) are hatched too.
STATUS_COLORS = {
  status.TRAINED: "#e0e0e0",
  status.STUCK: "#5c5c5c",
  status.DIVERGED: "#262626",
  status.INTERRUPTED: "#f7f7f7",
  status.FAILED: "#f7f7f7",
  "pending": "#ffffff",
  "unknown": "#f7f7f7",
}
STATUS_HATCHES = {status.INTERRUPTED: "//", status.FAILED: "xx", "unknown": ".."}
# A boundary cell where the seeds split: between trained and stuck.
SPLIT_COLOR = "#b3b3b3"
STATUS_DISTANCE = 40.0


def text_color(face: str) -> str:
  """Black or white, whichever reads on a cell of colour `face` ('#rrggbb')."""
  r, g, b = (int(face[i : i + 2], 16) for i in (1, 3, 5))
  return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 128 else "black"


# One colour per variant in every figure (the main three first: Post-LN red, Pre-LN blue,
# DeepNorm green); any two are at least 50 apart in RGB (tests/test_figures_rule.py), so the
# variants one figure shows together are told apart. Close relatives
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
  # gated attention's controls (docs/stabilizers): the gate's own colour is its config's
  "attnscale": "#c000e0",
  "gatebias": "#800000",
  "gatefrozen": "#0000e0",
  "gatehead": "#60e000",
  # the stabilizers that are keys, not named configs (docs/stabilizers; softcapping, sinks and
  # gated attention take their configs' colours)
  "qknorm": "#6010f0",
  "zloss": "#00f000",
  "adamatan2": "#405000",
  "muon": "#000080",
}
# The cells of docs/stabilizers are named <base>-<stabilizer> (postnorm-attngate, prenorm-muon-sp):
# the stabilizer is what such a figure tells apart, so the cell takes its stabilizer's colour.
STABILIZER_BASES = ("postnorm", "prenorm", "deepnorm")
# A variant not named above: a fixed colour from its name (the same in every figure and run).
_OTHER_COLORS = ("#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")


# The logged signals of docs/early_warning (runs/stop_features.SIGNALS), a colour each, and
# the predictor on all core signals together in black. A signal is no variant: no figure
# shows the two together.
SIGNAL_COLORS = {
  "train/loss": "#1b9e77",
  "grad_norm": "#d95f02",
  "update_norm": "#7570b3",
  "param_norm": "#e7298a",
  "attn_logit_max": "#66a61e",
  "output_logit_rms": "#a6761d",
  "all core signals": "#000000",
}


CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "configs")
# what a named config may declare about how it is drawn: its colour and label, and optionally
# its marker and the family of variants whose panel it joins in the loss-vs-lr figures
DECLARED = ("COLOR", "LABEL", "MARKER", "FAMILY")


def declared(path: str) -> dict[str, str]:
  """{COLOR, LABEL: value} of the string constants a named config assigns at module level."""
  tree = pysource.parse_file(path)
  out = {}
  for node in tree.body:
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
      for target in node.targets:
        if isinstance(target, ast.Name) and target.id in DECLARED:
          out[target.id] = str(node.value.value)
  return out


@functools.cache
def _named_configs() -> dict[str, dict[str, str]]:
  """{experiment name: what configs/<name>_96L.py declares} of every named config."""
  paths = sorted(glob.glob(os.path.join(CONFIGS, "*_96L.py")))
  return {os.path.basename(p)[: -len("_96L.py")]: declared(p) for p in paths}


def palette() -> dict[str, str]:
  """{variant: colour}: VARIANT_COLORS, then the colours the named configs declare."""
  own = {n: d["COLOR"] for n, d in _named_configs().items() if "COLOR" in d}
  return {**VARIANT_COLORS, **{n: c for n, c in own.items() if n not in VARIANT_COLORS}}


VARIANT_DISTANCE = 50.0  # RGB (0-255): the least distance between two variants' colours


def _rgb(color: str) -> tuple[int, int, int]:
  return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def propose_color(taken: Sequence[str] | None = None, step: int = 16) -> str:
  """A free colour for a new variant: of an RGB grid (`step` apart), the saturated one that
  lies farthest from every colour `taken` (the palette's by default), and at least
  STATUS_DISTANCE from the statuses' greys. What CONTRIBUTING's recipe and the palette test's
  message offer a new config's COLOR."""
  taken = list(palette().values()) if taken is None else list(taken)
  greys = [*STATUS_COLORS.values(), SPLIT_COLOR]
  best, far = "#000000", -1.0
  for r in range(0, 256, step):
    for g in range(0, 256, step):
      for b in range(0, 256, step):
        c = (r, g, b)
        if max(c) - min(c) < 96:  # a grey or a washed-out tint reads as a status, not a variant
          continue
        if min(math.dist(c, _rgb(s)) for s in greys) < STATUS_DISTANCE:
          continue
        d = min((math.dist(c, _rgb(t)) for t in taken), default=math.inf)
        if d > far:
          best, far = "#{:02x}{:02x}{:02x}".format(*c), d
  return best


def variant_color(name: str) -> str:
  """The colour of a variant in every figure (the palette's, else fixed by its name)."""
  colours = palette()
  if name in colours:
    return colours[name]
  base, _, rest = name.partition("-")
  if base in STABILIZER_BASES and rest:
    for part in (rest, rest.split("-")[0]):  # muon-sp, muon-completep: Muon's
      if part in colours:
        return colours[part]
  return _OTHER_COLORS[zlib.crc32(name.encode()) % len(_OTHER_COLORS)]


# One marker per variant in every figure that marks runs, so two variants whose points coincide
# (every stuck run sits at the cap) are still both seen. "x" (a diverged run) and "_" (a seed
# mean) are kept for what they mean; a variant not named here gets a fixed one from its name.
VARIANT_MARKERS = {
  "postnorm": "o",
  "prenorm": "s",
  "deepnorm": "^",
  "sandwich": "v",
  "dyt": "D",
  "subln": "<",
  "hyperconn": ">",
  "rezero": "p",
  "rmsnorm_prenorm": "h",
  "admin": "8",
  "lnscale": "H",
  "mixln": "d",
  "ngpt": "*",
  "batchnorm": "P",
  "layerscale": "X",
  "noresidual": "o",
  "parallel": "s",
  "deepnorm_frozen": "v",
  "postnorm_deepinit": "D",
}
_OTHER_MARKERS = ("o", "s", "^", "D", "v", "P")


def variant_marker(name: str) -> str:
  """The marker of a variant's runs in every figure: VARIANT_MARKERS, else its named config's
  MARKER, else one fixed by its name."""
  return (
    VARIANT_MARKERS.get(name)
    or _named_configs().get(name, {}).get("MARKER")
    or _OTHER_MARKERS[zlib.crc32(name.encode()) % len(_OTHER_MARKERS)]
  )


def variant_family(name: str) -> str | None:
  """The figure family a variant's named config declares it joins (FAMILY), None if none."""
  return _named_configs().get(name, {}).get("FAMILY")


# One colour per parametrization (depth: sp, depth-muP, CompleteP; width: muP) in every figure
# that tells them apart by colour; each at least 50 (RGB) from every variant colour and from
# each other (tests/test_style.py), so a parametrization never reads as a variant.
PARAM_COLORS = {
  "sp": "#404040",
  "depth_mup": "#01665e",
  "completep": "#9e0142",
  "mup": "#00429d",
}
PARAM_LABELS = {
  "sp": "standard (sp)",
  "depth_mup": "depth-muP (a=1/2)",
  "completep": "CompleteP (a=1)",
  "mup": "muP",
}


def param_color(name: str) -> str:
  """The colour of a parametrization in every figure (PARAM_COLORS)."""
  return PARAM_COLORS[name]


VARIANT_LABELS = {"postnorm": "Post-LN", "prenorm": "Pre-LN", "deepnorm": "DeepNorm"}


def variant_label(name: str) -> str:
  """A variant's name in figures and tables: Post-LN, Pre-LN, DeepNorm, the LABEL its named
  config declares, else its config name."""
  return VARIANT_LABELS.get(name) or _named_configs().get(name, {}).get("LABEL", name)


def variant_order(names) -> list[str]:
  """Variants in the palette's order (the main three first), others after, by name."""
  known = list(palette())
  return sorted(set(names), key=lambda v: (known.index(v) if v in known else len(known), v))


def lr_label(lr: float, digits: int = 3) -> str:
  """A learning rate as every figure and the docs write it: 1.25e-4, 5e-4, 3.2e-2; `digits`
  significant digits at most (the docs' text takes 4: a halved grid's 3.125e-5)."""
  mantissa, exponent = f"{lr:.{digits - 1}e}".split("e")
  return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


SEED_STYLES = ("-", "--", ":", "-.")  # seed 0, 1, 2, 3 (then again)


def seeds_agree(trained: Sequence[bool]) -> bool:
  """Whether a figure may draw the seed mean of runs that trained (True) or not (False): only
  when they all did or all did not. A mean of trained and stuck runs is a loss no run had;
  where the seeds split, each seed is drawn and no mean."""
  return len(set(trained)) <= 1


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


# The end-of-run verdict's no-context loss (the held-out split's), where a figure draws both:
# a short grey dash-dot at the right edge, beside the end-of-run evals it judges.
FINAL_BASELINE_STYLE = {"ls": "-.", "lw": 1.2, "color": "0.55"}


def final_baseline_mark(ax, baseline: float | None) -> None:
  """The held-out split's no-context loss (the end-of-run verdict's) over the right 12% of
  `ax`, where the end-of-run evals sit."""
  if baseline is not None:
    ax.axhline(baseline, xmin=0.88, xmax=1.0, **FINAL_BASELINE_STYLE)


def final_baseline_handle() -> Any:
  """The legend entry of final_baseline_mark."""
  from matplotlib.lines import Line2D

  label = "no-context loss of the held-out split (the end-of-run verdict's, at the right)"
  return Line2D([], [], **FINAL_BASELINE_STYLE, label=label)


# What a periodic eval curve is judged against (outcome.curve_baseline), and what an
# end-of-run eval loss is (outcome.baseline): two eval sets, two no-context losses.
CURVE_BASELINE_LABEL = "no-context loss of the periodic eval's tokens"
FINAL_BASELINE_LABEL = "no-context loss of the held-out split"


def baseline_handles(margin: bool = True, label: str = CURVE_BASELINE_LABEL) -> list[Any]:
  """Legend entries of baseline_lines: `label` names the no-context loss drawn."""
  from matplotlib.lines import Line2D

  handles = [Line2D([], [], **BASELINE_STYLE, label=label)]
  if margin:
    text = f"{STUCK_MARGIN:g} nats below it (escaped from the first eval under it to the end)"
    handles.append(Line2D([], [], **MARGIN_STYLE, label=text))
  return handles
