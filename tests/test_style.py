"""The one palette and style of every figure (resnorm_jax/analysis/style.py)."""

import glob
import os

from resnorm_jax.analysis import style
from resnorm_jax.runs.outcome import STUCK_MARGIN


def test_every_named_variant_has_its_own_colour_and_others_a_fixed_one():
  colours = list(style.VARIANT_COLORS.values())
  assert len(set(colours)) == len(colours)
  assert style.variant_color("postnorm") == "#d62728"  # Post-LN red in every figure
  assert style.variant_color("a_new_variant") == style.variant_color("a_new_variant")
  assert style.variant_color("a_new_variant") in style._OTHER_COLORS


def test_baseline_lines_draw_the_no_context_loss_and_the_margin_below_it():
  plt = style.pyplot()
  fig, ax = plt.subplots()
  style.baseline_lines(ax, 3.2)
  assert [line.get_ydata()[0] for line in ax.lines] == [3.2, 3.2 - STUCK_MARGIN]
  assert [line.get_linestyle() for line in ax.lines] == ["--", ":"]
  style.baseline_lines(ax, None)  # no baseline known: nothing drawn
  style.baseline_lines(ax, 3.0, margin=False)
  assert len(ax.lines) == 3
  assert [h.get_linestyle() for h in style.baseline_handles()] == ["--", ":"]
  assert len(style.baseline_handles(margin=False)) == 1
  plt.close(fig)


def _rgb(colour: str) -> tuple[int, ...]:
  return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def test_one_colour_per_parametrization_never_a_variants():
  import math

  params = style.PARAM_COLORS
  assert set(params) >= {"sp", "depth_mup", "completep", "mup"}
  assert set(style.PARAM_LABELS) == set(params)
  assert style.PARAM_LABELS["completep"] == "CompleteP (a=1)"
  colours = list(params.values())
  for i, a in enumerate(colours):
    for b in colours[i + 1 :]:
      assert math.dist(_rgb(a), _rgb(b)) >= 50, (a, b)
  variants = [*style.palette().values(), *style._OTHER_COLORS]
  for name, colour in params.items():
    nearest = min(math.dist(_rgb(colour), _rgb(v)) for v in variants)
    assert nearest >= 50, (name, colour, nearest)


def test_variants_that_share_a_panel_have_their_own_markers():
  from resnorm_jax.analysis import lr_figures

  assert style.variant_marker("postnorm") == "o"
  assert style.variant_marker("a_new_variant") == style.variant_marker("a_new_variant")
  everyone = [os.path.basename(p)[: -len("_96L.py")] for p in glob.glob("configs/*_96L.py")]
  for family, members in lr_figures.family_rows(everyone):
    if family == "other variants":  # the rest, never a panel of its own in a committed figure
      continue
    markers = [style.variant_marker(v) for v in members]
    assert len(set(markers)) == len(markers), members
  # a later variant's marker and family are its named config's (no library module names it)
  assert style.variant_marker("mhc") == "v" and style.variant_marker("valueres") == "*"
  assert style.variant_family("hybridnorm") == "where the norm sits, what replaces it"
  # x (diverged) and _ (a seed mean) mean something else in every figure
  assert not {"x", "_", "|"} & set(style.VARIANT_MARKERS.values())


def test_a_seed_mean_pools_only_seeds_that_agree():
  assert style.seeds_agree([True, True]) and style.seeds_agree([False, False, False])
  assert style.seeds_agree([True])
  assert not style.seeds_agree([True, False])
