"""The stability boundary of a sweep: per variant, depth and warmup the largest peak lr that
trained, as a table (boundary.csv, boundary.md) and a figure of lr against depth.
scripts/plot_curves.py --boundary is the command line. No JAX here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from resnorm_jax.tools.style import pyplot, variant_color
from resnorm_jax.tools.sweep_results import write_rows

VERDICTS = ("trained", "stuck", "diverged")


def boundary_points(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
  """The rows a boundary counts: runs with a verdict (trained, stuck, diverged) and an lr;
  pending, interrupted and failed points are left out."""
  return [r for r in rows if r.get("opt.lr") and r.get("num_layers") and r["outcome"] in VERDICTS]


def boundary_table(rows: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
  """Per (variant, depth, warmup): the largest lr that trained, the lrs tried, and the
  smallest lr above it that did not train (None when every lr tried above it trained).

  Rows may hold several seeds of a point (results.csv files concatenated): an lr trains when
  most of its runs trained, and `split_seeds` names the lrs where they disagree."""
  groups: dict[tuple[str, int, int], list[dict[str, str]]] = {}
  for r in boundary_points(rows):
    warmup = int(float(r.get("opt.warmup_steps") or 0))
    groups.setdefault((r["variant"], int(r["num_layers"]), warmup), []).append(r)
  table = []
  for (variant, depth, warmup), members in sorted(groups.items()):
    by_lr: dict[float, list[str]] = {}
    for m in members:
      by_lr.setdefault(float(m["opt.lr"]), []).append(m["outcome"])
    # An lr "trains" when most of its runs (seeds) trained.
    ok = {lr: outs.count("trained") * 2 > len(outs) for lr, outs in by_lr.items()}
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
          f"{lr:g} ({outs.count('trained')} of {len(outs)} trained)"
          for lr, outs in sorted(by_lr.items())
          if 0 < outs.count("trained") < len(outs)
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


def plot_boundary(
  rows: Sequence[dict[str, str]], out: str, title: str = "", points: str | None = None
) -> str:
  """Max trained lr vs depth, one line per variant (and warmup setting); boundary.csv and
  boundary.md (the same as a markdown table) beside it, and at `points` (a csv path) every
  run the table counts, all seeds in one file."""
  plt = pyplot()
  table = boundary_table(rows)
  folder = os.path.dirname(os.path.abspath(out))
  os.makedirs(folder, exist_ok=True)
  if points:
    write_rows(boundary_points(rows), points)
  write_rows(table, os.path.join(folder, "boundary.csv"))
  with open(os.path.join(folder, "boundary.md"), "w") as f:
    f.write(boundary_markdown(table))
  fig, ax = plt.subplots(figsize=(8.5, 4.8))
  lines: dict[tuple[str, int], list[dict[str, Any]]] = {}
  for t in table:
    lines.setdefault((t["variant"], t["opt.warmup_steps"]), []).append(t)
  variants = list(dict.fromkeys(variant for variant, _ in lines))
  lrs = sorted({float(x) for t in table for x in t["lrs_tried"].split()})
  floor = min(lrs) / 2 if lrs else 1e-5
  for (variant, warmup), pts in lines.items():
    color = variant_color(variant)
    xs = [p["num_layers"] for p in pts]
    # Many variants train at every lr tried (">= the top lr"): those points would hide each
    # other, so each variant's is nudged up by 4% steps. A boundary (a dot) is drawn exactly.
    nudge = 1.04 ** variants.index(variant)
    ys = [
      floor if not p["max_trained_lr"] else p["max_trained_lr"] * (1 if p["bounded"] else nudge)
      for p in pts
    ]
    label = variant + (f" (warmup {warmup})" if warmup else "")
    ax.plot(xs, ys, "-" if not warmup else "--", color=color, label=label)
    for p, y in zip(pts, ys, strict=True):  # a filled dot: the boundary; an arrow: >= this lr
      ax.plot(
        p["num_layers"],
        y,
        "o" if p["bounded"] else "^",
        color=color,
        mfc=color if p["bounded"] else "white",
      )
  ax.axhline(floor, color="0.7", lw=0.8)
  ax.text(
    ax.get_xlim()[0] if lines else 1,
    floor,
    " nothing trained",
    va="bottom",
    fontsize="small",
    color="0.5",
  )
  ax.set(xscale="log", yscale="log", xlabel="layers N", ylabel="largest peak lr that trained")
  depths = sorted({t["num_layers"] for t in table})
  ax.set_xticks(depths, [str(d) for d in depths])
  ax.minorticks_off()
  ax.set_yticks(lrs, [f"{lr:g}" for lr in lrs])
  ax.set_title(title or "stability boundary (Adam, constant lr; ^: trained at every lr tried)")
  ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the lines
  fig.tight_layout()
  fig.savefig(out, dpi=120)
  plt.close(fig)
  return out
