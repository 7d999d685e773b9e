"""Pre-LN's loss-vs-lr curve with each stabilizer beside Pre-LN's own (docs/stabilizers/):
the finished `prenorm-<stabilizer>-L<depth>-lr<lr>-s<seed>` runs of the grid
configs/sweeps/stabilizers.py's CURVES (the loss-vs-lr protocol: 1,000 steps, constant lr, no
warmup) and plain Pre-LN's runs of the loss-vs-lr grid at the same depths, seeds and budget,
as curves.csv's rows (each point, Pre-LN's at the same depth, lr and seed, the difference),
and the markdown tables of them: final eval losses per depth with each curve's best lr, and
where a stabilizer has more than one seed at a point, its seeds' range beside Pre-LN's.
stabilizer_curves_figure.py draws curves.png; scripts/stabilizer_curves.py writes both.
No JAX here.
"""

from __future__ import annotations

import math
import re

from resnorm_jax.analysis import lr_sweep_rows  # (no JAX)
from resnorm_jax.analysis.claims.stabilizers import label  # the README's names
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
  return r["num_layers"], float(r["opt.lr"]), int(r["seed"])


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
  """Final eval loss, stabilizers down and lrs across, at one depth (seed 0), Pre-LN first."""
  base = plain(rows)
  here = [
    r for r in rows if r["num_layers"] == depth and r["seed"] == 0 and r["stabilizer"] != "none"
  ]
  lrs = sorted({float(r["opt.lr"]) for r in here} | {k[1] for k in base if k[0] == depth})
  cells = {(r["stabilizer"], float(r["opt.lr"])): float(r["final_eval_loss"]) for r in here}
  cells |= {("Pre-LN", lr): loss for (d, lr, s), loss in base.items() if d == depth and s == 0}
  names = ["Pre-LN", *dict.fromkeys(r["stabilizer"] for r in here)]
  head = "| stabilizer | " + " | ".join(f"{lr:g}" for lr in lrs) + " | best lr |"
  lines = [head, "| --- " * (len(lrs) + 2) + "|"]
  for n in names:
    row = {lr: cells.get((n, lr)) for lr in lrs}
    done = {lr: v for lr, v in row.items() if v is not None and math.isfinite(v)}
    best = min(done, key=done.get) if len(done) > 1 else None
    text = [
      f"**{v:.4f}**" if lr == best else (f"{v:.4f}" if v is not None else "")
      for lr, v in row.items()
    ]
    lines.append(f"| {n} | " + " | ".join(text) + f" | {best_lr(done)} |")
    if n == "Pre-LN":
      spread = seed_spread(base, depth, lrs)
      if spread:
        lines.append(spread)
  return "\n".join(lines)


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


def best_lr(done: dict[float, float]) -> str:
  """The lowest-loss lr of the finite points run, said only as far as they bracket it: the
  lr where both a lower and a higher lr were run and lost more; `<= lr` or `>= lr` where
  the best is the lowest or highest lr run (the optimum may lie beyond); blank for fewer
  than two points."""
  if len(done) < 2:
    return ""
  best = min(done, key=done.get)
  if best == min(done):
    return f"<= {best:g}"
  if best == max(done):
    return f">= {best:g}"
  return f"{best:g}"


def seeds_markdown(rows: list[dict]) -> str:
  """Where a stabilizer has more than one seed at a (depth, lr): its seeds' final eval losses
  beside plain Pre-LN's seeds at the same point, and whether the two ranges are apart."""
  groups: dict[tuple[str, int, float], list[float]] = {}
  for r in rows:
    if r["final_eval_loss"]:
      groups.setdefault((r["stabilizer"], r["num_layers"], float(r["opt.lr"])), []).append(
        float(r["final_eval_loss"])
      )
  lines = [
    "| stabilizer | layers | lr | seeds | final eval loss | Pre-LN's seeds | Pre-LN | apart |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for (name, depth, lr), losses in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2])):
    if name == "none" or len(losses) < 2:
      continue
    base = groups.get(("none", depth, lr), [])
    span = lambda v: f"{min(v):.4f}-{max(v):.4f}" if v else ""  # noqa: E731
    apart = bool(base) and (max(losses) < min(base) or min(losses) > max(base))
    lines.append(
      f"| {label(name)} | {depth} | {lr:g} | {len(losses)} | {span(losses)} | {len(base)} | "
      f"{span(base)} | {'yes' if apart else 'no' if base else ''} |"
    )
  return "\n".join(lines) if len(lines) > 2 else ""


def plain(rows: list[dict]) -> dict[tuple[int, float, int], float]:
  """(depth, lr, seed) -> plain Pre-LN's final eval loss, from curves.csv's `none` rows."""
  return {key(r): float(r["final_eval_loss"]) for r in rows if r["stabilizer"] == "none"}


def write_csv(path: str, rows: list[dict]) -> None:
  """curves.csv: `rows` (table's) under COLUMNS."""
  csv_table.write_csv(path, rows, COLUMNS, lineterminator="\n")
