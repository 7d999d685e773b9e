"""The stability boundary of a sweep: per variant, depth and warmup the largest peak lr that
trained, as a table (boundary.csv, boundary.md), and every depth x lr cell as a figure.
scripts/plot_curves.py --boundary is the command line. No JAX here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from resnorm_jax.analysis.style import (
  SPLIT_COLOR,
  STATUS_COLORS,
  lr_label,
  pyplot,
  save_figure,
  text_color,
  variant_color,
)
from resnorm_jax.runs import status
from resnorm_jax.runs.sweep_results import write_rows

VERDICTS = (status.TRAINED, status.STUCK, status.DIVERGED)


def boundary_points(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
  """The rows a boundary counts: runs with a verdict (trained, stuck, diverged) and an lr;
  pending, interrupted and failed points are left out."""
  return [r for r in rows if r.get("opt.lr") and r.get("num_layers") and r["outcome"] in VERDICTS]


def _warmup(row: dict[str, str]) -> int:
  return int(float(row.get("opt.warmup_steps") or 0))


def boundary_table(rows: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
  """Per (variant, depth, warmup): the largest lr that trained, the lrs tried, and the
  smallest lr above it that did not train (None when every lr tried above it trained).

  Rows may hold several seeds of a point (results.csv files concatenated): an lr trains when
  most of its runs trained, and `split_seeds` names the lrs where they disagree."""
  groups: dict[tuple[str, int, int], list[dict[str, str]]] = {}
  for r in boundary_points(rows):
    groups.setdefault((r["variant"], int(r["num_layers"]), _warmup(r)), []).append(r)
  table = []
  for (variant, depth, warmup), members in sorted(groups.items()):
    by_lr: dict[float, list[str]] = {}
    for m in members:
      by_lr.setdefault(float(m["opt.lr"]), []).append(m["outcome"])
    # An lr "trains" when most of its runs (seeds) trained.
    ok = {lr: outs.count(status.TRAINED) * 2 > len(outs) for lr, outs in by_lr.items()}
    trained = [lr for lr, good in ok.items() if good]
    best = max(trained) if trained else None
    above = [lr for lr, good in ok.items() if not good and (best is None or lr > best)]
    below = [lr for lr, good in ok.items() if not good and best is not None and lr < best]
    table.append(
      {
        "variant": variant,
        "num_layers": depth,
        "opt.warmup_steps": warmup,
        "max_trained_lr": best,
        "first_failing_lr_above": min(above) if above else None,
        # False: every lr tried at or above max_trained_lr trained, so the boundary lies higher
        "bounded": bool(above),
        # lrs under max_trained_lr that did not train (too slow for the budget, e.g. nGPT)
        "failed_below": " ".join(f"{lr:g}" for lr in sorted(below)),
        "lrs_tried": " ".join(f"{lr:g}" for lr in sorted(by_lr)),
        "outcomes": " ".join(f"{lr:g}:{'/'.join(by_lr[lr])}" for lr in sorted(by_lr)),
        # lrs whose seeds disagree: the cell's verdict there is a majority, not unanimous
        "split_seeds": " ".join(
          f"{lr:g} ({outs.count(status.TRAINED)} of {len(outs)} trained)"
          for lr, outs in sorted(by_lr.items())
          if 0 < outs.count(status.TRAINED) < len(outs)
        ),
      }
    )
  return table


def boundary_markdown(table: Sequence[dict[str, Any]]) -> str:
  """boundary_table as a markdown table: a row per variant (and warmup), a column per depth."""
  depths = sorted({t["num_layers"] for t in table})
  rows: dict[tuple[str, int], dict[int, str]] = {}
  for t in table:
    if t["max_trained_lr"] is None:
      cell = f"none (tried {t['lrs_tried']})"
    elif t["bounded"]:
      cell = f"**{t['max_trained_lr']:g}** ({t['first_failing_lr_above']:g} fails)"
    elif t.get("failed_below"):  # the top lr trained, some lower ones did not (too slow)
      cell = f">= {t['max_trained_lr']:g} (the largest lr tried; {t['failed_below']} did not train)"
    else:
      cell = f">= {t['max_trained_lr']:g} (every lr tried trained)"
    if t.get("split_seeds"):
      cell += f"; seeds split at {t['split_seeds']}"
    rows.setdefault((t["variant"], t["opt.warmup_steps"]), {})[t["num_layers"]] = cell
  lines = [
    "| largest lr that trained | " + " | ".join(f"{d} layers" for d in depths) + " |",
    "| --- |" + " --- |" * len(depths),
  ]
  for (variant, warmup), cells in rows.items():
    name = variant + (f" (warmup {warmup})" if warmup else "")
    lines.append(f"| {name} | " + " | ".join(cells.get(d, "-") for d in depths) + " |")
  return "\n".join(lines) + "\n"


# A cell of the boundary figure: every seed left the plateau, some did, none did (status greys,
# which no variant uses: the panel titles are in the variants' colours).
CELL_COLORS = {
  "all": STATUS_COLORS[status.TRAINED],
  "some": SPLIT_COLOR,
  "none": STATUS_COLORS[status.STUCK],
}


def boundary_cells(rows: Sequence[dict[str, str]]) -> dict[tuple[str, int], dict]:
  """Per (variant, warmup) panel, per (depth, lr) cell: the runs' count, how many trained
  and their mean final eval loss (None when no loss is finite)."""
  panels: dict[tuple[str, int], dict] = {}
  for r in boundary_points(rows):
    cell = panels.setdefault((r["variant"], _warmup(r)), {}).setdefault(
      (int(r["num_layers"]), float(r["opt.lr"])), {"runs": 0, status.TRAINED: 0, "losses": []}
    )
    cell["runs"] += 1
    cell[status.TRAINED] += r["outcome"] == status.TRAINED
    loss = float(r["final_eval_loss"]) if r.get("final_eval_loss") else math.nan
    if math.isfinite(loss):
      cell["losses"].append(loss)
  for cells in panels.values():
    for cell in cells.values():
      losses = cell.pop("losses")
      cell["loss"] = sum(losses) / len(losses) if losses else None
  return panels


def budget_words(rows: Sequence[dict[str, str]]) -> str:
  """'300 steps' (the counted runs' budget: train.steps, else the steps run), '200-300
  steps' when they differ, '' when unknown."""
  budgets = (r.get("train.steps") or r.get("steps") for r in boundary_points(rows))
  steps = sorted({int(float(b)) for b in budgets if b})
  if not steps:
    return ""
  return f"{steps[0]:,} steps" if len(steps) == 1 else f"{steps[0]:,}-{steps[-1]:,} steps"


def plot_boundary(
  rows: Sequence[dict[str, str]], out: str, title: str = "", points: str | None = None
) -> str:
  """boundary.csv and boundary.md (the largest lr that trained per variant and depth) beside
  `out`, at `points` (a csv path) every run the table counts, all seeds in one file, and at
  `out` the figure: a panel per variant (and warmup), a cell per depth and lr coloured by
  how many of its seeds left the plateau within the budget (all, some, none; blank: not run),
  annotated with the mean final eval loss and, with several seeds, the count that trained."""
  table = boundary_table(rows)
  folder = os.path.dirname(os.path.abspath(out))
  os.makedirs(folder, exist_ok=True)
  if points:
    write_rows(boundary_points(rows), points)
  write_rows(table, os.path.join(folder, "boundary.csv"))
  with open(os.path.join(folder, "boundary.md"), "w") as f:
    f.write(boundary_markdown(table))
  from matplotlib.patches import Patch

  plt = pyplot()
  panels = boundary_cells(rows)
  depths = sorted({d for cells in panels.values() for d, _ in cells})
  lrs = sorted({lr for cells in panels.values() for _, lr in cells})
  cols = min(max(len(panels), 1), 4)
  nrows = max(-(-len(panels) // cols), 1)
  fig, axes = plt.subplots(
    nrows,
    cols,
    figsize=(0.62 * len(depths) * cols + 1.4 * cols + 1, 0.3 * len(lrs) * nrows + 1.2 * nrows + 1),
    squeeze=False,
  )
  flat = [ax for row in axes for ax in row]
  for ax in flat[len(panels) :]:
    ax.set_visible(False)
  for ax, ((variant, warmup), cells) in zip(flat, sorted(panels.items()), strict=False):
    for (depth, lr), cell in cells.items():
      j, i = depths.index(depth), lrs.index(lr)
      share = (
        "all"
        if cell[status.TRAINED] == cell["runs"]
        else "some"
        if cell[status.TRAINED]
        else "none"
      )
      ax.add_patch(plt.Rectangle((j, i), 1, 1, color=CELL_COLORS[share], ec="white"))
      text = f"{cell['loss']:.2f}" if cell["loss"] is not None else "nan"
      if cell["runs"] > 1:
        text += f"\n{cell[status.TRAINED]}/{cell['runs']}"
      ink = text_color(CELL_COLORS[share])
      ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5, color=ink)
    ax.set(xlim=(0, len(depths)), ylim=(0, len(lrs)))
    ax.set_xticks([j + 0.5 for j in range(len(depths))], [str(d) for d in depths], fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(len(lrs))], [lr_label(lr) for lr in lrs], fontsize=7)
    ax.tick_params(length=0)
    name = variant + (f", warmup {warmup}" if warmup else "")
    ax.set_title(name, fontsize="medium", color=variant_color(variant))
  for ax in axes[:, 0]:
    ax.set_ylabel("peak lr (Adam)")
  for ax in axes[-1]:
    ax.set_xlabel("layers N")
  budget = budget_words(rows)
  handles = [
    Patch(color=CELL_COLORS["all"], label="every seed left the plateau"),
    Patch(color=CELL_COLORS["some"], label="some seeds did (count trained/run)"),
    Patch(color=CELL_COLORS["none"], label="no seed did (on it, or still above it, at the end)"),
  ]
  fig.legend(handles=handles, loc="lower center", ncol=3, fontsize="small", frameon=False)
  fig.suptitle(
    title
    or "Left the no-context plateau within "
    + (budget or "the budget")
    + "? Mean final eval loss per cell; blank: not run",
    fontsize="medium",
  )
  fig.tight_layout(rect=(0, 0.04, 1, 0.97))
  return save_figure(fig, out, tight=False)
