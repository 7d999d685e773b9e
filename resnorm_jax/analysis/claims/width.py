"""The README's rows of the width axis (docs/width/; the analysis is
resnorm_jax/analysis/width.py): the edges across width in sp, muP against sp."""

from __future__ import annotations

import functools
import os
import re

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  ROOT,
  SEED_SPAN,
  Claim,
  exists,
  lr_text,
  read,
  run_summary,
  tokens_note,
)
from resnorm_jax.analysis.claims.edges import edge, edge_lr, lr_cells_of
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.runs import status


def row_width() -> Claim | None:
  """Each variant's best lr and largest lr that trains on some seed ('(k/n)' where not every
  seed did) at every width run, and how many runs above the narrowest width diverged."""
  path = "docs/width/edges.csv"
  if not exists(path):
    return None
  edges = read(path)
  widths = sorted({int(r["d_model"]) for r in edges})
  if len(widths) < 2:
    return None
  by = {(r["variant"], int(r["d_model"])): r for r in edges}
  results = read("docs/width/results.csv")
  cells = lr_cells_of(results, axis="d_model")
  parts, short = [], []
  for variant in ("postnorm", "deepnorm", "prenorm"):
    texts = []
    reach = [edge_lr(edge(cells, variant, d)) for d in (widths[0], widths[-1])]
    short.append(f"{variant_label(variant)} {' to '.join(reach)}")
    for d in widths:
      r = by.get((variant, d))
      # the best lr by muP's row's rule: seed 0's lowest loss, '<=' at its smallest lr run
      best, _ = _best_and_reach(_seed0(results, variant, d), variant, d, set())
      if r is None or best in ("-", "none"):
        texts.append("not run" if r is None else "none trained")
      else:
        texts.append(f"{best}/{edge(cells, variant, d, unit='')}")
    parts.append(f"{variant_label(variant)} " + ", ".join(texts))
  runs = [r for r in results if int(r["d_model"]) > widths[0]]
  diverged = sum(r["outcome"] == status.DIVERGED for r in runs)
  at = ", ".join(str(d) for d in widths)
  seeds = {d: sorted({int(r["seed"]) for r in results if int(r["d_model"]) == d}) for d in widths}
  more = [d for d in widths if len(seeds[d]) > 1]
  top = max((seeds[d][-1] for d in more), default=0)
  seed_text = (
    f"seed 0 (d_model {', '.join(map(str, more))}: 0-{top} next to edges)" if more else "seed 0"
  )
  return Claim(
    "Width moves the edges down in sp",
    f"best (seed 0)/largest lr trained (k/n) at d_model {at}: "
    + "; ".join(parts)
    + f"; {diverged}/{len(runs)} runs above {widths[0]} diverged",
    f"12 layers, 1,000 steps, no warmup, constant lr; head dim 16; {seed_text}; <=: best at "
    "the smallest lr run; stdlib; " + tokens_note("docs/width/runs/deepnorm-L12-d256-lr0.0005-s0"),
    "[figure](docs/width/curves.png), `docs/width/edges.csv`, `docs/width/results.csv`",
    f"largest lr trained from d_model {widths[0]} to {widths[-1]}: " + ", ".join(short),
    f"12 layers, 1,000 steps; {seed_text}",
  )


def _seed0(rows: list[dict[str, str]], variant: str, d_model: int) -> list[dict[str, str]]:
  """The seed-0 runs of one variant at one width."""
  return [
    r
    for r in rows
    if r["variant"] == variant and int(r["d_model"]) == d_model and int(r["seed"]) == 0
  ]


def _best_and_reach(
  runs: list[dict[str, str]], variant: str, d_model: int, lrs: set[float]
) -> tuple[str, str]:
  """(best lr among all of one width's runs, '<=' before it where it is the smallest lr run;
  largest lr trained (edge()) among those at `lrs`): '-' where none ran, 'none' where none
  trained."""
  if not runs:
    return "-", "-"
  best = min(runs, key=lambda r: float(r["final_eval_loss"]))
  if best["outcome"] != status.TRAINED:
    best_text = "none"
  else:
    lr = float(best["opt.lr"])
    below = any(float(r["opt.lr"]) < lr for r in runs)
    best_text = lr_text(lr) if below else f"<={lr_text(lr)}"
  shared = [r for r in runs if float(r["opt.lr"]) in lrs]
  reach = edge(lr_cells_of(shared, axis="d_model"), variant, d_model) if shared else "-"
  return best_text, reach


def row_width_mup() -> Claim | None:
  """muP against sp at each width muP ran: each variant's seed-0 best lr on its own lrs, and
  the largest lr that trained on the lrs both ran there (the two sweeps' results.csv; the
  losses are in docs/width/README.md)."""
  path = "docs/width/mup/results.csv"
  if not exists(path):
    return None
  mup, sp = read(path), read("docs/width/results.csv")
  widths = sorted({int(r["d_model"]) for r in mup})
  if len(widths) < 2:
    return None
  cells = {}
  for variant in ("postnorm", "prenorm"):
    for d in widths:
      m, s = _seed0(mup, variant, d), _seed0(sp, variant, d)
      both = {float(r["opt.lr"]) for r in m} & {float(r["opt.lr"]) for r in s}
      cells[variant, "muP", d] = _best_and_reach(m, variant, d, both)
      cells[variant, "sp", d] = _best_and_reach(s, variant, d, both)

  def both_ways(variant: str, i: int) -> str:
    m, s = ("/".join(cells[variant, p, d][i] for d in widths) for p in ("muP", "sp"))
    return f"muP {m}, sp {s}"

  # what each variant's width question turns on: Pre-LN's best lr, Post-LN's edge (as well)
  return Claim(
    "muP against sp across width",
    f"at d_model {'/'.join(map(str, widths))}: Pre-LN's best lr {both_ways('prenorm', 0)}; "
    f"Post-LN's best lr {both_ways('postnorm', 0)}, its largest lr trained "
    f"{both_ways('postnorm', 1)}",
    "12 layers, seed 0 (sp's seeds split at Post-LN's edge); best lr on each one's lrs "
    "(<=: its smallest run), largest trained on the lrs both ran; 1,000 steps, no warmup, "
    "constant lr; base width "
    "64, head dim 16; stdlib; " + tokens_note("docs/width/runs/postnorm-L12-d256-mup-lr0.00025-s0"),
    "[figure](docs/width/mup/curves.png), `docs/width/mup/results.csv`",
    f"at d_model {'/'.join(map(str, widths))}: Pre-LN's best lr {both_ways('prenorm', 0)}; "
    f"Post-LN's largest trained {both_ways('postnorm', 1)}",
    "12 layers, 1,000 steps; seed 0",
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  170: row_width,
  180: row_width_mup,
}


# Numbers in docs/width/README.md's prose and hand-typed table, from the CSVs scripts/width.py
# writes (results.csv and edges.csv, sp; the same under mup/) and the run folders' summary.json
# (wall times).
README = os.path.join(ROOT, "docs", "width", "README.md")
RUNS = "docs/width/runs"
RESULTS = {False: "docs/width/results.csv", True: "docs/width/mup/results.csv"}  # by muP
EDGES = {False: "docs/width/edges.csv", True: "docs/width/mup/edges.csv"}
# The two runs paused while the test suite ran (the README says so); their wall times are left
# out of the ranges.
PAUSED = ("deepnorm-L12-d256-lr0.0005-s0", "prenorm-L12-d128-mup-lr0.008-s0")
# Which run folders a wall-time range covers (a pattern of their names): every run at a width,
# a tier of the sp grid, muP at a width.
WALL_SETS = {
  "d128": r"-d128-",
  "d256": r"-d256-",
  "tier1": r"-d128-lr.*-s0$",
  "tier2": r"-d128-lr.*-s[12]$",
  "tier3": r"-d256-lr",
  "mup.d64": r"-d64-mup-",
  "mup.d128": r"-d128-mup-",
  "mup.d256": r"-d256-mup-",
}


def _edge(variant: str, d_model: int, mup: bool = False) -> dict[str, str]:
  return next(
    r for r in read(EDGES[mup]) if r["variant"] == variant and int(r["d_model"]) == d_model
  )


def edges_lr(column: str, variant: str, d_model: int, mup: bool = False) -> str:
  """'2.5e-4': an lr of edges.csv (best_lr: the lowest loss, a seed mean where 3 seeds ran;
  boundary_lr; failing_lr)."""
  return lr_text(float(_edge(variant, d_model, mup)[column]))


def best_loss(variant: str, d_model: int) -> str:
  """'2.258': edges.csv's best_loss (the mean of the seeds at the best lr)."""
  return f"{float(_edge(variant, d_model)['best_loss']):.3f}"


def outcome_count(outcome: str, variant: str, d_model: int, lr: float) -> str:
  """'1 of 3': the runs of one sp cell (results.csv) with that outcome."""
  runs = [
    r
    for r in read(RESULTS[False])
    if r["variant"] == variant and int(r["d_model"]) == d_model and float(r["opt.lr"]) == lr
  ]
  return f"{sum(r['outcome'] == outcome for r in runs)} of {len(runs)}"


def diverged(d_model: int | None = None, mup: bool = False) -> str:
  """'0 of 31': the runs at a width (every width: None) that diverged."""
  runs = [r for r in read(RESULTS[mup]) if d_model is None or int(r["d_model"]) == d_model]
  return f"{sum(r['outcome'] == status.DIVERGED for r in runs)} of {len(runs)}"


def no_context(d_model: int) -> str:
  """'3.238': the no-context loss (`baseline`) of the sp runs at a width; 'a / b' should
  they disagree."""
  rows = read(RESULTS[False])
  return " / ".join(
    sorted({f"{float(r['baseline']):.3f}" for r in rows if int(r["d_model"]) == d_model})
  )


def _run(name: str) -> dict[str, str]:
  """A run's row, from the sp or the muP results.csv."""
  return next(r for mup in (False, True) for r in read(RESULTS[mup]) if r["name"] == name)


def _logit(value: float) -> str:
  """'5.9' under 10, '1,425' from 10: an attention logit as the page writes it."""
  return f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def peak(name: str) -> str:
  """'1,425': a run's largest attention logit over training (attn_logit_max_peak)."""
  return _logit(float(_run(name)["attn_logit_max_peak"]))


def rms(name: str) -> str:
  """'9.4': a run's largest output-logit RMS over training (output_logit_rms_peak)."""
  return f"{float(_run(name)['output_logit_rms_peak']):.1f}"


def _span(span: str) -> list[str]:
  m = SEED_SPAN.match(span)
  return [f"{m['prefix']}{s}" for s in range(int(m["first"]), int(m["last"]) + 1)]


def peak_range(span: str) -> str:
  """'1,425-1,765': the lowest and highest attn_logit_max_peak of `<name>-s0..2`."""
  peaks = [float(_run(n)["attn_logit_max_peak"]) for n in _span(span)]
  return f"{_logit(min(peaks))}-{_logit(max(peaks))}"


def stuck_range(column: str, variant: str, d_model: int) -> str:
  """'14-490' (attn_logit_max_peak) or '6.5-12.3' (output_logit_rms_peak): the lowest and
  highest over a variant's stuck sp runs at a width."""
  values = [
    float(r[column])
    for r in read(RESULTS[False])
    if r["variant"] == variant and int(r["d_model"]) == d_model and r["outcome"] == status.STUCK
  ]
  fmt = _logit if column == "attn_logit_max_peak" else (lambda v: f"{v:.1f}")
  return f"{fmt(min(values))}-{fmt(max(values))}"


def peak_ratio(sp: str, mup: str) -> str:
  """'3.7': sp's run's attention-logit peak over muP's, 2 significant digits."""
  a, b = (float(_run(n)["attn_logit_max_peak"]) for n in (sp, mup))
  return f"{a / b:.2g}"


def wall_seconds(folder: str) -> dict[str, float]:
  """The `wall_seconds` (summary.json) of each run folder in `folder`, by folder name."""
  root = os.path.join(ROOT, folder)
  return {
    name: float(run_summary(f"{folder}/{name}")["wall_seconds"])
    for name in sorted(os.listdir(root))
    if os.path.isfile(os.path.join(root, name, "summary.json"))
  }


def _wall_seconds() -> dict[str, float]:
  return wall_seconds(RUNS)


def wall_range(which: str, unit: str) -> str:
  """'13-24' (unit 'min', rounded) or '2,269-2,301' ('s'): the shortest and longest wall time
  of the runs of WALL_SETS[which], the PAUSED ones left out."""
  walls = [
    v for n, v in _wall_seconds().items() if re.search(WALL_SETS[which], n) and n not in PAUSED
  ]
  lo, hi = min(walls), max(walls)
  if unit == "min":
    return f"{round(lo / 60)}-{round(hi / 60)}"
  return f"{round(lo):,}-{round(hi):,}"


_P = functools.partial
# (outcome, variant, d_model, lr): the sp cells whose k-of-n the page states
COUNTED = (
  (status.TRAINED, "postnorm", 64, 5e-4),
  (status.TRAINED, "postnorm", 64, 1e-3),
  (status.TRAINED, "postnorm", 128, 2.5e-4),
  (status.TRAINED, "postnorm", 128, 5e-4),
  (status.TRAINED, "deepnorm", 64, 4e-3),
  (status.TRAINED, "deepnorm", 64, 8e-3),
  (status.STUCK, "deepnorm", 64, 8e-3),
  (status.TRAINED, "deepnorm", 128, 5e-4),
  (status.TRAINED, "deepnorm", 128, 1e-3),
  (status.STUCK, "deepnorm", 128, 1e-3),
)
# runs whose attention-logit peak (and, second list, output-logit RMS) the prose states
PEAKS = (
  "deepnorm-L12-d256-lr0.001-s0",
  "deepnorm-L12-d256-lr0.0005-s0",
  "prenorm-L12-d128-lr0.002-s0",
  "prenorm-L12-d128-lr0.004-s0",
  "prenorm-L12-d128-lr0.008-s0",
  "prenorm-L12-d128-lr0.016-s0",
  "prenorm-L12-d128-lr0.032-s0",
  "prenorm-L12-d256-lr0.002-s0",
  "prenorm-L12-d256-lr0.004-s0",
  "postnorm-L12-d128-lr0.00025-s0",
  "postnorm-L12-d256-lr0.00025-s0",
  "prenorm-L12-d128-mup-lr0.004-s0",
  "prenorm-L12-d128-mup-lr0.008-s0",
  "prenorm-L12-d256-mup-lr0.004-s0",
  "prenorm-L12-d256-mup-lr0.008-s0",
  "postnorm-L12-d256-mup-lr0.001-s0",
)
RMS = (
  "deepnorm-L12-d256-lr0.001-s0",
  "deepnorm-L12-d256-lr0.0005-s0",
  "postnorm-L12-d256-mup-lr0.001-s0",
)
WIDTHS = (64, 128, 256)
DOC_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"width.best_lr:{v}:{d}": (README, _P(edges_lr, "best_lr", v, d))
    for v in ("postnorm", "deepnorm", "prenorm")
    for d in WIDTHS
  },
  **{
    f"width.best_loss:{v}:{d}": (README, _P(best_loss, v, d))
    for v in ("postnorm", "deepnorm", "prenorm")
    for d in WIDTHS
  },
  **{
    f"width.mup.best_lr:{v}:{d}": (README, _P(edges_lr, "best_lr", v, d, True))
    for v in ("postnorm", "prenorm")
    for d in WIDTHS
  },
  **{
    f"width.boundary_lr:postnorm:{d}": (README, _P(edges_lr, "boundary_lr", "postnorm", d))
    for d in (128, 256)
  },
  "width.failing_lr:deepnorm:128": (README, _P(edges_lr, "failing_lr", "deepnorm", 128)),
  **{
    f"width.{o}:{v}:{d}:{lr_text(lr)}": (README, _P(outcome_count, o, v, d, lr))
    for o, v, d, lr in COUNTED
  },
  "width.diverged:128": (README, _P(diverged, 128)),
  "width.diverged:256": (README, _P(diverged, 256)),
  "width.mup.diverged": (README, _P(diverged, None, True)),
  "width.no_context:128": (README, _P(no_context, 128)),
  **{f"width.peak:{n}": (README, _P(peak, n)) for n in PEAKS},
  **{f"width.rms:{n}": (README, _P(rms, n)) for n in RMS},
  "width.peak_range:prenorm-L12-d128-lr0.008-s0..2": (
    README,
    _P(peak_range, "prenorm-L12-d128-lr0.008-s0..2"),
  ),
  "width.stuck_peaks:deepnorm:128": (
    README,
    _P(stuck_range, "attn_logit_max_peak", "deepnorm", 128),
  ),
  "width.stuck_rms:deepnorm:128": (
    README,
    _P(stuck_range, "output_logit_rms_peak", "deepnorm", 128),
  ),
  **{
    f"width.peak_ratio:prenorm:128:{lr_text(lr)}": (
      README,
      _P(peak_ratio, f"prenorm-L12-d128-lr{lr:g}-s0", f"prenorm-L12-d128-mup-lr{lr:g}-s0"),
    )
    for lr in (0.004, 0.008)
  },
  **{
    f"width.wall_{unit}:{which}": (README, _P(wall_range, which, unit))
    for which, unit in (
      ("d128", "min"),
      ("d256", "min"),
      ("tier1", "min"),
      ("tier3", "min"),
      ("tier2", "s"),
      ("tier3", "s"),
      ("mup.d64", "s"),
      ("mup.d128", "s"),
      ("mup.d256", "s"),
    )
  },
}
