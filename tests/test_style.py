"""The one palette and style of every figure (resnorm_jax/tools/style.py)."""

from resnorm_jax.tools import style
from resnorm_jax.train.outcome import STUCK_MARGIN


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
