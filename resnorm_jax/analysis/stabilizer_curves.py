"""Pre-LN's loss-vs-lr curve with each stabilizer beside Pre-LN's own (docs/stabilizers/):
the finished `prenorm-<stabilizer>-L<depth>-lr<lr>-s<seed>` runs of the grid
configs/sweeps/stabilizers.py's CURVES (the loss-vs-lr protocol: 1,000 steps, constant lr, no
warmup) and plain Pre-LN's runs of the loss-vs-lr grid at the same depths, seeds and budget,
as curves.csv's rows (each point, Pre-LN's at the same depth, lr and seed, the difference),
and the markdown tables of them, as docs/stabilizers/README.md shows them (its generated
sections, claims/stabilizers.py's DOC_SECTIONS, render them from curves.csv): final eval losses
per depth with each curve's best lr; where a stabilizer has more than one seed at a point, its
seeds' range beside Pre-LN's; Muon's own 6-layer curve, and Muon's curves across depth under
sp and CompleteP. The rows may be curves.csv's (every column a string) or table()'s.
stabilizer_curves_figure.py draws curves.png; scripts/stabilizer_curves.py writes both.
No JAX here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from resnorm_jax.analysis import lr_sweep_rows  # (no JAX)
from resnorm_jax.analysis.claims.stabilizers import PARAMETRIZED, label  # the README's names
from resnorm_jax.analysis.style import lr_label
from resnorm_jax.files import csv_table

NAME = re.compile(
  r"^prenorm-(?P<stab>[a-z0-9_-]+?)-L(?P<depth>\d+)-lr(?P<lr>[0-9.e-]+)-s(?P<seed>\d+)$"
)
COLUMNS = (
  "stabilizer", "num_layers", "opt.lr", "seed", "final_eval_loss", "outcome",
  "prenorm_final_eval_loss", "difference",
)  # fmt: skip


def stabilizer_rows(runs: str) -> list[dict]:
  """The finished curve points of `runs`: the stabilizer from the folder's name (Muon's runs
  under a depth parametrization are `muon-sp`, `muon-completep`)."""
  out = []
  for r in lr_sweep_rows.finished_rows(runs):
    m = NAME.match(r["name"])
    if m and int(r["train.steps"] or 0) == 1000:
      out.append({**r, "stabilizer": m["stab"]})
  return out


def baseline_rows(runs: str, depths: set[int]) -> list[dict]:
  """Pre-LN's finished runs in the loss-vs-lr grid's folder at `depths`, on the same protocol
  (1,000 steps, constant lr, no warmup)."""
  return [
    r
    for r in lr_sweep_rows.finished_rows(runs)
    if r["variant"] == "prenorm" and r["num_layers"] in depths
    and int(r["train.steps"] or 0) == 1000 and r["opt.schedule"] == "constant"
  ]  # fmt: skip


def key(r: dict) -> tuple[int, float, int]:
  return int(r["num_layers"]), float(r["opt.lr"]), int(r["seed"])


# The curve tables' names (docs/stabilizers/README.md's): plain Pre-LN's curve, and softcapping
# by its technique's name; every other stabilizer by claims/stabilizers.py's label.
CURVE_LABELS = {"none": "Pre-LN"}
MUON = "muon"  # Muon under sp, the default parametrization (`muon-sp` is the same config)
# Where CompleteP's Muon is sp's model (the grid's model.base_depth): one row, "(either)".
MUON_BASE_DEPTH = 6


def curve_label(name: str) -> str:
  """A curve's name in the tables: 'Pre-LN' for plain Pre-LN, else label()'s (a variant's
  own LABEL: 'logit softcap')."""
  return CURVE_LABELS.get(name) or label(name)


def _loss(r: dict) -> float | None:
  """A row's final eval loss; None where it has none (a point not finished)."""
  v = r["final_eval_loss"]
  return None if v is None or v == "" else float(v)


def _seed0_at(r: dict, depth: int) -> bool:
  return int(r["num_layers"]) == depth and int(r["seed"]) == 0


def table(rows: list[dict], baseline: list[dict]) -> list[dict]:
  """curves.csv's rows: each stabilizer's points and plain Pre-LN's own (`none`)."""
  base = {key(b): b["final_eval_loss"] for b in baseline}
  out = []
  for r in [*rows, *({**b, "stabilizer": "none"} for b in baseline)]:
    (depth, lr, seed), loss = key(r), r["final_eval_loss"]
    b = base.get((depth, lr, seed))
    finite = b is not None and loss is not None and math.isfinite(b) and math.isfinite(loss)
    out.append({
      "stabilizer": r["stabilizer"], "num_layers": depth, "opt.lr": f"{lr:g}", "seed": seed,
      "final_eval_loss": f"{loss:.4f}" if loss is not None else "", "outcome": r["outcome"],
      "prenorm_final_eval_loss": f"{b:.4f}" if b is not None else "",
      "difference": f"{loss - b:+.4f}" if finite else "",
    })  # fmt: skip
  return sorted(out, key=lambda r: (r["num_layers"], r["stabilizer"], float(r["opt.lr"])))


def markdown(rows: list[dict], depth: int) -> str:
  """Final eval loss, stabilizers down and lrs across, at one depth (seed 0): Pre-LN first,
  under it its seeds' range (seed_spread), then each stabilizer in its key's order, by
  curve_label; Muon's parametrized curves (PARAMETRIZED) are muon_depth_markdown's. Bold: the
  best of a curve's finite points where two or more ran; `best lr`: best_lr's. Empty where no
  curve has a point at `depth`."""
  base = plain(rows)
  here = [r for r in rows if _seed0_at(r, depth) and r["stabilizer"] not in ("none", *PARAMETRIZED)]
  lrs = sorted({float(r["opt.lr"]) for r in here} | {k[1] for k in base if k[0] == depth})
  if not lrs:
    return ""
  cells = {(r["stabilizer"], float(r["opt.lr"])): _loss(r) for r in here}
  cells |= {("none", lr): loss for (d, lr, s), loss in base.items() if d == depth and s == 0}
  names = ["none", *sorted({r["stabilizer"] for r in here})]
  head = "| stabilizer (lr) | " + " | ".join(f"{lr:g}" for lr in lrs) + " | best lr |"
  lines = [head, "| --- " * (len(lrs) + 2) + "|"]
  for n in names:
    lines.append(points_row(curve_label(n), {lr: cells.get((n, lr)) for lr in lrs}))
    if n == "none":
      spread = seed_spread(base, depth, lrs)
      if spread:
        lines.append(spread)
  return "\n".join(lines)


def points_row(name: str, row: dict[float, float | None], lr_text: Callable = "{:g}".format) -> str:
  """A table row of one curve: its final eval loss at each lr of `row` (4 decimals, blank where
  not run, bold at the best of its finite points where two or more ran) and best_lr's."""
  done = {lr: v for lr, v in row.items() if v is not None and math.isfinite(v)}
  best = min(done, key=done.get) if len(done) > 1 else None
  text = [
    f"**{v:.4f}**" if lr == best else (f"{v:.4f}" if v is not None else "") for lr, v in row.items()
  ]
  return f"| {name} | " + " | ".join(text) + f" | {best_lr(done, lr_text)} |"


def seed_spread(base: dict, depth: int, lrs: list[float]) -> str:
  """The row under Pre-LN's: its seeds' range at each lr where more than one seed ran (the
  yardstick for a stabilizer's one-seed point); empty where no lr has two."""
  cells = []
  for lr in lrs:
    v = [loss for (d, x, _), loss in base.items() if d == depth and x == lr]
    cells.append(f"{min(v):.4f}-{max(v):.4f} ({len(v)})" if len(v) > 1 else "")
  if not any(cells):
    return ""
  return "| Pre-LN, its seeds' range (n) | " + " | ".join(cells) + " | |"


def best_lr(done: dict[float, float], lr_text: Callable = "{:g}".format) -> str:
  """The lowest-loss lr of the finite points run, said only as far as they bracket it: the
  lr where both a lower and a higher lr were run and lost more; `<= lr` or `>= lr` where
  the best is the lowest or highest lr run (the optimum may lie beyond); blank for fewer
  than two points. The lr written by `lr_text` (0.004; lr_label's 4e-3)."""
  if len(done) < 2:
    return ""
  best = min(done, key=done.get)
  if best == min(done):
    return f"<= {lr_text(best)}"
  if best == max(done):
    return f">= {lr_text(best)}"
  return lr_text(best)


def seeds_markdown(rows: list[dict]) -> str:
  """Where a stabilizer has more than one seed at a (depth, lr): its seeds' final eval losses
  beside plain Pre-LN's seeds at the same point, and whether the two ranges are apart; by
  depth, lr and the stabilizer's key. Empty where no stabilizer has two seeds at a point."""
  groups: dict[tuple[str, int, float], list[float]] = {}
  for r in rows:
    if (loss := _loss(r)) is not None:
      groups.setdefault((r["stabilizer"], int(r["num_layers"]), float(r["opt.lr"])), []).append(
        loss
      )
  lines = [
    "| stabilizer | layers | lr | seeds | final eval loss | Pre-LN's seeds | Pre-LN | apart |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for (name, depth, lr), losses in sorted(
    groups.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])
  ):
    if name == "none" or len(losses) < 2:
      continue
    base = groups.get(("none", depth, lr), [])
    span = lambda v: f"{min(v):.4f}-{max(v):.4f}" if v else ""  # noqa: E731
    apart = bool(base) and (max(losses) < min(base) or min(losses) > max(base))
    lines.append(
      f"| {curve_label(name)} | {depth} | {lr:g} | {len(losses)} | {span(losses)} | {len(base)} | "
      f"{span(base)} | {'yes' if apart else 'no' if base else ''} |"
    )
  return "\n".join(lines) if len(lines) > 2 else ""


def muon_curve_markdown(rows: list[dict], depth: int = MUON_BASE_DEPTH) -> str:
  """Muon's own seed-0 curve at `depth` (under sp): lrs across as the docs write them, one row
  of final eval losses (4 decimals); empty where none finished."""
  points = {
    float(r["opt.lr"]): loss
    for r in rows
    if r["stabilizer"] == MUON and _seed0_at(r, depth) and (loss := _loss(r)) is not None
  }
  if not points:
    return ""
  lrs = sorted(points)
  return "\n".join([
    "| lr | " + " | ".join(lr_label(lr) for lr in lrs) + " |",
    "| --- " * (len(lrs) + 1) + "|",
    "| final eval loss | " + " | ".join(f"{points[lr]:.4f}" for lr in lrs) + " |",
  ])  # fmt: skip


def muon_depth_markdown(rows: list[dict]) -> str:
  """Muon's seed-0 curves across depth, a row per (depth, parametrization): sp (`muon`, or
  `muon-sp`, the same config) then CompleteP (`muon-completep`); at MUON_BASE_DEPTH the two are
  one model, one row '(either)'. Across: the lrs run at the deeper depths (every row at those
  lrs only); bold and `best lr` as markdown's, the lr as lr_label writes it. Empty where no
  deeper depth ran."""
  params = {MUON: "sp", **PARAMETRIZED}  # in its order: `muon`'s point first where both ran
  points: dict[tuple[int, str], dict[float, float]] = {}
  for name, param in params.items():
    for r in rows:
      if r["stabilizer"] == name and int(r["seed"]) == 0 and (loss := _loss(r)) is not None:
        depth = int(r["num_layers"])
        here = points.setdefault((depth, "either" if depth == MUON_BASE_DEPTH else param), {})
        here.setdefault(float(r["opt.lr"]), loss)
  lrs = sorted({lr for (depth, _), p in points.items() if depth != MUON_BASE_DEPTH for lr in p})
  if not lrs:
    return ""
  lines = [
    "| depth, parametrization | " + " | ".join(lr_label(lr) for lr in lrs) + " | best lr |",
    "| --- " * (len(lrs) + 2) + "|",
  ]
  order = ["either", "sp", "CompleteP"]
  for (depth, param), p in sorted(points.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
    name = f"{depth} layers (either)" if param == "either" else f"{depth} layers, {param}"
    lines.append(points_row(name, {lr: p.get(lr) for lr in lrs}, lr_label))
  return "\n".join(lines)


def plain(rows: list[dict]) -> dict[tuple[int, float, int], float]:
  """(depth, lr, seed) -> plain Pre-LN's final eval loss, from curves.csv's `none` rows."""
  return {
    key(r): loss for r in rows if r["stabilizer"] == "none" and (loss := _loss(r)) is not None
  }


def write_csv(path: str, rows: list[dict]) -> None:
  """curves.csv: `rows` (table's) under COLUMNS."""
  csv_table.write_csv(path, rows, COLUMNS, lineterminator="\n")
