"""Figures of runs and sweeps: loss curves of several runs, a depth x variant stability map,
and the stability boundary (largest peak lr that trained, against depth).
scripts/plot_curves.py is the command line. No JAX here.
"""

from __future__ import annotations

import csv
import glob
import json
import math
import os
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.train.escape import curve_path
from resnorm_jax.train.outcome import STUCK_MARGIN, is_finite_number
from resnorm_jax.train.writers import read_metrics

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


def expand_runs(patterns: Sequence[str]) -> list[str]:
  """Run folders (holding a curve file) matching the paths or globs, in the given order."""
  runs: list[str] = []
  for pattern in patterns:
    matches = sorted(glob.glob(os.path.expanduser(pattern))) or [pattern]
    for path in matches:
      if curve_path(path) and path not in runs:
        runs.append(path)
  return runs


def read_curves(run_dir: str) -> dict[str, Any]:
  """{'train': (steps, losses), 'eval': (steps, losses), 'unigram': float | None}.

  'unigram' is the no-context baseline the verdict uses (held-out unigram cross-entropy),
  or the train split's unigram entropy for runs that predate it.
  """
  records = read_metrics(curve_path(run_dir) or os.path.join(run_dir, "metrics.jsonl"))
  curves: dict[str, Any] = {}
  for key, name in (("train/loss", "train"), ("eval/loss", "eval")):
    points = [(r["step"], r[key]) for r in records if key in r]
    curves[name] = ([s for s, _ in points], [v for _, v in points])
  try:
    with open(os.path.join(run_dir, "summary.json")) as f:
      summary = json.load(f)
    curves["unigram"] = summary.get("heldout_unigram_entropy") or summary.get("unigram_entropy")
  except (OSError, json.JSONDecodeError):
    curves["unigram"] = None
  return curves


def pyplot():
  """matplotlib.pyplot on the Agg backend (files only, no display)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def plot_curves(run_dirs: Sequence[str], out: str, title: str = "") -> str:
  """Train (solid) and eval (dots) loss of every run, its no-context baseline dashed."""
  plt = pyplot()
  fig, ax = plt.subplots(figsize=(9, 5.5))
  for run in run_dirs:
    c = read_curves(run)
    label = os.path.basename(os.path.normpath(run))
    few = len(c["train"][0]) < 3  # a line of one point is invisible
    (line,) = ax.plot(*c["train"], lw=1.2, marker="." if few else None, label=label)
    color = line.get_color()
    ax.plot(*c["eval"], "o", ms=3, color=color)
    if c["unigram"] is not None:
      ax.axhline(c["unigram"], ls="--", lw=0.8, color=color)
  ax.set(xlabel="step", ylabel="loss (nats/token)", title=title or "solid train, dots eval")
  ax.plot([], [], "k--", lw=0.8, label="no-context baseline (unigram)")
  ax.legend(fontsize="small")
  return save_figure(fig, out)


def read_results(path: str) -> list[dict[str, str]]:
  """Rows of a sweep's results.csv; ValueError without the columns a map needs."""
  with open(path, newline="") as f:
    rows = list(csv.DictReader(f))
  rows = [{**r, "outcome": r.get("outcome", r.get("status"))} for r in rows]  # old: status
  missing = {"variant", "num_layers", "outcome", "final_eval_loss"} - set(rows[0] if rows else {})
  if not rows or missing:
    raise ValueError(f"{path}: no rows or missing columns {sorted(missing)}")
  return rows


def stability_cells(rows: Sequence[dict[str, str]]):
  """(variants, depths, {(variant, depth): (status, text)}): most common status per cell,
  text the mean final eval loss (with the number of runs when several)."""
  variants = list(dict.fromkeys(r["variant"] for r in rows))
  depths = sorted({int(r["num_layers"]) for r in rows if r["num_layers"]})
  groups: dict[tuple[str, int], list[dict[str, str]]] = {}
  for r in rows:
    if r["num_layers"]:
      groups.setdefault((r["variant"], int(r["num_layers"])), []).append(r)
  cells = {}
  for key, members in groups.items():
    statuses = [m["outcome"] for m in members]
    status = max(dict.fromkeys(statuses), key=statuses.count)
    losses = [float(m["final_eval_loss"]) for m in members if m["final_eval_loss"]]
    losses = [x for x in losses if math.isfinite(x)]
    text = f"{sum(losses) / len(losses):.2f}" if losses else status
    cells[key] = (status, text + (f"\n(n={len(members)})" if len(members) > 1 else ""))
  return variants, depths, cells


def plot_stability_map(rows: Sequence[dict[str, str]], out: str, title: str = "") -> str:
  """A variant x depth grid colored by status, annotated with the final eval loss."""
  from matplotlib.patches import Patch

  plt = pyplot()
  variants, depths, cells = stability_cells(rows)
  fig, ax = plt.subplots(figsize=(1.6 * len(depths) + 3, 0.45 * len(variants) + 1.6))
  for i, v in enumerate(variants):
    for j, d in enumerate(depths):
      status, text = cells.get((v, d), ("pending", ""))
      ax.add_patch(plt.Rectangle((j, i), 1, 1, color=STATUS_COLORS.get(status, "#ffffff")))
      ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=8)
  ax.set(xlim=(0, len(depths)), ylim=(len(variants), 0), xlabel="layers N")
  ax.set_xticks([j + 0.5 for j in range(len(depths))], [str(d) for d in depths])
  ax.set_yticks([i + 0.5 for i in range(len(variants))], variants)
  ax.set_title(title or "final eval loss by variant and depth")
  used = [s for s in STATUS_COLORS if any(c[0] == s for c in cells.values())]
  handles = [Patch(color=STATUS_COLORS[s], label=s) for s in used]
  ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
  return save_figure(fig, out)


def save_figure(fig, out: str, tight: bool = True) -> str:
  """Writes `fig` to `out` (its folder created; laid out tight unless already), closes it;
  returns `out`."""
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  if tight:
    fig.tight_layout()
  fig.savefig(out, dpi=120)
  pyplot().close(fig)
  return out


VERDICTS = ("trained", "stuck", "diverged")


def boundary_points(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
  """The rows a boundary counts: runs with a verdict (trained, stuck, diverged) and an lr;
  pending, interrupted and failed points are left out."""
  return [r for r in rows if r.get("opt.lr") and r.get("num_layers") and r["outcome"] in VERDICTS]


def write_rows(rows: Sequence[dict[str, str]], path: str) -> str:
  """`rows` as one csv, the union of their columns in first-seen order; a symlink at `path`
  is replaced by the file, never written through."""
  columns = list(dict.fromkeys(k for r in rows for k in r))
  if os.path.islink(path):
    os.remove(path)
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=columns or ["variant"], restval="")
    writer.writeheader()
    writer.writerows(rows)
  return path


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


# Configs named for an experiment rather than a variant, drawn in their variant's colour.
VARIANT_ALIASES = {"xiong_rescue": "postnorm"}
VARIANT_LABELS = {"postnorm": "Post-LN", "prenorm": "Pre-LN", "deepnorm": "DeepNorm"}
SEED_STYLES = ("-", "--", ":", "-.")  # seed 0, 1, 2, 3 (then again)
_SEED_SUFFIX = re.compile(r"-s(?:eed)?\d+$")


def corpus_name(data: Mapping[str, Any] | None) -> str:
  """A short name of a run's corpus from its config's data block (for titles)."""
  data = data or {}
  if data.get("source", "stdlib") != "text":
    return str(data.get("source") or "stdlib")
  path = str(data.get("path", ""))
  if "tinyshakespeare" in path:
    return "tiny Shakespeare"
  if "vim" in path:
    return "Vim help"
  parts = [p for p in path.split("/") if p and not any(ch in p for ch in "*?[")]
  return parts[-1] if parts else path


def run_record(run_dir: str) -> dict[str, Any]:
  """A run folder as the per-seed figures need it: variant (its colour's), depth, seed, corpus,
  lr, warmup, budget (steps), outcome, escape_step, baseline, the train curve, the periodic
  eval curve and the end-of-run eval (`final`: (step, loss), the summary's final_eval_loss at
  its last step). Older loops logged the end-of-run eval as the last `eval/loss`: that point
  is the final eval, not a periodic one, and is left out of `eval`."""
  from resnorm_jax.tools.sweep_results import run_row

  row = run_row(run_dir)
  config, curves = row["_config"], read_curves(run_dir)
  steps, final_loss = row["steps"], row["final_eval_loss"]
  eval_steps, eval_losses = curves["eval"]
  if not steps:
    steps = max([*eval_steps, *curves["train"][0]], default=0)
  periodic = [
    (s, x)
    for s, x in zip(eval_steps, eval_losses, strict=True)
    if not (s == steps and final_loss is not None and abs(x - final_loss) < 1e-6)
  ]
  opt = config.get("opt", {})
  return {
    "name": row["name"],
    "variant": VARIANT_ALIASES.get(row["variant"], row["variant"]),
    "num_layers": row["num_layers"],
    "seed": row["seed"] if row["seed"] is not None else 0,
    "corpus": corpus_name(config.get("data")),
    "lr": opt.get("lr"),
    "warmup": opt.get("warmup_steps") or 0,
    "steps": steps,
    "outcome": row["outcome"],
    "escape_step": row.get("escape_step"),
    "baseline": row["baseline"] if row["baseline"] is not None else curves["unigram"],
    "train": curves["train"],
    "eval": ([s for s, _ in periodic], [x for _, x in periodic]),
    "final": (steps, final_loss) if is_finite_number(final_loss) else None,
  }


def _seeds_text(seeds: Sequence[int]) -> str:
  seeds = sorted(set(seeds))
  return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(map(str, seeds))


def _label(variant: str) -> str:
  return VARIANT_LABELS.get(variant, variant)


def _baseline_lines(ax, baseline: float | None) -> None:
  """The no-context loss (dashed) and the trained/escape threshold 0.1 below it (dotted)."""
  if baseline is None:
    return
  ax.axhline(baseline, ls="--", lw=1, color="0.25")
  ax.axhline(baseline - STUCK_MARGIN, ls=":", lw=1, color="0.45")


def _baseline_handles() -> list[Any]:
  from matplotlib.lines import Line2D

  return [
    Line2D([], [], ls="--", lw=1, color="0.25", label="no-context loss (held-out unigram)"),
    Line2D(
      [],
      [],
      ls=":",
      lw=1,
      color="0.45",
      label=f"{STUCK_MARGIN:g} nats below it (trained / escaped under it)",
    ),
  ]


def _panels(records: Sequence[dict[str, Any]], by: str) -> dict[Any, list[dict[str, Any]]]:
  """Records grouped into panels: by corpus, by depth, or by (corpus, depth)."""
  keys = {
    "corpus": lambda r: r["corpus"],
    "layers": lambda r: r["num_layers"],
    "corpus_layers": lambda r: (r["corpus"], r["num_layers"]),
  }
  if by not in keys:
    raise ValueError(f"panels={by!r}: one of {sorted(keys)}")
  out: dict[Any, list[dict[str, Any]]] = {}
  for r in records:
    out.setdefault(keys[by](r), []).append(r)
  return out


def _subplots(n: int, cols: int | None = None):
  """A figure of n panels sharing y, `cols` (default up to 3) a row; y labelled on the left."""
  plt = pyplot()
  cols = cols or min(n, 3)
  rows = -(-n // cols)
  fig, axes = plt.subplots(
    rows, cols, figsize=(5.2 * cols, 4.2 * rows + 0.8), sharey=True, squeeze=False
  )
  for ax in axes.flat[n:]:
    ax.set_visible(False)
  for ax in axes[:, 0]:
    ax.set_ylabel("eval loss (nats/byte)")
  return fig, list(axes.flat[:n])


def _arm_label(group: Sequence[dict[str, Any]]) -> str:
  """'Post-LN, lr 0.001, 1,000 warmup steps: escaped at step 500 on 3 of 3 seeds'."""
  r = group[0]
  warm = f"{r['warmup']:,} warmup steps" if r["warmup"] else "no warmup"
  escaped = sorted({g["escape_step"] for g in group if g["escape_step"] is not None})
  n = sum(g["escape_step"] is not None for g in group)
  if not n:
    fate = f"never escaped in {r['steps']:,} steps ({_seeds_text([g['seed'] for g in group])})"
  else:
    at = "/".join(f"{s:,}" for s in escaped)
    fate = f"escaped at step {at} on {n} of {len(group)} seeds"
  return f"{_label(r['variant'])}, lr {r['lr']:g}, {warm}: {fate}"


def plot_seed_bands(run_dirs: Sequence[str], out: str, title: str = "", panels="corpus") -> str:
  """One panel per corpus (or depth); in each, the runs that differ only in their seed (the
  run folder's name without its -s<seed> suffix) drawn as one arm: the periodic eval loss's
  mean over seeds (line) and its min-max (band), every seed's end-of-run eval (diamonds at
  the last step), the no-context loss (dashed) and 0.1 below it (dotted). One colour per
  variant; arms of one variant told apart by line style."""
  records = [run_record(r) for r in run_dirs]
  groups = _panels(records, panels)
  fig, axes = _subplots(len(groups), cols=len(groups) if len(groups) <= 3 else 2)
  for ax, members in zip(axes, groups.values(), strict=True):
    arms: dict[str, list[dict[str, Any]]] = {}
    for r in members:
      arms.setdefault(_SEED_SUFFIX.sub("", r["name"]), []).append(r)
    styles: dict[str, int] = {}
    for arm in arms.values():
      color = variant_color(arm[0]["variant"])
      style = SEED_STYLES[styles.setdefault(arm[0]["variant"], 0) % len(SEED_STYLES)]
      styles[arm[0]["variant"]] += 1
      steps = sorted(set.intersection(*(set(r["eval"][0]) for r in arm)))
      by_step = [[dict(zip(*r["eval"], strict=True))[s] for r in arm] for s in steps]
      mean = [sum(v) / len(v) for v in by_step]
      ax.fill_between(
        steps, [min(v) for v in by_step], [max(v) for v in by_step], color=color, alpha=0.2, lw=0
      )
      ax.plot(steps, mean, style, marker="o", ms=4, lw=1.6, color=color, label=_arm_label(arm))
      finals = [r["final"] for r in arm if r["final"]]
      ax.plot(
        [s for s, _ in finals], [x for _, x in finals], "D", ms=5, color=color, mfc="white", mew=1.3
      )
    _baseline_lines(ax, members[0]["baseline"])
    r = members[0]
    ax.set_title(
      f"{r['corpus']}: {r['num_layers']} layers, {r['steps']:,} steps, "
      f"{_seeds_text([m['seed'] for m in members])}",
      fontsize="medium",
    )
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="center right")
  from matplotlib.lines import Line2D

  final = Line2D(
    [],
    [],
    ls="",
    marker="D",
    mfc="white",
    color="0.3",
    label="end-of-run eval (16k tokens), one per seed",
  )
  band = Line2D(
    [], [], color="0.3", marker="o", label="periodic eval: mean, band min-max over seeds"
  )
  fig.legend(
    handles=[band, final, *_baseline_handles()],
    loc="lower center",
    ncol=2,
    fontsize="small",
    frameon=False,
  )
  fig.suptitle(title or "eval loss over seeds", fontsize="large")
  fig.tight_layout(rect=(0, 0.1, 1, 1))
  return save_figure(fig, out, tight=False)


def _panel_title(members: Sequence[dict[str, Any]]) -> str:
  """'stdlib, 18 layers: Post-LN seeds 0, 1, 2; Pre-LN seed 0; ...'."""
  r = members[0]
  seeds: dict[str, list[int]] = {}
  for m in members:
    seeds.setdefault(m["variant"], []).append(m["seed"])
  per = "; ".join(f"{_label(v)} {_seeds_text(s)}" for v, s in seeds.items())
  return f"{r['corpus']}, {r['num_layers']} layers\n{per}"


def plot_seed_lines(
  run_dirs: Sequence[str], out: str, title: str = "", panels="corpus_layers"
) -> str:
  """One panel per (corpus, depth); in each, every run's periodic eval loss as its own line
  (its variant's colour, its seed's line style) and its end-of-run eval as a star at its last
  step, with the no-context loss (dashed) and 0.1 below it (dotted)."""
  from matplotlib.lines import Line2D

  records = [run_record(r) for r in run_dirs]
  groups = _panels(records, panels)
  fig, axes = _subplots(len(groups), cols=2 if len(groups) == 4 else None)
  variants: list[str] = []
  seeds: set[int] = set()
  for ax, members in zip(axes, groups.values(), strict=True):
    for r in members:
      color, style = variant_color(r["variant"]), SEED_STYLES[r["seed"] % len(SEED_STYLES)]
      variants += [r["variant"]] if r["variant"] not in variants else []
      seeds.add(r["seed"])
      ax.plot(*r["eval"], style, marker="o", ms=3, lw=1.4, color=color)
      if r["final"]:
        ax.plot(*r["final"], "*", ms=11, color=color, mec="black", mew=0.5)
    _baseline_lines(ax, members[0]["baseline"])
    ax.set_title(_panel_title(members), fontsize="medium")
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
  handles = [Line2D([], [], color=variant_color(v), lw=2, label=_label(v)) for v in variants]
  handles += [
    Line2D([], [], ls=SEED_STYLES[s % len(SEED_STYLES)], color="0.3", label=f"seed {s}")
    for s in sorted(seeds)
  ]
  handles += [
    Line2D([], [], ls="", marker="o", ms=3, color="0.3", label="periodic eval"),
    Line2D([], [], ls="", marker="*", ms=11, color="0.3", label="end-of-run eval (16k tokens)"),
    *_baseline_handles(),
  ]
  fig.legend(handles=handles, loc="lower center", ncol=5, fontsize="small", frameon=False)
  fig.suptitle(title or "eval loss, every seed", fontsize="large")
  fig.tight_layout(rect=(0, 0.07, 1, 1))
  return save_figure(fig, out, tight=False)
