"""The figures of an lr sweep: capped final eval loss against lr (a panel per depth, a colour per
variant, every run a marker) and LR sensitivity and the boundary lr against depth; and
write_outputs, a sweep's tables and figures in one folder (scripts/lr_sensitivity.py).
The rows are lr_sweep_rows.py's, the sensitivity lr_sensitivity.py's. No JAX here.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.analysis.lr_sensitivity import MIN_LRS, TABLE_COLUMNS, lr_curve, sensitivity_table
from resnorm_jax.analysis.lr_sweep_rows import RESULT_COLUMNS, setting_title
from resnorm_jax.analysis.style import (
  BASELINE_STYLE,
  FINAL_BASELINE_LABEL,
  baseline_lines,
  lr_label,
  pyplot,
  save_figure,
  seeds_agree,
  variant_color,
  variant_family,
  variant_label,
  variant_marker,
  variant_order,
)
from resnorm_jax.files import csv_table
from resnorm_jax.runs import status
from resnorm_jax.runs.outcome import is_finite_number

# curves.png's rows: the three variants the depth claim is about, at every depth; then the
# others by family, each beside Pre-LN (the base most of them change), at the depths they were
# run. A variant in no family gets a row of its own family, "other variants". A family without
# a name is named by its variants.
FAMILIES = (
  ("", ("postnorm", "prenorm", "deepnorm")),  # named by those drawn
  ("where the norm sits, what replaces it", ("prenorm",)),
  ("what the residual stream carries", ("prenorm",)),
)  # a variant joins a family by its named config's FAMILY (style.variant_family)
# Variants that share a panel are shifted sideways by this factor of lr each, so that points at
# one lr and loss (every stuck run sits at the cap) do not hide each other; ticks are the lrs.
DODGE = 1.045
COLUMNS = 2  # panels a row: legible at a README's width
# The marks of a curve (draw_curve's kinds) and their legend entries, in this order.
MARK_LABELS = {
  "seed0": "seed 0 (the line joins its lrs)",
  "other": "other seeds (open)",
  "mean": "mean over seeds (all trained or all not)",
  "split": "seeds split trained / stuck: each seed, no mean (bar spans them)",
  status.DIVERGED: "diverged (drawn at the cap)",
}


def family_rows(variants: Sequence[str], families=FAMILIES) -> list[tuple[str, list[str]]]:
  """(family name, its variants in the palette's order) of each family with a variant in
  `variants`; the variants in no family as 'other variants' beside Pre-LN."""
  present = set(variants)
  out, placed = [], set()
  for name, members in families:
    joined = [v for v in sorted(present) if name and variant_family(v) == name]
    here = [v for v in (*members, *joined) if v in present]
    if any(v not in placed for v in here) and len(here) > (1 if "prenorm" in here else 0):
      here = variant_order(here)
      out.append((name or ", ".join(variant_label(v) for v in here), here))
      placed.update(here)
  rest = [v for v in variant_order(present) if v not in placed]
  if rest:
    out.append(("other variants", variant_order(rest + ["prenorm"] * ("prenorm" in present))))
  return out


def mark_handles(kinds: set[str]) -> list[Any]:
  """Legend entries of the marks plotted (`kinds`, draw_curve's), none for a mark not plotted."""
  plt = pyplot()
  grey = "0.35"
  look = {
    "seed0": {"marker": "o", "ms": 5},
    "other": {"marker": "o", "ms": 5, "mfc": "white", "ls": ""},
    "mean": {"marker": "_", "ms": 14, "mew": 2, "ls": ""},
    "split": {"marker": "|", "ms": 14, "mew": 1, "ls": ""},
    status.DIVERGED: {"marker": "x", "ls": ""},
  }
  return [
    plt.Line2D([], [], color=grey, label=label, **look[kind])
    for kind, label in MARK_LABELS.items()
    if kind in kinds
  ]


def draw_curves(rows: Sequence[Mapping[str, Any]], families=None):
  """The figure of `plot_curves` (matplotlib Figure, not saved): a panel per (family, depth),
  COLUMNS a row, each family's legend beside its first row; `families` as FAMILIES (default:
  one family of every variant). A family's depths are those of its own variants (Pre-LN, the
  reference of the later families, adds none)."""
  plt = pyplot()
  variants = variant_order(r["variant"] for r in rows)
  groups = family_rows(variants, families) if families else [("", variants)]
  grid = []  # rows of the figure: [(family index, depth), ...]
  owned: set[str] = set()
  for i, (_, members) in enumerate(groups):
    own = [v for v in members if v not in owned] or members
    owned.update(members)
    depths = sorted({int(r["num_layers"]) for r in rows if r["variant"] in own})
    grid += [[(i, d) for d in depths[k : k + COLUMNS]] for k in range(0, len(depths), COLUMNS)]
  grid = grid or [[]]
  cols = max(max(len(g) for g in grid), 1)
  fig = plt.figure(figsize=(4.4 * cols + 2.9, 3.3 * len(grid) + 1.0))
  spec = fig.add_gridspec(len(grid), cols)
  lrs = sorted({float(r["opt.lr"]) for r in rows})
  losses = [r["capped_loss"] for r in rows if r["capped_loss"] is not None]
  caps = [r["baseline"] for r in rows if is_finite_number(r["baseline"])]
  kinds: set[str] = set()
  first = None
  row_axes = []
  for y, line in enumerate(grid):
    row_axes.append([])
    for x, (i, depth) in enumerate(line):
      ax = fig.add_subplot(spec[y, x], sharey=first)
      first = first or ax
      row_axes[-1].append(ax)
      panel = [r for r in rows if int(r["num_layers"]) == depth]
      here = [v for v in groups[i][1] if any(r["variant"] == v for r in panel)]
      for k, variant in enumerate(here):
        curve = lr_curve([r for r in panel if r["variant"] == variant])
        shift = DODGE ** (k - (len(here) - 1) / 2)
        kinds |= draw_curve(
          ax, curve, variant_color(variant), variant_marker(variant), shift, variant_label(variant)
        )
      bases = {round(r["baseline"], 4) for r in panel if is_finite_number(r["baseline"])}
      for cap in sorted(bases):
        baseline_lines(ax, cap, margin=False)
      ax.set(xscale="log")
      ax.set_title(f"{depth} layers", fontsize=11)
      ax.set_xticks(lrs, [lr_label(lr) for lr in lrs], rotation=45, ha="right", fontsize=9)
      ax.minorticks_off()
      ax.grid(alpha=0.3)
      if x == 0:
        ax.set_ylabel("final eval loss, capped", fontsize=10)
      else:
        ax.tick_params(labelleft=False)
      if y == len(grid) - 1 or len(grid[y + 1]) <= x:
        ax.set_xlabel("peak lr (Adam)", fontsize=10)
  if losses and caps and first is not None:
    first.set_ylim(min(losses) - 0.08, max(caps) + 0.12)
  right = 1 - 2.9 / fig.get_figwidth()  # the legends' column
  fig.suptitle("Final eval loss against lr\n" + textwrap.fill(setting_title(rows), 90), fontsize=12)
  free = [y for y in range(1, len(grid)) if grid[y] and grid[y - 1]]
  free = [y for y in free if grid[y][0][0] == grid[y - 1][0][0]]
  fig.tight_layout(rect=(0, 0 if free else 0.8 / fig.get_figheight(), right, 1))
  free = []  # rows whose family's legend is already drawn: a place for the marks' key
  for y, line in enumerate(grid):
    if not row_axes[y]:
      continue
    top = row_axes[y][0].get_position()
    family = line[0][0]
    if y and grid[y - 1] and grid[y - 1][0][0] == family:
      free.append(top)
      continue
    name, members = groups[family]
    here = [v for v in members if any(r["variant"] == v for r in rows)]
    fig.legend(
      handles=[_variant_handle(v) for v in here],
      loc="upper left",
      bbox_to_anchor=(right + 0.01, top.y1),
      fontsize=10,
      title=textwrap.fill(name, 26) or None,
      title_fontsize=10,
      alignment="left",
    )
  key = [*mark_handles(kinds), plt.Line2D([], [], **BASELINE_STYLE, label=FINAL_BASELINE_LABEL)]
  key = [_wrapped(h, 30 if free else 60) for h in key]
  if free:  # beside a row whose family's legend is above it
    fig.legend(handles=key, loc="upper left", fontsize=9, bbox_to_anchor=(right + 0.01, free[0].y1),
               title="marks", title_fontsize=10, alignment="left")  # fmt: skip
  else:  # under the panels
    fig.legend(handles=key, loc="lower center", ncol=3, fontsize=9, frameon=False)
  return fig


def _wrapped(handle, width: int):
  handle.set_label(textwrap.fill(handle.get_label(), width))
  return handle


def _variant_handle(variant: str) -> Any:
  color, marker = variant_color(variant), variant_marker(variant)
  return pyplot().Line2D([], [], color=color, marker=marker, label=variant_label(variant))


def plot_curves(rows: Sequence[Mapping[str, Any]], out: str, families=None) -> str:
  """Capped final eval loss against lr, a panel per (family, depth), a colour and a marker per
  variant: every run a marker (seed 0 filled, others open, x for a diverged run), a line only
  through seed 0's runs (each vertex a run's loss), the seed mean a bar at each lr with several
  seeds that agree (all trained or all not; where they split, a thin bar spans them and no
  mean is drawn); the held-out no-context baseline dashed. Nothing is drawn between lrs but
  seed 0's line. Variants sharing a panel are shifted sideways a little (DODGE)."""
  return save_figure(draw_curves(rows, families), out, tight=False)


def draw_curve(
  ax,
  curve: Sequence[Mapping[str, Any]],
  color: str,
  marker: str = "o",
  shift: float = 1.0,
  label: str = "",
  ls: str = "-",
) -> set[str]:
  """One curve on one panel, each lr times `shift`: a marker per run, seed 0's runs joined
  (labelled `label`), the seed mean a bar where the seeds agree, a thin bar spanning them where
  they split. Returns the kinds of mark drawn (MARK_LABELS' keys)."""
  kinds: set[str] = set()
  seed0 = [
    (p["lr"] * shift, loss)
    for p in curve
    for loss, seed in zip(p["losses"], p["seeds"], strict=True)
    if seed == 0
  ]
  if len(seed0) > 1:
    ax.plot([x for x, _ in seed0], [y for _, y in seed0], ls, color=color, lw=1.4, label=label)
  for p in curve:
    x = p["lr"] * shift
    for loss, seed, diverged in zip(p["losses"], p["seeds"], p[status.DIVERGED], strict=True):
      if diverged:
        ax.plot(x, loss, "x", color=color, ms=7)
        kinds.add(status.DIVERGED)
      else:
        face = color if seed == 0 else "white"
        ax.plot(x, loss, marker, color=color, ms=5, mfc=face, ls="")
        kinds.add("seed0" if seed == 0 else "other")
    if len(p["losses"]) < 2:
      continue
    if seeds_agree(p.get(status.TRAINED, [True])):
      ax.plot(x, p["mean"], "_", color=color, ms=14, mew=2)
      kinds.add("mean")
    else:
      ax.plot([x, x], [min(p["losses"]), max(p["losses"])], "-", color=color, lw=0.8)
      kinds.add("split")
  return kinds


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
    left.plot(
      xs, [t["lr_sensitivity"] for t in pts], "-o", color=color, label=variant_label(variant)
    )
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
      label=variant_label(variant),
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


def write_outputs(
  rows: Sequence[Mapping[str, Any]], out_dir: str, grid: Sequence[float] = ()
) -> dict[str, str]:
  """results.csv, sensitivity.csv, curves.png and sensitivity.png of finished runs' rows
  (`grid`: the sweep's lrs, to note partial curves)."""
  table = sensitivity_table(rows, grid=grid)
  os.makedirs(out_dir, exist_ok=True)
  names = ("results.csv", "sensitivity.csv", "curves.png", "sensitivity.png")
  paths = {name: os.path.join(out_dir, name) for name in names}
  csv_table.write_csv(paths["results.csv"], rows, RESULT_COLUMNS, extrasaction="ignore")
  csv_table.write_csv(paths["sensitivity.csv"], table, TABLE_COLUMNS, extrasaction="ignore")
  plot_curves(rows, paths["curves.png"], FAMILIES)
  plot_sensitivity(table, paths["sensitivity.png"], f"LR sensitivity: {setting_title(rows)}")
  return paths
