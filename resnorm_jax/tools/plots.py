"""Figures of runs and sweeps: loss curves of several runs, a depth x variant stability map,
and the per-seed figures (seed bands and seed lines). The palette and style are style.py's,
the stability boundary boundary.py's.
scripts/plot_curves.py is the command line. No JAX here.
"""

from __future__ import annotations

import csv
import glob
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.data.fs import read_json
from resnorm_jax.tools.style import (
  CURVE_BASELINE_LABEL,
  SEED_STYLES,
  STATUS_COLORS,
  STATUS_HATCHES,
  baseline_handles,
  baseline_lines,
  final_baseline_handle,
  final_baseline_mark,
  lr_label,
  pyplot,
  save_figure,
  text_color,
  variant_color,
  variant_label,
)
from resnorm_jax.train.escape import curve_path, run_fields
from resnorm_jax.train.metrics_file import read_metrics
from resnorm_jax.train.outcome import EVAL_SET_BASELINE, curve_baseline, is_finite_number


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

  'unigram' is the plateau of the periodic eval curve, the no-context loss its escape is judged
  against (`eval_baseline`).
  """
  records = read_metrics(curve_path(run_dir) or os.path.join(run_dir, "metrics.jsonl"))
  curves: dict[str, Any] = {}
  for key, name in (("train/loss", "train"), ("eval/loss", "eval")):
    points = [(r["step"], r[key]) for r in records if key in r]
    curves[name] = ([s for s, _ in points], [v for _, v in points])
  curves["unigram"] = eval_baseline(run_dir)
  return curves


def eval_baseline(run_dir: str) -> float | None:
  """The no-context loss a run's periodic eval curve is drawn against: the one its escape step
  is judged against (outcome.curve_baseline: the periodic eval's own tokens', e.g. 3.299 on
  stdlib, not the whole held-out split's 3.238; the split's for runs that predate it)."""
  summary = read_json(os.path.join(run_dir, "summary.json"))
  return curve_baseline(summary) if isinstance(summary, dict) else None


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


# What a run's curve baseline is, by the summary key it came from (outcome.curve_baseline's
# order): its periodic eval set's own no-context loss, else the held-out split's, else (runs
# older still) the train split's unigram entropy.
BASELINE_KINDS = {
  EVAL_SET_BASELINE: "the periodic eval's tokens'",
  "heldout_unigram_entropy": "the held-out split's",
  "unigram_entropy": "the train split's unigram entropy",
}


def baseline_kind(run_dir: str) -> str | None:
  """Which no-context loss `eval_baseline` is for this run (a BASELINE_KINDS key)."""
  summary = read_json(os.path.join(run_dir, "summary.json")) or {}
  return next((k for k in BASELINE_KINDS if is_finite_number(summary.get(k))), None)


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
      face = STATUS_COLORS.get(status, "#ffffff")
      hatch = STATUS_HATCHES.get(status)
      ax.add_patch(plt.Rectangle((j, i), 1, 1, fc=face, ec="white", hatch=hatch))
      ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=8, color=text_color(face))
  ax.set(xlim=(0, len(depths)), ylim=(len(variants), 0), xlabel="layers N")
  ax.set_xticks([j + 0.5 for j in range(len(depths))], [str(d) for d in depths])
  ax.set_yticks([i + 0.5 for i in range(len(variants))], variants)
  ax.set_title(title or "final eval loss by variant and depth")
  used = [s for s in STATUS_COLORS if any(c[0] == s for c in cells.values())]
  handles = [
    Patch(fc=STATUS_COLORS[s], ec="0.6", hatch=STATUS_HATCHES.get(s), label=s) for s in used
  ]
  ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
  return save_figure(fig, out)


# Configs named for an experiment rather than a variant, drawn in their variant's colour.
VARIANT_ALIASES = {"xiong_rescue": "postnorm"}
_SEED_SUFFIX = re.compile(r"-s(?:eed)?\d+$")


# The text corpora the docs name, by a part of their path (docs/xiong_rescue/unseen/corpora.csv).
CORPUS_NAMES = {
  "tinyshakespeare": "tiny Shakespeare",
  "vim": "Vim help",
  "nodejs": "Node.js API docs",
  "perl": "Perl pod",
}


def corpus_name(data: Mapping[str, Any] | None) -> str:
  """A short name of a run's corpus from its config's data block (for titles)."""
  data = data or {}
  if data.get("source", "stdlib") != "text":
    return str(data.get("source") or "stdlib")
  path = str(data.get("path", ""))
  for key, name in CORPUS_NAMES.items():
    if key in path:
      return name
  parts = [p for p in path.split("/") if p and not any(ch in p for ch in "*?[")]
  return parts[-1] if parts else path


def run_record(run_dir: str) -> dict[str, Any]:
  """A run folder as the per-seed figures need it: variant (its colour's), depth, seed, corpus,
  lr, warmup, norm, budget (steps), outcome, escape_step (computed from the curve by the
  rule, outcome.curve_fields), baseline (the periodic eval curve's no-context loss, the one that
  rule uses: `eval_baseline`), the train curve, the periodic eval curve and the end-of-run eval
  (`final`: (step, loss), the summary's final_eval_loss at its last step). Older loops logged
  the end-of-run eval as the last `eval/loss`: that point is the final eval, not a periodic
  one, and is left out of `eval`."""
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
    "norm": (config.get("resolved_model") or config.get("model") or {}).get("norm"),
    "escape_step": run_fields(run_dir)["escape_step"],
    "baseline": curves["unigram"],
    "baseline_kind": baseline_kind(run_dir),
    "final_baseline": row["baseline"],  # the end-of-run verdict's (outcome.baseline)
    "train": curves["train"],
    "eval": ([s for s, _ in periodic], [x for _, x in periodic]),
    "final": (steps, final_loss) if is_finite_number(final_loss) else None,
  }


def _seeds_text(seeds: Sequence[int]) -> str:
  seeds = sorted(set(seeds))
  return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(map(str, seeds))


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
  """'Post-LN, lr 1e-3, 1,000 warmup steps: escaped at step 250/500 on 3 of 3 seeds': the
  steps are the seeds' escape steps (run_record's, the rule's), never written by hand."""
  r = group[0]
  warm = f"{r['warmup']:,} warmup steps" if r["warmup"] else "no warmup"
  escaped = sorted({g["escape_step"] for g in group if g["escape_step"] is not None})
  n = sum(g["escape_step"] is not None for g in group)
  if not n:
    fate = f"never escaped in {r['steps']:,} steps ({_seeds_text([g['seed'] for g in group])})"
  else:
    at = "/".join(f"{s:,}" for s in escaped)
    fate = f"escaped at step {at} on {n} of {len(group)} seeds"
  return f"{variant_label(r['variant'])}, lr {lr_label(r['lr'])}, {warm}: {fate}"


def plot_seed_bands(run_dirs: Sequence[str], out: str, title: str = "", panels="corpus") -> str:
  """`draw_seed_bands` saved to `out`."""
  return save_figure(draw_seed_bands(run_dirs, title, panels), out, tight=False)


def draw_seed_bands(run_dirs: Sequence[str], title: str = "", panels="corpus"):
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
    drawn = draw_baselines(ax, [m["baseline"] for m in members])
    mark_final_baselines(ax, members, drawn)
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
    handles=[band, final, *baseline_handles(label=baseline_label(records))]
    + [final_baseline_handle()],
    loc="lower center",
    ncol=2,
    fontsize="small",
    frameon=False,
  )
  fig.suptitle(title or "eval loss over seeds", fontsize="large")
  fig.tight_layout(rect=(0, 0.1, 1, 1))
  return fig


def _panel_title(members: Sequence[dict[str, Any]]) -> str:
  """'stdlib, 18 layers: Post-LN seeds 0, 1, 2; Pre-LN seed 0; ...'."""
  r = members[0]
  seeds: dict[str, list[int]] = {}
  for m in members:
    seeds.setdefault(m["variant"], []).append(m["seed"])
  per = "; ".join(f"{variant_label(v)} {_seeds_text(s)}" for v, s in seeds.items())
  return f"{r['corpus']}, {r['num_layers']} layers\n{per}"


def plot_seed_lines(
  run_dirs: Sequence[str], out: str, title: str = "", panels="corpus_layers"
) -> str:
  """`draw_seed_lines` saved to `out`."""
  return save_figure(draw_seed_lines(run_dirs, title, panels), out, tight=False)


def draw_seed_lines(run_dirs: Sequence[str], title: str = "", panels="corpus_layers"):
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
    drawn = draw_baselines(ax, [m["baseline"] for m in members])
    mark_final_baselines(ax, members, drawn)
    ax.set_title(_panel_title(members), fontsize="medium")
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
  handles = [Line2D([], [], color=variant_color(v), lw=2, label=variant_label(v)) for v in variants]
  handles += [
    Line2D([], [], ls=SEED_STYLES[s % len(SEED_STYLES)], color="0.3", label=f"seed {s}")
    for s in sorted(seeds)
  ]
  handles += [
    Line2D([], [], ls="", marker="o", ms=3, color="0.3", label="periodic eval"),
    Line2D([], [], ls="", marker="*", ms=11, color="0.3", label="end-of-run eval (16k tokens)"),
    *baseline_handles(label=baseline_label(records)),
    final_baseline_handle(),
  ]
  fig.legend(handles=handles, loc="lower center", ncol=5, fontsize="small", frameon=False)
  fig.suptitle(title or "eval loss, every seed", fontsize="large")
  fig.tight_layout(rect=(0, 0.07, 1, 1))
  return fig
