"""The README's rows of the loss-vs-lr grid over depth (docs/lr_sensitivity/; the analysis
is resnorm_jax/analysis/lr_sensitivity.py): the edges, Pre-LN without warmup, the 2025-26
variants, value residuals over seeds; and the one-sentence answer on top of Results."""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Sequence

import resnorm_jax
from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  MAIN,
  RESULTS_MD_NAME,
  ROOT,
  Claim,
  lr_text,
  optional,
  read,
  run_summary,
  seeds_text,
  step_text,
  tokens_note,
)
from resnorm_jax.analysis.claims.edges import (
  across,
  edge,
  edge_lr,
  kept_cells,
  kept_edge,
  lr_cells,
  lr_cells_of,
  survival_cells,
)
from resnorm_jax.analysis.claims.reproductions import eval_no_context, eval_range, evals_between
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.analysis.survival_section import odds_by_cell
from resnorm_jax.files import pysource
from resnorm_jax.runs import status


def row_edges() -> Claim:
  cells = kept_cells(lr_cells())
  depths = sorted({d for (_, d, _) in cells})
  # the grid: the lrs every Pre-LN curve has; an lr run for some Post-LN curves only (the left
  # edge) is named apart
  grid = sorted({lr for (v, _, lr) in cells if v == "prenorm"})
  extra = sorted({lr for (_, _, lr) in cells} - set(grid))
  reach = {v: [kept_edge(cells, v, d) for d in depths] for v in ("postnorm", "deepnorm")}
  parts = [f"{variant_label(v)} " + " / ".join(texts) for v, texts in reach.items()]
  headline = "; ".join(
    f"{variant_label(v)}'s edge " + across([edge_lr(t) for t in texts], depths)
    for v, texts in reach.items()
  )
  pre = {k: o for k, o in cells.items() if k[0] == "prenorm"}
  if all(o.count(status.TRAINED) == len(o) for o in pre.values()):
    parts.append(f"Pre-LN all {len({lr for (_, _, lr) in pre})} lrs at each")
    headline += f"; Pre-LN trains at all {len({lr for (_, _, lr) in pre})} lrs"
  at = " / ".join(str(d) for d in depths)
  budget = f"1,000 steps, no warmup, constant lr {lr_text(grid[0])} to {lr_text(grid[-1])}"
  if extra:
    rows = [r for r in read("docs/lr_sensitivity/results.csv") if float(r["opt.lr"]) in extra]
    where = ", ".join(sorted({r["num_layers"] for r in rows}, key=int))
    lrs = ", ".join(lr_text(lr) for lr in extra)
    trained = sum(r["outcome"] == status.TRAINED for r in rows)
    falling = sum(r["late_trend"] == "falling" for r in rows)
    budget += (
      f" (Post-LN at {where} layers also {lrs}: {trained} of {len(rows)} trained, "
      f"{falling} still falling)"
    )
  seeds = "seed 0, 0-2 next to edges, 12 at the survival cells"
  return Claim(
    "Post-LN's usable lr shrinks with depth, DeepNorm's hardly, Pre-LN's not at all",
    f"largest lr whose escape lasts to the end on some seed, at {at} layers: " + "; ".join(parts),
    f"{budget}; {seeds} (1,500 steps); stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "[curves](docs/lr_sensitivity/curves.png), `docs/lr_sensitivity/results.csv`",
    headline,
    f"1,000 steps, no warmup; {seeds}",
  )


def row_prenorm() -> Claim:
  cells = {k: o for k, o in lr_cells().items() if k[0] == "prenorm"}
  runs = sum(len(o) for o in cells.values())
  trained = sum(o.count(status.TRAINED) for o in cells.values())
  depths = sorted({d for (_, d, _) in cells})
  return Claim(
    "Xiong: Pre-LN needs no warmup",
    f"without warmup Pre-LN trained on {trained} of {runs} runs of the loss-vs-lr grid "
    f"({depths[0]}-{depths[-1]} layers)",
    "as the first row",
    "`docs/lr_sensitivity/results.csv`",
    f"trained on {trained} of {runs} runs without warmup, {depths[0]}-{depths[-1]} layers",
    "as the first row",
  )


# The 2025-26 variants as their sweep grid names them; each one's name is its named config's LABEL.
LITERATURE_GRID = os.path.join(resnorm_jax.ROOT, "configs", "sweeps", "literature.py")


def grid_variants(path: str = LITERATURE_GRID) -> tuple[str, ...]:
  """The variants a grid file runs (its module-level VARIANTS tuple), read from its source: the
  library imports no config."""
  for node in pysource.parse_file(path).body:
    if isinstance(node, ast.Assign) and any(
      isinstance(t, ast.Name) and t.id == "VARIANTS" for t in node.targets
    ):
      return tuple(ast.literal_eval(node.value))
  raise ValueError(f"{path} declares no VARIANTS")


LITERATURE = {v: variant_label(v) for v in grid_variants()}


def _literature_row(depth: int) -> Claim | None:
  """The 2025-26 variants on the loss-vs-lr grid at `depth` layers: each one's best lr and
  loss (seed 0) and the largest lr that trains among those run, beside Pre-LN's on the same
  lrs; the variants with lrs not run yet named."""
  rows = [r for r in read("docs/lr_sensitivity/results.csv") if r["num_layers"] == str(depth)]
  if not any(r["variant"] in LITERATURE for r in rows):
    return None
  ran = {r["opt.lr"] for r in rows if r["variant"] in LITERATURE and r["seed"] == "0"}
  grid = sorted(float(lr) for lr in ran)
  rows = [r for r in rows if r["opt.lr"] in ran and r["seed"] == "0"]
  cells = lr_cells_of(rows)
  parts, partial, by_best = [], [], {}
  for v, name in (*LITERATURE.items(), ("prenorm", "Pre-LN")):
    mine = [r for r in rows if r["variant"] == v]
    if not mine:
      partial.append(f"{name} 0")
      continue
    best = min(mine, key=lambda r: float(r["capped_loss"]))
    blew = [lr_text(float(r["opt.lr"])) for r in mine if r["outcome"] == status.DIVERGED]
    reach = edge(cells, v, depth)
    by_best.setdefault(
      status.STUCK if reach == "none" else lr_text(float(best["opt.lr"])), []
    ).append(name)
    text = (  # no best lr to name when every run is on the plateau
      "stuck at every lr run"
      if reach == "none"
      else f"{lr_text(float(best['opt.lr']))} ({float(best['capped_loss']):.3f}) / {reach}"
    )
    parts.append(f"{name} {text}" + (f" (diverged at {', '.join(blew)})" if blew else ""))
    if len(mine) < len(grid):
      partial.append(f"{name} {len(mine)}")
  run = f"; lrs run: {', '.join(partial)} of {len(grid)}" if partial else ""
  lrs = (
    f"lr {lr_text(grid[0])} to {lr_text(grid[-1])}"
    if len(grid) > 3
    else "lr " + ", ".join(lr_text(lr) for lr in grid)
  )
  headline = "; ".join(
    f"{', '.join(names)} stuck at every lr"
    if lr == status.STUCK
    else f"best lr {lr}: {', '.join(names)}"
    for lr, names in sorted(by_best.items(), key=lambda kv: -len(kv[1]))
  )
  return Claim(
    f"The 2025-26 variants at {depth} layers",
    "best lr (loss) / largest that trains: " + "; ".join(parts),
    f"1,000 steps, no warmup, constant {lrs}; seed 0{run}; stdlib; "
    + tokens_note(f"docs/lr_sensitivity/runs/prenorm-L{depth}-lr0.004-s0"),
    "[curves](docs/lr_sensitivity/literature.png), `docs/lr_sensitivity/results.csv`",
    headline,
    f"1,000 steps, {len(grid)} lrs; seed 0",
  )


def row_literature() -> Claim | None:
  """The 2025-26 variants at 6 layers (the grid's 9 lrs)."""
  return _literature_row(6)


def row_literature_24() -> Claim | None:
  """The 2025-26 variants at 24 layers (the 3 lrs around Pre-LN's best)."""
  return _literature_row(24)


CONTRASTS = "docs/lr_sensitivity/contrasts.csv"  # scripts/lr_sensitivity.py writes it


def _seed_mean_contrast() -> dict[str, str] | None:
  return next((r for r in optional(CONTRASTS) if r["kind"] == "seed mean"), None)


def _valueres_parts() -> tuple[str, str] | None:
  """('-0.077 (95% -0.101 to -0.053', 'seeds 0-4 each'): valueres_contrast's two parts."""
  r = _seed_mean_contrast()
  if r is None:
    return None
  a, b = ([int(x) for x in side.split()] for side in r["seeds"].split(" / "))
  seeds = f"seeds {seeds_text(a)} each" if a == b else f"seeds {seeds_text(a)} and {seeds_text(b)}"
  d, lo, hi = (float(r[k]) for k in ("difference", "lo", "hi"))
  return f"{d:+.3f} (95% {lo:+.3f} to {hi:+.3f}", seeds


def valueres_contrast() -> str | None:
  """'-0.077 (95% -0.101 to -0.053; seeds 0-4 each)': the SEED_CONTRAST's difference over the
  seeds each ran, with its Welch interval (contrasts.csv); None before 2 seeds each."""
  parts = _valueres_parts()
  return None if parts is None else f"{parts[0]}; {parts[1]})"


def valueres_seed0_below() -> str:
  """'-0.105 / -0.089 / -0.101': seed 0's variant-minus-versus loss at each lr (contrasts.csv)."""
  rows = sorted(
    (r for r in optional(CONTRASTS) if r["kind"] == "seed 0"), key=lambda r: float(r["lr"])
  )
  return " / ".join(f"{float(r['difference']):+.3f}" for r in rows) or "not run"


def row_valueres() -> Claim | None:
  """Value residuals against Pre-LN at 24 layers and 4e-3 (both curves' best) over seeds."""
  diff, r = valueres_contrast(), _seed_mean_contrast()
  if diff is None or r is None:
    return None
  lo, hi = float(r["lo"]), float(r["hi"])
  verdict = "beat" if hi < 0 else ("trail" if lo > 0 else "do not clearly beat")
  loss, seeds = _valueres_parts()
  return Claim(
    f"Value residuals {verdict} Pre-LN at 24 layers, over seeds",
    f"final eval loss, value residuals minus Pre-LN, at lr 4e-3: {diff}; seed 0 alone at "
    f"2e-3 / 4e-3 / 8e-3: {valueres_seed0_below()}",
    "1,000 steps, no warmup, constant lr; Welch interval; stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/valueres-L24-lr0.004-s0"),
    "[curves](docs/lr_sensitivity/literature.png), `docs/lr_sensitivity/contrasts.csv`",
    f"final eval loss minus Pre-LN's at lr 4e-3: {loss})",
    f"1,000 steps; {seeds}",
  )


# A clause of the answer about one cell rests on at least this many seeds (a survival cell's
# first count); a cell with fewer is stated in the table, with its seeds, not in the answer.
ANSWER_MIN_SEEDS = 4


def ruled_edge(protocols: Sequence[dict[tuple, list[str]]], variant: str, depth: int) -> str | None:
  """The edge the answer may state, by rule: within one protocol (the first of `protocols`
  that brackets it), the largest lr at which some seed kept its escape, with at least
  ANSWER_MIN_SEEDS seeds, and a larger lr of that protocol, also with at least
  ANSWER_MIN_SEEDS seeds, at which none did: '5e-4 (11/12 kept; 1e-3: 0/12)'. None when no
  protocol brackets the edge so (the table states it with its seeds)."""
  for cells in protocols:
    here = {lr: o for (v, d, lr), o in cells.items() if (v, d) == (variant, depth)}
    enough = {lr: o for lr, o in here.items() if len(o) >= ANSWER_MIN_SEEDS}
    kept = [lr for lr, o in enough.items() if status.TRAINED in o]
    if not kept:
      continue
    top = max(kept)
    above = sorted(lr for lr in enough if lr > top)
    if above:
      o, a = enough[top], enough[above[0]]
      return (
        f"{lr_text(top)} ({o.count(status.TRAINED)}/{len(o)} kept; {lr_text(above[0])}: 0/{len(a)})"
      )
  return None


def answer() -> str:
  """The one-sentence answer on top of Results: Post-LN's edge stated only where a rule in
  code admits it (`ruled_edge`: one protocol, >= ANSWER_MIN_SEEDS seeds on each side of a
  bracketed edge); other depths are left to the table with their seeds."""
  cells = kept_cells(lr_cells())
  depths = sorted({d for (_, d, _) in cells})
  protocols = (kept_cells({}), lr_cells())  # the survival protocol first, then the grid's
  ruled = [(d, e) for d in depths if (e := ruled_edge(protocols, "postnorm", d))]
  left = [d for d in depths if d not in dict(ruled)]
  post = ", ".join(f"{e} at {d}" for d, e in ruled)
  if left:
    post += f" layers; at {', '.join(map(str, left))} not bracketed on {ANSWER_MIN_SEEDS} seeds"
  runs = read("docs/lr_sensitivity/results.csv") + read("docs/lr_sensitivity/budget.csv")
  diverged = [r for r in runs if r["outcome"] == status.DIVERGED]
  which = ", ".join(
    f"{variant_label(r['variant'])} at {r['num_layers']} layers, lr {lr_text(float(r['opt.lr']))}"
    for r in diverged
  )
  text = (
    "**The answer:** without warmup, deep Post-LN is stuck, not unstable: above an lr "
    + ("that falls with depth " if len(ruled) >= 2 else "")
    + f"(the largest whose escape lasts to the end on >= {ANSWER_MIN_SEEDS} "
    f"seeds, the next lr failing on as many: {post}{'' if left else ' layers'}) it stays on "
    f"the no-context plateau ({len(diverged)} of "
    f"{len(runs)} runs diverged{': ' + which if which else ''})"
  )
  surv = survival_cells()
  if surv:
    text += f"; at the edge escape is a matter of odds ({odds_by_cell(surv, long=False)})"
  deep = [(lr, o) for (v, d, lr), o in cells.items() if (v, d) == ("deepnorm", depths[-1])]
  lr, outcomes = max((x for x in deep if status.TRAINED in x[1]), default=(None, []))
  if lr is None or len(outcomes) < ANSWER_MIN_SEEDS:  # the table row says it, with its seeds
    return text + "; Pre-LN trains at every lr."
  seeds = (
    f"{outcomes.count(status.TRAINED)} of {len(outcomes)} seed{'s' if len(outcomes) > 1 else ''}"
  )
  return text + (
    f"; DeepNorm trains at {lr_text(lr)} at {depths[-1]} layers on {seeds} run there, "
    "Pre-LN at every lr."
  )


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  10: row_edges,
  50: row_prenorm,
  110: row_literature,
  120: row_literature_24,
  130: row_valueres,
}


GRID = "docs/lr_sensitivity/results.csv"
GRID_RUNS = "docs/lr_sensitivity/runs"


def _grid(variant: str, depth: int) -> list[dict[str, str]]:
  return [r for r in read(GRID) if r["variant"] == variant and int(r["num_layers"]) == depth]


def grid_count(variant: str, depth: int, lr: float, outcome: str = status.TRAINED) -> str:
  """'2 of 3': the grid's runs of one cell (variant, depth, lr; every seed) with that outcome."""
  runs = [r for r in _grid(variant, depth) if float(r["opt.lr"]) == lr]
  return f"{sum(r['outcome'] == outcome for r in runs)} of {len(runs)}"


def _seed_losses(variant: str, depth: int, lo: float, hi: float, seed: int) -> dict[float, float]:
  """{lr: final eval loss} of one seed's grid runs at lrs from `lo` to `hi`."""
  return {
    float(r["opt.lr"]): float(r["final_eval_loss"])
    for r in _grid(variant, depth)
    if int(r["seed"]) == seed and lo <= float(r["opt.lr"]) <= hi
  }


def grid_loss_range(variant: str, depth: int, lo: float, hi: float, seed: int = 0) -> str:
  """'3.249-3.263': the lowest and highest final eval loss of a seed's runs at lrs `lo`-`hi`."""
  losses = _seed_losses(variant, depth, lo, hi, seed).values()
  return f"{min(losses):.3f}-{max(losses):.3f}"


def grid_best_loss(variant: str, depth: int, seed: int = 0) -> str:
  """'1.765': a seed's lowest final eval loss over the grid's lrs at one depth."""
  return f"{min(_seed_losses(variant, depth, 0, float('inf'), seed).values()):.3f}"


def depth_shift(variants: Sequence[str], lo: float, hi: float, lower: bool) -> str:
  """'0.01-0.07': how much lower (`lower`) or higher the 48-layer curves end than the 24-layer
  ones at each lr from `lo` to `hi` both ran (seed 0), over `variants`: the range, 2 decimals."""
  gaps = []
  for v in variants:
    deep, shallow = _seed_losses(v, 48, lo, hi, 0), _seed_losses(v, 24, lo, hi, 0)
    gaps += [(shallow[lr] - deep[lr]) * (1 if lower else -1) for lr in deep if lr in shallow]
  return f"{min(gaps):.2f}-{max(gaps):.2f}"


def grid_eval_range(variant: str, depth: int, lo: float, hi: float, start: int) -> str:
  """'3.298-3.325': the lowest and highest periodic eval from step `start` on over a depth's
  seed-0 runs at lrs `lo`-`hi` (their folders under docs/lr_sensitivity/runs/), 3 decimals."""
  values = [
    v
    for r in _grid(variant, depth)
    if int(r["seed"]) == 0 and lo <= float(r["opt.lr"]) <= hi
    for v in evals_between(os.path.join(GRID_RUNS, r["name"]), start)
  ]
  return f"{min(values):.3f}-{max(values):.3f}"


def cell_range(variant: str, depths: tuple[int, ...], lr: float) -> str:
  """'3.250-3.259': the lowest and highest final eval loss of a cell's runs (every seed) at
  `depths`."""
  losses = [
    float(r["final_eval_loss"])
    for d in depths
    for r in _grid(variant, d)
    if float(r["opt.lr"]) == lr
  ]
  return f"{min(losses):.3f}-{max(losses):.3f}"


def grid_escape_steps(variant: str, depths: tuple[int, ...], lr: float) -> str:
  """'50': the escape steps of a cell's runs (every seed) at `depths`, each once, in order
  ('50 or 100'; 'none' for a run that never escaped)."""
  steps = {
    r["escape_step"] or "none"
    for d in depths
    for r in _grid(variant, d)
    if float(r["opt.lr"]) == lr
  }
  numbers = sorted(int(x) for x in steps if x != "none")
  return " or ".join([step_text(x) for x in numbers] + (["none"] if "none" in steps else []))


def evals_at(runs: tuple[str, ...], step: int) -> str:
  """'3.21-3.31': the lowest and highest periodic eval of grid runs at one step, 2 decimals."""
  values = [v for r in runs for v in evals_between(os.path.join(GRID_RUNS, r), step, step)]
  lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
  return lo if lo == hi else f"{lo}-{hi}"


def eval_below(run: str, step: int) -> str:
  """'0.065': how far a run's periodic eval at `step` is below its eval set's no-context loss,
  3 decimals."""
  (value,) = evals_between(run, step, step)
  return f"{float(run_summary(run)['periodic_eval_no_context_loss']) - value:.3f}"


def _seed0(variant: str, depth: int, lo: float, hi: float) -> list[dict[str, str]]:
  """A depth's seed-0 grid rows at lrs from `lo` to `hi`, in lr order."""
  rows = [
    r for r in _grid(variant, depth) if int(r["seed"]) == 0 and lo <= float(r["opt.lr"]) <= hi
  ]
  return sorted(rows, key=lambda r: float(r["opt.lr"]))


def lr_losses(variant: str, depth: int, lo: float, hi: float) -> str:
  """'2.290, 2.159, 2.023': seed 0's final eval losses at lrs `lo`-`hi`, in lr order."""
  return ", ".join(f"{float(r['final_eval_loss']):.3f}" for r in _seed0(variant, depth, lo, hi))


def seeds_slash(prefix: str, seeds: int = 3) -> str:
  """'1.733 / 1.682 / 1.724': the final eval losses of a grid cell's seeds 0 to `seeds` - 1
  (run folders `<prefix>-s<seed>` under docs/lr_sensitivity/runs), in seed order."""
  return " / ".join(
    f"{float(run_summary(os.path.join(GRID_RUNS, f'{prefix}-s{k}'))['final_eval_loss']):.3f}"
    for k in range(seeds)
  )


def grid_evals_at(cells: tuple[tuple[str, int, float, float], ...], step: int) -> str:
  """'3.315-3.332': the lowest and highest periodic eval at `step` over the seed-0 runs of
  `cells` ((variant, depth, lowest lr, highest lr) each), 3 decimals."""
  values = [
    v
    for cell in cells
    for r in _seed0(*cell)
    for v in evals_between(os.path.join(GRID_RUNS, r["name"]), step, step)
  ]
  return f"{min(values):.3f}-{max(values):.3f}"


def grid_lowest_range(variant: str, depth: int, lo: float, hi: float) -> str:
  """'3.298-3.301': over seed 0's runs at lrs `lo`-`hi`, the range of each run's lowest
  periodic eval, 3 decimals."""
  lows = [
    min(evals_between(os.path.join(GRID_RUNS, r["name"]), 0))
    for r in _seed0(variant, depth, lo, hi)
  ]
  return f"{min(lows):.3f}-{max(lows):.3f}"


def _curve(run: str) -> tuple[list[int], list[float]]:
  from resnorm_jax.analysis.lr_sweep_rows import eval_curve

  return eval_curve(os.path.join(ROOT, run))


def eval_lowest(run: str) -> str:
  """'3.273 at step 950': a run's lowest periodic eval, 3 decimals, and its step."""
  steps, losses = _curve(run)
  low = min(range(len(losses)), key=losses.__getitem__)
  return f"{losses[low]:.3f} at step {step_text(steps[low])}"


SENSITIVITY = "docs/lr_sensitivity/sensitivity.csv"


def _sensitivity(variant: str, depth: int) -> dict[str, str]:
  return next(
    r for r in read(SENSITIVITY) if r["variant"] == variant and int(r["num_layers"]) == depth
  )


def sensitivity_triple(variant: str, depth: int) -> str:
  """'9 / 1.759 / 0.379': a curve's lrs that train / best loss / LR sensitivity
  (sensitivity.csv)."""
  r = _sensitivity(variant, depth)
  return f"{r['lrs_trained']} / {float(r['best_loss']):.3f} / {float(r['lr_sensitivity']):.3f}"


def sensitivity_value(variant: str, depths: tuple[int, ...], column: str = "lr_sensitivity") -> str:
  """'0.375', or '0.379-0.433' over several depths: a sensitivity.csv column, 3 decimals."""
  values = [float(_sensitivity(variant, d)[column]) for d in depths]
  lo, hi = f"{min(values):.3f}", f"{max(values):.3f}"
  return lo if lo == hi else f"{lo}-{hi}"


def plateau_lrs(variant: str, depths: tuple[int, ...]) -> str:
  """'3 of 9': how many of a curve's lrs do not train (sensitivity.csv), 'a / b of 9' should
  the depths disagree."""
  rows = [_sensitivity(variant, d) for d in depths]
  off = sorted({int(r["n_lrs"]) - int(r["lrs_trained"]) for r in rows})
  return f"{' / '.join(map(str, off))} of {rows[0]['n_lrs']}"


def variant_gap(variant: str, other: str, depth: int, lrs: tuple[float, ...]) -> str:
  """'0.01-0.02': how much `other`'s seed-0 final eval loss exceeds `variant`'s at each of
  `lrs` (negative: it is below), the least and the most, 2 decimals."""
  a = _seed_losses(variant, depth, min(lrs), max(lrs), 0)
  b = _seed_losses(other, depth, min(lrs), max(lrs), 0)
  gaps = [b[lr] - a[lr] for lr in lrs]
  lo, hi = f"{min(gaps):.2f}", f"{max(gaps):.2f}"
  return lo if lo == hi else f"{lo}-{hi}"


GRID_LRS = (1.25e-4, 3.2e-2)  # the grid's 9 lrs (the left-edge brackets below it excluded)


def _selection(name: str) -> list[dict[str, str]]:
  """The grid runs a late-slope census counts: 'trained' (Post-LN, Pre-LN, DeepNorm trained
  runs at lrs up to 8e-3), 'plateau' (their runs on the plateau), 'prenorm_right' (Pre-LN at
  1.6e-2 and 3.2e-2); the 9 grid lrs only."""
  rows = [
    r
    for r in read(GRID)
    if r["variant"] in MAIN and GRID_LRS[0] <= float(r["opt.lr"]) <= GRID_LRS[1]
  ]
  if name == status.TRAINED:
    return [r for r in rows if r["outcome"] == status.TRAINED and float(r["opt.lr"]) <= 8e-3]
  if name == "plateau":
    return [r for r in rows if r["outcome"] == status.STUCK]
  return [r for r in rows if r["variant"] == "prenorm" and float(r["opt.lr"]) >= 1.6e-2]


def trend_count(selection: str, trend: str | None = None) -> str:
  """'49': the runs of a census selection with that late trend (all of them when None)."""
  return str(sum(trend is None or r["late_trend"] == trend for r in _selection(selection)))


def all_falling(selection: str) -> str:
  """'all 88': the runs of a selection falling late, 'all n' when every one is."""
  rows = _selection(selection)
  k = sum(r["late_trend"] == "falling" for r in rows)
  return f"all {k}" if k == len(rows) else f"{k} of the {len(rows)}"


def max_slope(selection: str) -> str:
  """'-0.130': the largest (least falling) late slope of a selection, 3 decimals."""
  return f"{max(float(r['late_slope']) for r in _selection(selection)):.3f}"


def slope_value(name: str) -> str:
  """'-0.071': one grid run's late slope, 3 decimals."""
  return f"{float(_row(GRID, name)['late_slope']):.3f}"


# (run under docs/lr_sensitivity/runs, step): the periodic evals the page states
EVAL_AT = (
  ("prenorm-L24-lr0.016-s0", 550),
  ("prenorm-L24-lr0.016-s0", 800),
  ("postnorm-L24-lr6.25e-05-s0", 1000),
  ("postnorm-L24-lr3.125e-05-s0", 1000),
  ("postnorm-L48-lr6.25e-05-s0", 1000),
  ("postnorm-L48-lr3.125e-05-s0", 1000),
  ("postnorm-L24-lr0.000125-s1", 450),
  ("postnorm-L24-lr0.000125-s1", 950),
  ("postnorm-L48-lr0.000125-s0", 300),
  *(("prenorm-L6-lr0.004-s0", s) for s in (500, 750, 1000)),
  *(("prenorm-L12-lr0.004-s0", s) for s in (500, 750, 1000)),
  ("postnorm-L12-lr0.0005-s1", 200),
  ("postnorm-L12-lr0.0005-s1", 800),
  ("postnorm-L6-lr0.004-s0", 100),
  ("postnorm-L6-lr0.004-s0", 350),
  ("postnorm-L6-lr0.004-s0", 750),
  ("deepnorm-L6-lr0.008-s0", 50),
)
ABOVE_EDGE = ("deepnorm-L6-lr0.008-s0", "deepnorm-L12-lr0.008-s0", "postnorm-L6-lr0.004-s0")

INTERVENTIONS = "docs/interventions/results.csv"


def _row(path: str, name: str) -> dict[str, str]:
  return next(r for r in read(path) if r["name"] == name)


def late_slope(path: str, name: str) -> str:
  """'0.561 +- 0.127': a run's late slope (nats per 1,000 steps) and its standard error, from
  a results CSV's `late_slope` and `late_slope_se`."""
  row = _row(path, name)
  return f"{float(row['late_slope']):.3f} +- {float(row['late_slope_se']):.3f}"


def late_trend(path: str, name: str) -> str:
  """'rising': a run's late trend (`late_trend`) in a results CSV."""
  return _row(path, name)["late_trend"]


def late_trends(names: tuple[str, ...]) -> str:
  """'falling': the late trends of several grid runs, each once ('falling / flat' when they
  differ)."""
  return " / ".join(sorted({late_trend(GRID, n) for n in names}))


_PLAIN = ("prenorm-L24-lr0.016-s0", "prenorm-L24-lr0.032-s0")
_INTERVENED = tuple(
  f"prenorm-{k}-L24-lr{lr}-s0" for lr in ("0.016", "0.032") for k in ("qknorm", "zloss")
)
_LEFT = tuple(f"postnorm-L{d}-lr{lr}-s0" for d in (24, 48) for lr in ("6.25e-05", "3.125e-05"))
_TRENDS = (
  *((GRID, n) for n in (*_PLAIN, "prenorm-L24-lr0.032-s1", "prenorm-L24-lr0.032-s2", *_LEFT)),
  (GRID, "hybridnorm-L6-lr0.008-s0"),
  *((INTERVENTIONS, n) for n in _INTERVENED),
)

# Numbers in docs/results.md's prose computed here (resnorm_jax.analysis.claims.readme).
FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"lr_sensitivity.eval:{run}:{step}": (
      RESULTS_MD_NAME,
      functools.partial(eval_range, os.path.join(GRID_RUNS, run), step, step, 3),
    )
    for run, step in EVAL_AT
  },
  **{
    f"lr_sensitivity.sensitivity:{v}:L{d}": (
      RESULTS_MD_NAME,
      functools.partial(sensitivity_triple, v, d),
    )
    for v, depths in (
      ("prenorm", (6, 12, 24, 48)),
      ("deepnorm", (6, 12, 24, 48)),
      ("postnorm", (6, 12)),
    )
    for d in depths
  },
  **{
    f"lr_sensitivity.sensitivity_value:{v}:L{'-'.join(map(str, ds))}": (
      RESULTS_MD_NAME,
      functools.partial(sensitivity_value, v, ds),
    )
    for v in ("prenorm", "deepnorm")
    for ds in ((48,), (6, 12, 24))
  },
  **{
    f"lr_sensitivity.lr_losses:{v}:L{d}:{lr_text(lo)}-{lr_text(hi)}": (
      RESULTS_MD_NAME,
      functools.partial(lr_losses, v, d, lo, hi),
    )
    for v, d, lo, hi in (
      ("prenorm", 48, 1.25e-4, 3.2e-2),
      ("deepnorm", 48, 1.25e-4, 4e-3),
      ("deepnorm", 48, 8e-3, 3.2e-2),
      ("postnorm", 48, 1.25e-4, 3.2e-2),
    )
  },
  **{
    f"lr_sensitivity.seeds:{prefix}": (RESULTS_MD_NAME, functools.partial(seeds_slash, prefix))
    for prefix in (
      "deepnorm-L24-lr0.002",
      "deepnorm-L24-lr0.008",
      "prenorm-L24-lr0.004",
      "prenorm-L24-lr0.032",
    )
  },
  **{
    f"lr_sensitivity.sensitivity_value:{v}:L6": (
      RESULTS_MD_NAME,
      functools.partial(sensitivity_value, v, (6,)),
    )
    for v in (
      "sandwich",
      "subln",
      "hyperconn",
      "dyt",
      "postnorm",
      "deepnorm",
      "prenorm",
      "denseformer",
      "valueres",
      "mhc",
      "derf",
      "hybridnorm",
    )
  },  # fmt: skip
  "lr_sensitivity.best_loss_mean:deepnorm:L6": (
    RESULTS_MD_NAME,
    functools.partial(sensitivity_value, "deepnorm", (6,), "best_loss"),
  ),
  "lr_sensitivity.mhc_divided.diverged_steps": (RESULTS_MD_NAME, lambda: mhc_divided_steps()),
  "lr_sensitivity.gap:mhc-below-prenorm:L24": (
    RESULTS_MD_NAME,
    functools.partial(variant_gap, "mhc", "prenorm", 24, (2e-3, 4e-3, 8e-3)),
  ),
  "lr_sensitivity.gap:derf-above-prenorm:L24": (
    RESULTS_MD_NAME,
    functools.partial(variant_gap, "prenorm", "derf", 24, (2e-3, 4e-3)),
  ),
  **{
    f"lr_sensitivity.trend_count:{sel}:{t or 'all'}": (
      RESULTS_MD_NAME,
      functools.partial(trend_count, sel, t),
    )
    for sel, trends in (
      ("plateau", (None, "flat", "falling", "rising")),
      ("prenorm_right", (None, "rising", "flat", "falling")),
    )
    for t in trends
  },
  "lr_sensitivity.all_falling:trained": (
    RESULTS_MD_NAME,
    functools.partial(all_falling, status.TRAINED),
  ),
  "lr_sensitivity.max_slope:trained": (
    RESULTS_MD_NAME,
    functools.partial(max_slope, status.TRAINED),
  ),
  "lr_sensitivity.max_slope:plateau": (RESULTS_MD_NAME, functools.partial(max_slope, "plateau")),
  **{
    f"lr_sensitivity.slope:{n}": (RESULTS_MD_NAME, functools.partial(slope_value, n))
    for n in (
      "postnorm-L24-lr0.000125-s1",
      "postnorm-L48-lr0.000125-s0",
      "postnorm-L12-lr0.0005-s1",
    )
  },
  "lr_sensitivity.plateau_lrs:deepnorm": (
    RESULTS_MD_NAME,
    functools.partial(plateau_lrs, "deepnorm", (6, 12, 24, 48)),
  ),
  "lr_sensitivity.loss_range:postnorm:L24": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "postnorm", 24, 1.25e-4, 3.2e-2),
  ),
  "lr_sensitivity.loss_range:deepnorm:L24:from8e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "deepnorm", 24, 8e-3, 3.2e-2),
  ),
  "lr_sensitivity.evals_at_50:L48:plateau": (
    RESULTS_MD_NAME,
    functools.partial(
      grid_evals_at, (("postnorm", 48, 2e-3, 3.2e-2), ("deepnorm", 48, 8e-3, 3.2e-2)), 50
    ),
  ),
  "lr_sensitivity.evals_at_50:L48:postnorm_to_1e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_evals_at, (("postnorm", 48, 1.25e-4, 1e-3),), 50),
  ),
  "lr_sensitivity.lowest_range:postnorm:L24:5e-4-1.6e-2": (
    RESULTS_MD_NAME,
    functools.partial(grid_lowest_range, "postnorm", 24, 5e-4, 1.6e-2),
  ),
  **{
    f"lr_sensitivity.lowest:{run}": (
      RESULTS_MD_NAME,
      functools.partial(eval_lowest, os.path.join(GRID_RUNS, run)),
    )
    for run in ("postnorm-L24-lr0.000125-s0", "postnorm-L24-lr0.00025-s0")
  },
  "lr_sensitivity.eval_range:deepnorm-L24-lr0.004-s2:50-1000": (
    RESULTS_MD_NAME,
    functools.partial(eval_range, os.path.join(GRID_RUNS, "deepnorm-L24-lr0.004-s2"), 50, 1000, 3),
  ),
  "lr_sensitivity.eval_range:postnorm-L48-lr0.000125-s0:500-": (
    RESULTS_MD_NAME,
    functools.partial(
      eval_range, os.path.join(GRID_RUNS, "postnorm-L48-lr0.000125-s0"), 500, None, 3
    ),
  ),
  **{
    f"xiong_rescue.eval:stdlib-L24-constant-lr0.00025-w0-s0:{step}": (
      RESULTS_MD_NAME,
      functools.partial(
        eval_range, "docs/xiong_rescue/runs/stdlib-L24-constant-lr0.00025-w0-s0", step, step, 3
      ),
    )
    for step in (750, 1000)
  },
  "lr_sensitivity.eval_at_1000:above_edge": (
    RESULTS_MD_NAME,
    functools.partial(evals_at, ABOVE_EDGE, 1000),
  ),
  "lr_sensitivity.eval_below:postnorm-L12-lr0.0005-s1:800": (
    RESULTS_MD_NAME,
    functools.partial(eval_below, os.path.join(GRID_RUNS, "postnorm-L12-lr0.0005-s1"), 800),
  ),
  "lr_sensitivity.cell_range:deepnorm:L6-12:8e-3": (
    RESULTS_MD_NAME,
    functools.partial(cell_range, "deepnorm", (6, 12), 8e-3),
  ),
  "lr_sensitivity.escape_steps:deepnorm:L6-12:4e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_escape_steps, "deepnorm", (6, 12), 4e-3),
  ),
  **{
    f"lr_sensitivity.late_slope:{n}": (RESULTS_MD_NAME, functools.partial(late_slope, p, n))
    for p, n in _TRENDS
    if n.endswith("-s0") and not n.startswith("hybridnorm")
  },
  **{
    f"lr_sensitivity.late_trend:{n}": (RESULTS_MD_NAME, functools.partial(late_trend, p, n))
    for p, n in _TRENDS
    if n not in _LEFT
  },
  "lr_sensitivity.late_trend:left_edge": (RESULTS_MD_NAME, functools.partial(late_trends, _LEFT)),
  "lr_sensitivity.late_trend:hybridnorm-L24": (
    RESULTS_MD_NAME,
    functools.partial(
      late_trends, tuple(f"hybridnorm-L24-lr{lr}-s0" for lr in ("0.002", "0.004", "0.008"))
    ),
  ),
  **{
    f"lr_sensitivity.count:{o}:{v}:L{d}:{lr_text(lr)}": (
      RESULTS_MD_NAME,
      functools.partial(grid_count, v, d, lr, o),
    )
    for o, v, d, lr in (
      (status.TRAINED, "postnorm", 6, 2e-3),
      (status.TRAINED, "postnorm", 6, 4e-3),
      (status.TRAINED, "postnorm", 12, 5e-4),
      (status.TRAINED, "postnorm", 12, 1e-3),
      (status.TRAINED, "postnorm", 24, 1.25e-4),
      (status.STUCK, "postnorm", 24, 1.25e-4),
      (status.TRAINED, "deepnorm", 6, 4e-3),
      (status.TRAINED, "deepnorm", 12, 4e-3),
      (status.TRAINED, "deepnorm", 24, 4e-3),
      (status.TRAINED, "deepnorm", 24, 2e-3),
      (status.TRAINED, "deepnorm", 6, 8e-3),
      (status.TRAINED, "deepnorm", 12, 8e-3),
      (status.TRAINED, "deepnorm", 24, 8e-3),
      (status.TRAINED, "prenorm", 6, 4e-3),
      (status.TRAINED, "prenorm", 12, 4e-3),
      (status.TRAINED, "prenorm", 24, 4e-3),
      (status.TRAINED, "prenorm", 6, 3.2e-2),
      (status.TRAINED, "prenorm", 12, 3.2e-2),
      (status.TRAINED, "prenorm", 24, 3.2e-2),
    )
  },
  **{
    f"lr_sensitivity.best_loss:{v}:L{d}": (RESULTS_MD_NAME, functools.partial(grid_best_loss, v, d))
    for v in ("prenorm",)
    for d in (6, 12, 24)
  },
  "lr_sensitivity.loss_range:postnorm:L48": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "postnorm", 48, 1.25e-4, 3.2e-2),
  ),
  "lr_sensitivity.loss_range:deepnorm:L48:from8e-3": (
    RESULTS_MD_NAME,
    functools.partial(grid_loss_range, "deepnorm", 48, 8e-3, 3.2e-2),
  ),
  "lr_sensitivity.eval_range:postnorm:L48:from500": (
    RESULTS_MD_NAME,
    functools.partial(grid_eval_range, "postnorm", 48, 1.25e-4, 3.2e-2, 500),
  ),
  "lr_sensitivity.depth48.lower_to_2e-3": (
    RESULTS_MD_NAME,
    functools.partial(depth_shift, ("prenorm", "deepnorm"), 0, 2e-3, True),
  ),
  "lr_sensitivity.depth48.higher_at_4e-3": (
    RESULTS_MD_NAME,
    functools.partial(depth_shift, ("prenorm", "deepnorm"), 4e-3, 4e-3, False),
  ),
  **{
    f"lr_sensitivity.eval_range:{run}:{a}-{b}": (
      RESULTS_MD_NAME,
      functools.partial(eval_range, os.path.join(GRID_RUNS, run), a, b, 3),
    )
    for run, a, b in (
      ("deepnorm-L6-lr0.008-s0", 50, 150),
      ("deepnorm-L24-lr0.008-s2", 50, 50),
      ("postnorm-L6-lr0.004-s0", 100, 550),
    )
  },
  "lr_sensitivity.eval_no_context": (
    RESULTS_MD_NAME,
    lambda: eval_no_context(os.path.join(GRID_RUNS, "postnorm-L48-lr0.00025-s0")),
  ),
  "valueres.L24.seed0.below_prenorm": (RESULTS_MD_NAME, valueres_seed0_below),
  "valueres.L24.lr4e-3.minus_prenorm": (
    RESULTS_MD_NAME,
    lambda: valueres_contrast() or "not run on 2 or more seeds each",
  ),
}


# docs/lr_sensitivity/mhc_divided_sinkhorn/: the two mHC grid points as first run, with the
# exp-then-divide Sinkhorn; its README's prose reads their summary.json.
MHC_DIVIDED_README = os.path.join(
  ROOT, "docs", "lr_sensitivity", "mhc_divided_sinkhorn", "README.md"
)
MHC_DIVIDED_RUNS = (
  "docs/lr_sensitivity/mhc_divided_sinkhorn/mhc-L6-lr0.016-s0",
  "docs/lr_sensitivity/mhc_divided_sinkhorn/mhc-L6-lr0.032-s0",
)


def mhc_divided_steps() -> str:
  """'413 and 66': the divided-Sinkhorn runs' `diverged_step`, in MHC_DIVIDED_RUNS' order."""
  return " and ".join(step_text(run_summary(r).get("diverged_step")) for r in MHC_DIVIDED_RUNS)


def mhc_divided_train_losses() -> str:
  """'2.408 and 2.796': the divided-Sinkhorn runs' `final_train_loss` (the last logged)."""
  return " and ".join(f"{float(run_summary(r)['final_train_loss']):.3f}" for r in MHC_DIVIDED_RUNS)


# Numbers in docs/lr_sensitivity/mhc_divided_sinkhorn/README.md's prose.
DOC_FACTS: dict[str, doc_sections.Fact] = {
  "lr_sensitivity.mhc_divided.diverged_steps": (MHC_DIVIDED_README, mhc_divided_steps),
  "lr_sensitivity.mhc_divided.final_train_losses": (MHC_DIVIDED_README, mhc_divided_train_losses),
}
