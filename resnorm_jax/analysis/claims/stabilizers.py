"""The README's row of the stabilizers at Post-LN's edge (docs/stabilizers/: the grid is
configs/sweeps/stabilizers.py, the tables scripts/survival.py's): each stabilizer's odds of an
escape kept to the end beside plain Post-LN's in the same cell (docs/survival/). No JAX."""

from __future__ import annotations

import functools
import os

from resnorm_jax.analysis.claims.docs_data import (
  ROOT,
  Claim,
  final_loss,
  optional,
  seed_losses,
)
from resnorm_jax.analysis.claims.edges import across, survival_cells
from resnorm_jax.analysis.stats import clopper_pearson
from resnorm_jax.analysis.style import lr_label, variant_label

CELLS = "docs/stabilizers/cells.csv"
BASE = "postnorm"  # the variant every stabilizer's cell is Post-LN plus one key of
# A stabilizer's cell is Post-LN's plus one key: its name is postnorm-<part>. A part that is a
# variant is labelled by its named config (style.variant_label); these parts are keys of the
# core model, the train or the optimizer sections, labelled here.
KEY_LABELS = {
  "qknorm": "qk-norm", "zloss": "z-loss", "adamatan2": "Adam-atan2", "muon": "Muon",
  "muon-sp": "Muon (sp)", "muon-completep": "Muon (CompleteP)",
  # gated attention's controls (claims/gate.py)
  "attnscale": "branch x 0.5 (no gate)", "gatebias": "gate from ~0.93",
  "gatefrozen": "frozen gate", "gatehead": "headwise gate",
}  # fmt: skip
# Optimizers whose edge cells run at their own best lr (configs/sweeps/stabilizers.py's
# MUON_LRS), not at plain Post-LN's: their cells are read against plain Post-LN's odds at the
# edge lr, not a plain cell at theirs.
OWN_LR = ("muon",)
EDGE_DEPTH = 12  # the stabilizers' edge cells (the grid's EDGE); deeper cells are the gate's own
# A cell of fewer seeds is listed with its k/n and marked a screen ('*').
MIN_SEEDS = 4


def kept_odds(cell: dict[str, str]) -> str:
  """'k/n': the escapes kept to the end of n seeds; 'k/n*', a screen, under MIN_SEEDS seeds.
  The kept fraction's 95% interval: interval()."""
  kept, n = int(cell["escaped_for_good"]), int(cell["seeds"])
  return f"{kept}/{n}" + ("*" if n < MIN_SEEDS else "")


def interval(cell: dict[str, str]) -> tuple[float, float]:
  """The 95% interval (Clopper-Pearson) of a cell's kept fraction."""
  return clopper_pearson(int(cell["escaped_for_good"]), int(cell["seeds"]))


def stabilizer_of(variant: str) -> str | None:
  """The part after 'postnorm-' of a stabilizer's cell name; None for another cell's name."""
  part = variant.removeprefix(f"{BASE}-")
  return part if part != variant and part else None


def label(part: str) -> str:
  return KEY_LABELS.get(part) or variant_label(part)


def odds_at_edge(cells: list[dict[str, str]], base: list[dict[str, str]]) -> list[str]:
  """Per (depth, lr) of the stabilizers' cells: 'Post-LN 12L at 1e-3: plain 0/12 (...);
  gated attention 1/1*; ...', the stabilizers by label."""
  groups: dict[tuple[int, float], dict[str, dict[str, str]]] = {}
  for c in cells:
    name = stabilizer_of(c["variant"])
    if name:
      groups.setdefault((int(c["num_layers"]), float(c["lr"])), {})[name] = c
  out = []
  for (depth, lr), by_name in sorted(groups.items()):
    plain = [
      c
      for c in base
      if c["variant"] == BASE and int(c["num_layers"]) == depth and float(c["lr"]) == lr
    ]
    if not plain and set(by_name) <= set(OWN_LR):
      for n in sorted(by_name, key=label):
        out.append(
          f"Post-LN {depth}L, {label(n)} at its 6L best lr {lr_label(lr, 4)}: "
          f"{kept_odds(by_name[n])}"
        )
      continue
    if plain:
      lo, hi = interval(plain[0])
      parts = [f"plain {kept_odds(plain[0])} (95% {lo:.2f}-{hi:.2f})"]
    else:
      parts = ["plain not run"]
    parts += [f"{label(n)} {kept_odds(by_name[n])}" for n in sorted(by_name, key=label)]
    out.append(f"Post-LN {depth}L at {lr_label(lr, 4)}: " + "; ".join(parts))
  return out


# The gate's controls have their row and section (claims/gate.py), not a stabilizer's.
CONTROLS = ("attnscale", "gatebias", "gatefrozen", "gatehead")


def row_stabilizers() -> Claim | None:
  # each stabilizer at the edge cell, 1e-3 (Muon at its own lr); the gate's cells at other lrs
  # are where its edge moves, its own row's (claims/gate.py)
  cells = [
    c
    for c in optional(CELLS)
    if (part := stabilizer_of(c["variant"])) not in (None, *CONTROLS)
    and int(c["num_layers"]) == EDGE_DEPTH
    and (float(c["lr"]) == 1e-3 or part in OWN_LR)
  ]
  if not cells:
    return None
  horizon = int(cells[0]["horizon"])
  seeds = sorted({int(c["seeds"]) for c in cells})
  n_seeds = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
  frac = lambda c: int(c["escaped_for_good"]) / int(c["seeds"])  # noqa: E731
  best = max(cells, key=frac)
  # the others in the best's cell, and those at their own lr (Muon): the gate's cells at other
  # lrs (where its edge moves, claims/gate.py) are no other stabilizer
  at = lambda c: (c["num_layers"], float(c["lr"])) == (best["num_layers"], float(best["lr"]))  # noqa: E731
  rest = [c for c in cells if c is not best and (at(c) or stabilizer_of(c["variant"]) in OWN_LR)]
  plain = [c for c in survival_cells() if (c["variant"], c["num_layers"], float(c["lr"])) == (
    BASE, best["num_layers"], float(best["lr"]))]  # fmt: skip
  return Claim(
    "What practitioners reach for, at Post-LN's edge",
    f"kept to step {horizon:,}, k/n seeds: "
    + " / ".join(odds_at_edge(cells, survival_cells()))
    + f" (*: under {MIN_SEEDS} seeds)",
    f"{horizon:,} steps, no warmup, constant lr, eval every 25 steps on 8,192 tokens; "
    f"{n_seeds} seed{'s' if seeds != [1] else ''} per stabilizer cell, 12 for plain Post-LN; "
    "stdlib",
    "[stabilizers](docs/stabilizers/survival.png), `docs/stabilizers/cells.csv`",
    f"Post-LN {best['num_layers']}L at {lr_label(float(best['lr']), 4)}: "
    f"{label(stabilizer_of(best['variant']))} keeps the escape on {kept_odds(best)} seeds"
    + (f", plain on {kept_odds(plain[0])}" if plain else "")
    + (f"; the other {len(rest)} at most {kept_odds(max(rest, key=frac))}" if rest else ""),
    f"{horizon:,} steps; {n_seeds} seeds per cell, 12 for plain",
  )


CURVES = "docs/stabilizers/curves.csv"  # scripts/stabilizer_curves.py's


def curve_bests(
  rows: list[dict[str, str]], depth: int
) -> list[tuple[str, float, float, int, bool]]:
  """Per curve at `depth` (seed 0), plain Pre-LN first: (who, best lr, its final eval loss,
  lrs run, whether the best is at an end of a partial curve's lrs: not bracketed)."""
  here = [r for r in rows if int(r["num_layers"]) == depth and r["seed"] == "0"]
  grid = {float(r["opt.lr"]) for r in here if r["stabilizer"] == "none"}
  names = ["none", *sorted({r["stabilizer"] for r in here} - {"none"}, key=label)]
  out = []
  for name in names:
    points = {float(r["opt.lr"]): float(r["final_eval_loss"]) for r in here
              if r["stabilizer"] == name and r["final_eval_loss"]}  # fmt: skip
    if not points:
      continue
    lr = min(points, key=points.get)
    edge = len(points) < len(grid) and lr in (min(points), max(points))
    out.append(("plain" if name == "none" else label(name), lr, points[lr], len(points), edge))
  return out


def curves_text(rows: list[dict[str, str]], depth: int, most: int = 3) -> str:
  """'Pre-LN 6L: 4e-3 for plain (1.7646), gated attention (1.7551); 8e-3 for Muon (1.5381)':
  each curve's best lr, grouped by it; '+' marks a best at an end of a partial curve. A group
  of more than `most` stabilizers is told as their count and loss range, to keep the cell
  short: '4e-3 for plain (1.7646) and 6 stabilizers (1.7470-1.7791)'."""
  by_lr: dict[float, list[tuple[str, float, bool]]] = {}
  for who, lr, loss, _, edge in curve_bests(rows, depth):
    by_lr.setdefault(lr, []).append((who, loss, edge))
  parts = []
  for lr, group in sorted(by_lr.items()):
    plain = [f"plain ({loss:.4f})" for who, loss, _ in group if who == "plain"]
    rest = [(who, loss, edge) for who, loss, edge in group if who != "plain"]
    if len(rest) > most:
      losses = [loss for _, loss, _ in rest]
      edges = sum(edge for *_, edge in rest)
      told = [f"{len(rest)} stabilizers ({min(losses):.4f}-{max(losses):.4f})"
              + (f", {edges} of them+" if edges else "")]  # fmt: skip
      parts.append(f"{lr_label(lr)} for " + " and ".join(plain + told))
    else:
      told = [f"{who}{'+' if edge else ''} ({loss:.4f})" for who, loss, edge in rest]
      parts.append(f"{lr_label(lr)} for " + ", ".join(plain + told))
  return f"Pre-LN {depth}L: " + "; ".join(parts)


def lrs_run(rows: list[dict[str, str]], depth: int, most: int = 3) -> str:
  """'9 of 9 lrs: plain, Muon; 3 of 9: the rest', the curves grouped by how many lrs ran;
  '9 of 9 lrs each' where every curve ran the same; a group of more than `most` curves is
  told as its count."""
  bests = curve_bests(rows, depth)
  grid = max((n for who, *_, n, _ in bests if who == "plain"), default=0)
  counts: dict[int, list[str]] = {}
  for who, _, _, n, _ in bests:
    counts.setdefault(n, []).append(who)
  groups = sorted(counts.items(), reverse=True)
  if len(groups) == 1:
    return f"{groups[0][0]} of {grid} lrs each"
  return "; ".join(
    f"{n} of {grid} lrs: "
    + (
      "the rest"
      if i == len(groups) - 1 and i
      else ", ".join(w)
      if len(w) <= most
      else f"{len(w)} curves"
    )  # fmt: skip
    for i, (n, w) in enumerate(groups)
  )


# Muon's curves under a depth parametrization (configs/sweeps/stabilizers.py's last CURVES):
# their own row, row_muon_depth; sp is the default, so `muon` is Muon under sp.
PARAMETRIZED = {"muon-sp": "sp", "muon-completep": "CompleteP"}


def muon_depth_bests(rows: list[dict[str, str]]) -> dict[str, list[tuple[int, float, float, bool]]]:
  """Per parametrization ('sp', 'CompleteP'), Muon's seed-0 best per depth: (depth, best lr,
  its final eval loss, whether it is at an end of the lrs run). `muon` and `muon-sp` are the
  same config and pool."""
  points: dict[tuple[str, int], dict[float, float]] = {}
  for r in rows:
    param = "sp" if r["stabilizer"] == "muon" else PARAMETRIZED.get(r["stabilizer"])
    if param and r["seed"] == "0" and r["final_eval_loss"]:
      here = points.setdefault((param, int(r["num_layers"])), {})
      here[float(r["opt.lr"])] = float(r["final_eval_loss"])
  out: dict[str, list[tuple[int, float, float, bool]]] = {}
  for (param, depth), losses in sorted(points.items(), key=lambda kv: (kv[0][0] != "sp", kv[0][1])):
    lr = min(losses, key=losses.get)
    edge = len(losses) == 1 or lr in (min(losses), max(losses))
    out.setdefault(param, []).append((depth, lr, losses[lr], edge))
  return out


def row_muon_depth() -> Claim | None:
  bests = muon_depth_bests(optional(CURVES))
  if not any(depth > 6 for found in bests.values() for depth, *_ in found):
    return None
  parts, short = [], []
  for param, found in bests.items():
    short.append(
      f"{param} {across([lr_label(lr) for _, lr, _, _ in found], [d for d, *_ in found])}"
    )
    lrs = " / ".join(f"{lr_label(lr)}{'+' if edge else ''}" for _, lr, _, edge in found)
    depths = " / ".join(str(depth) for depth, *_ in found)
    losses = " / ".join(f"{loss:.4f}" for *_, loss, _ in found)
    parts.append(f"{param} {lrs} at {depths}L ({losses})")
  return Claim(
    "Muon's best lr across depth, under sp and CompleteP",
    "best lr (final eval loss), Pre-LN with Muon, seed 0: " + "; ".join(parts),
    "1,000 steps, no warmup, constant lr: 9 lrs at 6L, 4e-3 / 8e-3 / 1.6e-2 deeper; CompleteP "
    "against base depth 6 (6L: the same model as sp); one seed; +: best at an end of the lrs "
    "run; stdlib",
    "[curves](docs/stabilizers/curves.png), `docs/stabilizers/curves.csv`",
    "Pre-LN with Muon's best lr: " + "; ".join(short),
    "1,000 steps; seed 0",
  )


def row_stabilizer_curves() -> Claim | None:
  rows = [r for r in optional(CURVES) if r["seed"] == "0" and r["stabilizer"] not in PARAMETRIZED]
  if not any(r["stabilizer"] != "none" for r in rows):
    return None
  depths = sorted({int(r["num_layers"]) for r in rows if r["stabilizer"] != "none"})
  short = []
  for d in depths:
    bests = curve_bests(rows, d)
    plain = next((lr for who, lr, *_ in bests if who == "plain"), None)
    same = sum(lr == plain for who, lr, *_ in bests if who != "plain")
    apart = [f"{who} {lr_label(lr)}" for who, lr, *_ in bests if lr != plain]
    short.append(
      f"{d}L: plain and {same} of {len(bests) - 1} at {lr_label(plain)}"
      + (f" ({', '.join(apart)})" if apart else "")
    )
  return Claim(
    "What practitioners reach for, on Pre-LN's loss-vs-lr curve",
    "best lr (final eval loss), seed 0: " + " / ".join(curves_text(rows, d) for d in depths),
    "1,000 steps, no warmup, constant lr; "
    + " / ".join(f"{d}L: {lrs_run(rows, d)}" for d in depths)
    + "; one seed; +: best at an end of the lrs run, or the one lr run; stdlib",
    "[curves](docs/stabilizers/curves.png), `docs/stabilizers/curves.csv`",
    "best lr, Pre-LN with each: " + "; ".join(short),
    "1,000 steps; seed 0",
  )


def seeds_apart(rows: list[dict[str, str]], min_seeds: int = 3) -> list[tuple]:
  """(depth, lr, who, n seeds, its loss range, Pre-LN's n seeds, Pre-LN's range) wherever a
  stabilizer and plain Pre-LN each have at least `min_seeds` finished seeds at a point and
  every seed of the one ends below, or above, every seed of the other."""
  groups: dict[tuple[str, int, float], list[float]] = {}
  for r in rows:
    if r["final_eval_loss"]:
      key = (r["stabilizer"], int(r["num_layers"]), float(r["opt.lr"]))
      groups.setdefault(key, []).append(float(r["final_eval_loss"]))
  out = []
  for (name, depth, lr), losses in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2])):
    base = groups.get(("none", depth, lr), [])
    if name == "none" or min(len(losses), len(base)) < min_seeds:
      continue
    if max(losses) < min(base) or min(losses) > max(base):
      span, base_span = (min(losses), max(losses)), (min(base), max(base))
      out.append((depth, lr, label(name), len(losses), span, len(base), base_span))
  return out


def seeds_text(found: list[tuple]) -> str:
  """'6L 4e-3: plain 1.755-1.765; qk-norm 1.779-1.799 / 6L 3.2e-2: ...': seeds_apart's
  points grouped by (depth, lr), plain Pre-LN's range first."""
  groups: dict[tuple[int, float], list[str]] = {}
  for depth, lr, who, _, (lo, hi), _, (blo, bhi) in found:
    here = groups.setdefault((depth, lr), [f"plain {blo:.3f}-{bhi:.3f}"])
    here.append(f"{who} {lo:.3f}-{hi:.3f}")
  return " / ".join(
    f"{depth}L {lr_label(lr)}: {parts[0]}; " + ", ".join(parts[1:])
    for (depth, lr), parts in sorted(groups.items())
  )


def row_stabilizer_seeds() -> Claim | None:
  found = seeds_apart(optional(CURVES))
  if not found:
    return None
  ns = sorted({f[3] for f in found} | {f[5] for f in found})  # its seeds, Pre-LN's
  sides: dict[str, dict[str, list[str]]] = {"below": {}, "above": {}}
  for depth, lr, who, _, (lo, _), _, (_, bhi) in found:
    sides["above" if lo > bhi else "below"].setdefault(f"{depth}L {lr_label(lr)}", []).append(who)
  short = [
    f"{side} plain on every seed: " + "; ".join(f"{', '.join(w)} at {at}" for at, w in g.items())
    for side, g in sides.items()
    if g
  ]
  return Claim(
    "What practitioners reach for, where every seed is apart from plain Pre-LN's",
    "final eval loss, each seed: " + seeds_text(found),
    "1,000 steps, no warmup, constant lr; "
    + "/".join(str(n) for n in ns)
    + " seeds each, the same seeds as plain Pre-LN's; stdlib",
    "[curves](docs/stabilizers/curves.png), `docs/stabilizers/curves.csv`",
    "; ".join(short),
    "1,000 steps; " + "/".join(str(n) for n in ns) + " seeds each",
  )


# The README's Results rows this module states, by their place in the table.
README = os.path.join(ROOT, "docs", "stabilizers", "README.md")
EDGE_BEGIN = "<!-- stabilizers at the edge: written by scripts/claims.py from cells.csv -->"
EDGE_END = "<!-- end of stabilizers at the edge -->"


def render_edge_table() -> str:
  """docs/stabilizers/README.md's table of every stabilizer's cell at 12 layers (at 1e-3, or
  its own lr), plain Post-LN's (docs/survival) first."""
  lines = [
    EDGE_BEGIN,
    "| cell | lr | seeds | escaped | kept to the end | 95% interval | first passages | "
    "kept_p_vs_baseline |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  plain = [
    c for c in survival_cells() if c["variant"] == BASE and int(c["num_layers"]) == EDGE_DEPTH
  ]
  mine = [
    c
    for c in optional(CELLS)
    if (part := stabilizer_of(c["variant"])) not in (None, *CONTROLS)
    and int(c["num_layers"]) == EDGE_DEPTH
    and (float(c["lr"]) == 1e-3 or part in OWN_LR)
  ]
  rows = [("plain Post-LN (docs/survival)", c) for c in plain if float(c["lr"]) == 1e-3]
  rows += [(label(stabilizer_of(c["variant"])), c) for c in sorted(mine, key=_by_label)]
  for name, c in rows:
    lo, hi = interval(c)
    lines.append(
      f"| {name} | {lr_label(float(c['lr']), 4)} | {c['seeds']} | {c['escaped']} | "
      f"{kept_odds(c)} | {lo:.2f}-{hi:.2f} | {c['first_passages']} | "
      f"{c.get('kept_p_vs_baseline', '')} |"
    )
  lines.append(EDGE_END)
  return "\n".join(lines)


def _by_label(cell: dict[str, str]) -> tuple[bool, str]:
  part = stabilizer_of(cell["variant"]) or ""
  return part in OWN_LR, label(part)


# The loss-vs-lr tables (scripts/stabilizer_curves.py prints them): written from curves.csv by
# resnorm_jax/analysis/stabilizer_curves.py's functions (imported when rendered: that module
# imports this one's labels).
def _curve_markers(name: str) -> tuple[str, str]:
  return (
    f"<!-- {name}: written by scripts/claims.py from curves.csv -->",
    f"<!-- end of {name} -->",
  )


MUON_CURVE_BEGIN, MUON_CURVE_END = _curve_markers("Muon curve 6 layers")
MUON_DEPTH_BEGIN, MUON_DEPTH_END = _curve_markers("Muon across depth")
CURVES_6_BEGIN, CURVES_6_END = _curve_markers("stabilizer curves 6 layers")
CURVE_SEEDS_BEGIN, CURVE_SEEDS_END = _curve_markers("stabilizer curves seeds")
CURVES_24_BEGIN, CURVES_24_END = _curve_markers("stabilizer curves 24 layers")


def _curve_section(begin: str, end: str, table: str) -> str:
  return "\n".join([begin, *([table] if table else []), end])


def render_muon_curve() -> str:
  """Muon's own 6-layer curve, seed 0: final eval loss at each lr run."""
  from resnorm_jax.analysis import stabilizer_curves as sc

  return _curve_section(MUON_CURVE_BEGIN, MUON_CURVE_END, sc.muon_curve_markdown(optional(CURVES)))


def render_muon_depth() -> str:
  """Muon's curves at 6, 12 and 24 layers under sp and CompleteP, seed 0, with each best lr."""
  from resnorm_jax.analysis import stabilizer_curves as sc

  return _curve_section(MUON_DEPTH_BEGIN, MUON_DEPTH_END, sc.muon_depth_markdown(optional(CURVES)))


def render_curves(depth: int) -> str:
  """Each stabilizer's seed-0 curve at `depth` beside plain Pre-LN's (its seeds' range under
  it), with each best lr."""
  from resnorm_jax.analysis import stabilizer_curves as sc

  begin, end = {6: (CURVES_6_BEGIN, CURVES_6_END), 24: (CURVES_24_BEGIN, CURVES_24_END)}[depth]
  return _curve_section(begin, end, sc.markdown(optional(CURVES), depth))


def render_curve_seeds() -> str:
  """Where a stabilizer has more than one seed at a point: its range beside plain Pre-LN's."""
  from resnorm_jax.analysis import stabilizer_curves as sc

  return _curve_section(CURVE_SEEDS_BEGIN, CURVE_SEEDS_END, sc.seeds_markdown(optional(CURVES)))


DOC_SECTIONS = (
  (README, EDGE_BEGIN, EDGE_END, render_edge_table),
  (README, MUON_CURVE_BEGIN, MUON_CURVE_END, render_muon_curve),
  (README, MUON_DEPTH_BEGIN, MUON_DEPTH_END, render_muon_depth),
  (README, CURVES_6_BEGIN, CURVES_6_END, functools.partial(render_curves, 6)),
  (README, CURVE_SEEDS_BEGIN, CURVE_SEEDS_END, render_curve_seeds),
  (README, CURVES_24_BEGIN, CURVES_24_END, functools.partial(render_curves, 24)),
)

RUNS = "docs/stabilizers/runs.csv"  # scripts/survival.py's, a row per run
# The first screen: one key each, seeds 0-3 at the 12-layer 1e-3 cell (the README's prose).
SCREEN = ("softcap", "sinks", "qknorm", "zloss", "adamatan2")


def screen_runs() -> list[dict[str, str]]:
  """runs.csv's rows of the SCREEN cells at EDGE_DEPTH and 1e-3."""
  return [
    r
    for r in optional(RUNS)
    if stabilizer_of(r["variant"]) in SCREEN
    and int(r["num_layers"]) == EDGE_DEPTH
    and float(r["opt.lr"]) == 1e-3
  ]


def _never(rows: list[dict[str, str]]) -> list[dict[str, str]]:
  return [r for r in rows if not r["first_passage"]]


def screen_never() -> str:
  """'14 of the 20 runs': the screen's runs never 0.1 below the no-context loss."""
  rows = screen_runs()
  return f"{len(_never(rows))} of the {len(rows)} runs"


def screen_never_gaps() -> str:
  """'-0.0799 to +0.0095': the final eval gaps of the screen's runs that never went below."""
  gaps = sorted(float(r["final_eval_gap"]) for r in _never(screen_runs()))
  return f"{gaps[0]:+.4f} to {gaps[-1]:+.4f}" if gaps else "none"


def screen_fell_back() -> str:
  """'5': the screen's runs that went below and did not stay (no escape kept to the end)."""
  return str(sum(1 for r in screen_runs() if r["first_passage"] and not r["escape_step"]))


def _plain_edge_cell() -> dict[str, str]:
  """Plain Post-LN's edge cell, 12 layers at 1e-3 (docs/survival's cells.csv)."""
  return next(
    c
    for c in survival_cells()
    if c["variant"] == BASE and int(c["num_layers"]) == EDGE_DEPTH and float(c["lr"]) == 1e-3
  )


def plain_never() -> str:
  """'11 of plain Post-LN's 12 seeds': plain Post-LN's edge cell (docs/survival)."""
  cell = _plain_edge_cell()
  return f"{int(cell['seeds']) - int(cell['escaped'])} of plain Post-LN's {cell['seeds']} seeds"


def plain_escaped() -> str:
  """'1 of 12': the seeds of plain Post-LN's edge cell that escaped (kept or not)."""
  cell = _plain_edge_cell()
  return f"{cell['escaped']} of {cell['seeds']}"


# The loss-vs-lr sections: numbers read off several runs at once, each run a folder under
# STAB_RUNS (a stabilizer's, prenorm-<key>-L<depth>-lr<lr>-s<seed>) or PLAIN_RUNS (plain
# Pre-LN's, prenorm-L<depth>-lr<lr>-s<seed>); one run's loss, or one against another, is a run
# fact (docs_data.run_fact: loss=, range=, seeds=, vs=).
STAB_RUNS = "docs/stabilizers/runs"
PLAIN_RUNS = "docs/lr_sensitivity/runs"
# The six stabilizers of Pre-LN's curves, by their cells' run names (Muon, another optimizer,
# is not one of them); a stabilizer's key is its part after "prenorm-".
CURVE_CELLS = (
  "prenorm-adamatan2",
  "prenorm-attngate",
  "prenorm-qknorm",
  "prenorm-sinks",
  "prenorm-softcap",
  "prenorm-zloss",
)
CURVE_KEYS = tuple(c.removeprefix("prenorm-") for c in CURVE_CELLS)


def apart(spans: tuple[str, ...], other: str, digits: int = 2) -> str:
  """'0.21-0.23 below': how far every seed of `spans` (seed spans, their seeds pooled) ends
  below, or above, every seed of `other`: the smallest and the largest distance between a seed
  of the one and a seed of the other, `digits` decimals (one number when the two round alike);
  'overlapping' when neither side is apart, 'not run' when a seed is missing."""
  found = [seed_losses(s) for s in (*spans, other)]
  if any(not f for f in found):
    return "not run"
  mine, theirs = [v for f in found[:-1] for v in f], found[-1]
  if max(mine) < min(theirs):
    side, near, far = "below", min(theirs) - max(mine), max(theirs) - min(mine)
  elif min(mine) > max(theirs):
    side, near, far = "above", min(mine) - max(theirs), max(mine) - min(theirs)
  else:
    return "overlapping"
  near_text, far_text = f"{near:.{digits}f}", f"{far:.{digits}f}"
  return f"{near_text if near_text == far_text else f'{near_text}-{far_text}'} {side}"


def largest_gap(
  keys: tuple[str, ...], lrs: tuple[str, ...], depth: int = 6, digits: int = 4
) -> str:
  """'0.0535': the largest distance, seed 0, between a stabilizer's final eval loss and plain
  Pre-LN's at the same depth and lr, over `keys` (prenorm-<key>) and `lrs` (as the run folders
  write them: '0.000125'), each loss to `digits` decimals first (as the tables show them);
  'not run' when a run is missing."""
  gaps = []
  for lr in lrs:
    plain = final_loss(f"{PLAIN_RUNS}/prenorm-L{depth}-lr{lr}-s0")
    for key in keys:
      mine = final_loss(f"{STAB_RUNS}/prenorm-{key}-L{depth}-lr{lr}-s0")
      if plain is None or mine is None:
        return "not run"
      gaps.append(abs(round(mine, digits) - round(plain, digits)))
  return f"{max(gaps):.{digits}f}"


def _span(root: str, name: str, depth: int, lr: str, seeds: str = "0..2") -> str:
  return f"{root}/{name}-L{depth}-lr{lr}-s{seeds}"


def _stab(key: str, depth: int, lr: str, seeds: str = "0..2") -> str:
  """A stabilizer's seed span: 'docs/stabilizers/runs/prenorm-qknorm-L6-lr0.004-s0..2'."""
  return _span(STAB_RUNS, f"prenorm-{key}", depth, lr, seeds)


def _plain(depth: int, lr: str, seeds: str = "0..2") -> str:
  """Plain Pre-LN's seed span: 'docs/lr_sensitivity/runs/prenorm-L6-lr0.004-s0..2'."""
  return _span(PLAIN_RUNS, "prenorm", depth, lr, seeds)


# Numbers in docs/stabilizers/README.md's prose: `<!-- fact:NAME -->text<!-- /fact -->`.
DOC_FACTS = {
  "stabilizers.screen.never": (README, screen_never),
  "stabilizers.screen.never_gaps": (README, screen_never_gaps),
  "stabilizers.screen.fell_back": (README, screen_fell_back),
  "stabilizers.plain_never": (README, plain_never),
  "stabilizers.plain_escaped": (README, plain_escaped),
  # Pre-LN's loss-vs-lr curves: seeds 0-2 apart from plain Pre-LN's at its best lr, 4e-3
  "stabilizers.L6.lr0.004.above_plain": (
    README,
    functools.partial(
      apart, (_stab("adamatan2", 6, "0.004"), _stab("qknorm", 6, "0.004")), _plain(6, "0.004"), 3
    ),
  ),
  "stabilizers.L6.muon.below_plain": (
    README,
    functools.partial(apart, (_stab("muon", 6, "0.008"),), _plain(6, "0.004")),
  ),
  # ... and at 3.2e-2
  **{
    f"stabilizers.L6.lr0.032.{key}.below_plain": (
      README,
      functools.partial(apart, (_stab(key, 6, "0.032"),), _plain(6, "0.032")),
    )
    for key in (
      c.removeprefix("prenorm-") for c in ("prenorm-qknorm", "prenorm-softcap", "prenorm-attngate")
    )
  },
  # seed 0 below the best lr: every stabilizer, and sinks, softcapping and the z-loss at two lrs
  "stabilizers.L6.low_lrs.largest_gap": (
    README,
    functools.partial(largest_gap, CURVE_KEYS, ("0.000125", "0.00025", "0.0005", "0.001")),
  ),
  "stabilizers.L6.lr0.0005-0.001.near_plain": (
    README,
    functools.partial(largest_gap, ("sinks", "softcap", "zloss"), ("0.0005", "0.001")),
  ),
  # 24 layers: Muon's seed 0 at its best against plain Pre-LN's five seeds at theirs
  "stabilizers.L24.muon.below_plain": (
    README,
    functools.partial(apart, (_stab("muon", 24, "0.008", "0..0"),), _plain(24, "0.004", "0..4")),
  ),
}
README_ROWS = {
  25: row_stabilizers,
  26: row_stabilizer_curves,
  27: row_stabilizer_seeds,
  28: row_muon_depth,
}
