"""The per-seed figures (scripts/plot_curves.py --seeds): seed bands, the runs that differ only
in their seed drawn as one arm (mean and min-max band), and seed lines, every run its own line
(its variant's colour, its seed's line style); a panel per corpus, depth or both. No JAX here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from resnorm_jax.analysis.loss_curves import baseline_label, draw_baselines, mark_final_baselines
from resnorm_jax.analysis.style import (
  SEED_STYLES,
  baseline_handles,
  final_baseline_handle,
  lr_label,
  pyplot,
  save_figure,
  seeds_agree,
  variant_color,
  variant_label,
)
from resnorm_jax.runs.curves import run_record

_SEED_SUFFIX = re.compile(r"-s(?:eed)?\d+$")


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
  mean over seeds (line) and its min-max (band) where the seeds agree (all escaped or none;
  else each seed its own thinner line, no mean), every seed's end-of-run eval (diamonds at
  the last step), the no-context loss (dashed) and 0.1 below it (dotted). One colour per
  variant; arms of one variant told apart by line style."""
  records = [run_record(r) for r in run_dirs]
  groups = _panels(records, panels)
  fig, axes = _subplots(len(groups), cols=len(groups) if len(groups) <= 3 else 2)
  split = False
  for ax, members in zip(axes, groups.values(), strict=True):
    arms: dict[str, list[dict[str, Any]]] = {}
    for r in members:
      arms.setdefault(_SEED_SUFFIX.sub("", r["name"]), []).append(r)
    styles: dict[str, int] = {}
    for arm in arms.values():
      color = variant_color(arm[0]["variant"])
      style = SEED_STYLES[styles.setdefault(arm[0]["variant"], 0) % len(SEED_STYLES)]
      styles[arm[0]["variant"]] += 1
      if seeds_agree([r["escape_step"] is not None for r in arm]):
        steps = sorted(set.intersection(*(set(r["eval"][0]) for r in arm)))
        by_step = [[dict(zip(*r["eval"], strict=True))[s] for r in arm] for s in steps]
        mean = [sum(v) / len(v) for v in by_step]
        lo, hi = [min(v) for v in by_step], [max(v) for v in by_step]
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(steps, mean, style, marker="o", ms=4, lw=1.6, color=color, label=_arm_label(arm))
      else:  # some seeds escaped, some did not: each seed its own line, no mean
        split = True
        for k, r in enumerate(arm):
          label = _arm_label(arm) + " (each seed)" if k == 0 else None
          ax.plot(*r["eval"], style, marker="o", ms=2.5, lw=1.0, color=color, label=label)
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
  each = Line2D(
    [], [], color="0.3", marker="o", ms=2.5, lw=1.0,
    label="periodic eval of each seed, where some escaped and some did not (no mean)",
  )  # fmt: skip
  fig.legend(
    handles=[
      band,
      *([each] if split else []),
      final,
      *baseline_handles(label=baseline_label(records)),
    ]
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
