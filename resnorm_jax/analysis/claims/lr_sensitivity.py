"""The README's rows of the loss-vs-lr grid over depth (docs/lr_sensitivity/; the analysis
is resnorm_jax/analysis/lr_sensitivity.py): the edges, Pre-LN without warmup, the 2025-26
variants, value residuals over seeds; and the one-sentence answer on top of Results."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence

import resnorm_jax
from resnorm_jax.analysis.claims.docs_data import (
  Claim,
  lr_text,
  optional,
  read,
  seeds_text,
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
