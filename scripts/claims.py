"""The README's Results section, written from the committed data: every number in it is
computed here from a CSV under docs/, so a number and its sentence cannot disagree.

python scripts/claims.py           # check: exit 1, naming the difference, when README.md's
                                   # Results section is not what the data say
python scripts/claims.py --write   # rewrite the section between its markers from the data

tests/test_claims.py runs the check. A new claim is a function below that reads its CSV and
returns its table row; its sentence is written here once, with the numbers filled in.
No JAX here.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import sys
from collections.abc import Callable

from configs.sweeps import literature  # (no JAX)
from resnorm_jax.tools import doc_sections, survival_section  # (no JAX)
from resnorm_jax.tools.style import lr_label, variant_label
from resnorm_jax.tools.survival_section import odds_by_cell

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- results: written by scripts/claims.py from docs/ data; edit there -->"
END = "<!-- end of results -->"
MAIN = ("postnorm", "prenorm", "deepnorm")


def read(path: str) -> list[dict[str, str]]:
  with open(os.path.join(ROOT, path), newline="") as f:
    return list(csv.DictReader(f))


def lr_text(lr: float) -> str:
  """1.25e-4, 5e-4, 3.125e-5: a learning rate as the docs write it (4 significant digits)."""
  return lr_label(lr, digits=4)


def dense_params(model: dict) -> int:
  """The parameters of the plain decoder a config.json's `model` describes (Pre-LN's shape:
  attention 4 d^2, FFN 2 d d_ff (3 with swiglu), two norms per layer and a final one, token
  and learned position embeddings, a head only when untied); a variant's extra scalars and
  gates are not counted (under 1% at these shapes). tests/test_claims.py checks it against the
  model's own count."""
  d, ff, n = int(model["d_model"]), int(model["d_ff"]), int(model["num_layers"])
  ffn = (3 if model.get("ffn_activation") == "swiglu" else 2) * d * ff
  layer = 4 * d * d + ffn + 4 * d
  vocab = int(model.get("vocab_size") or 256)  # 0: from the data (bytes: 256)
  embed = vocab * d * (1 if model.get("tie_embeddings", True) else 2)
  pos = int(model["max_seq_len"]) * d if model.get("position", "learned") == "learned" else 0
  return n * layer + embed + pos + 2 * d


def tokens_note(run: str) -> str:
  """'6.4 tokens/param at 6 layers': the training tokens per parameter of a claim's deepest
  (largest) model, from its run folder's config.json (CompleteP's paper trains at 20)."""
  path = os.path.join(ROOT, run, "config.json")
  if not os.path.isfile(path):
    return f"tokens/param unknown ({run} missing)"
  with open(path) as f:
    config = json.load(f)
  train, model = config["train"], config["model"]
  tokens = int(train["steps"]) * int(train["batch_size"]) * int(train["seq_len"])
  ratio = tokens / dense_params(model)
  wide = f", d_model {model['d_model']}" if int(model["d_model"]) != 64 else ""
  if ratio < 0.1:  # '1 token per 12 params', not a 3-decimal number a reader takes for a loss
    return f"1 token per {1 / ratio:.0f} params at {model['num_layers']} layers{wide}"
  text = f"{ratio:.2g}" if ratio < 10 else f"{ratio:.0f}"
  return f"{text} tokens/param at {model['num_layers']} layers{wide}"


def lr_cells(path: str = "docs/lr_sensitivity/results.csv") -> dict[tuple, list[str]]:
  """(variant, depth, lr) -> the outcomes of its seeds."""
  return lr_cells_of(read(path))


def lr_cells_of(rows: list[dict[str, str]], axis: str = "num_layers") -> dict[tuple, list[str]]:
  """(variant, axis value, lr) -> the outcomes of its seeds, from results.csv rows; the axis is
  the depth unless said (d_model for the width sweep)."""
  cells: dict[tuple, list[str]] = collections.defaultdict(list)
  for r in rows:
    cells[(r["variant"], int(r[axis]), float(r["opt.lr"]))].append(r["outcome"])
  return cells


def edge(cells: dict[tuple, list[str]], variant: str, depth: int, unit: str = " seeds") -> str:
  """The largest lr at which some seed trained, with '(k/n seeds)' when not every seed did
  ('(k/n)' with unit='')."""
  trained = [
    (lr, o) for (v, d, lr), o in cells.items() if v == variant and d == depth and "trained" in o
  ]
  if not trained:
    return "none"
  lr, outcomes = max(trained)
  k, n = outcomes.count("trained"), len(outcomes)
  return lr_text(lr) + ("" if k == n else f" ({k}/{n}{unit})")


def kept_cells(
  cells: dict[tuple, list[str]], surv: list[dict[str, str]] | None = None
) -> dict[tuple, list[str]]:
  """`cells` with each survival cell (same variant, depth and lr, 12 seeds at 1,500 steps)
  standing for the grid's: its seeds' outcomes are 'trained' for an escape kept to the end and
  'fell back' / 'stuck' otherwise, so an edge is stated on escapes that last."""
  out = dict(cells)
  for c in survival_cells() if surv is None else surv:
    kept, fell = int(c["escaped_for_good"]), int(c["escaped"]) - int(c["escaped_for_good"])
    rest = int(c["seeds"]) - kept - fell
    out[(c["variant"], int(c["num_layers"]), float(c["lr"]))] = (
      ["trained"] * kept + ["fell back"] * fell + ["stuck"] * rest
    )
  return out


def kept_edge(cells: dict[tuple, list[str]], variant: str, depth: int) -> str:
  """edge() on kept escapes, with the lrs above it where some seed escaped and fell back:
  '5e-4 (11/12 seeds; 1e-3: 1 of 12 escaped, none kept)'."""
  text, note = edge(cells, variant, depth), first_passage_note(cells, variant, depth)
  if not note:
    return text
  return f"{text[:-1]}; {note})" if text.endswith(")") else f"{text} ({note})"


def first_passage_note(cells: dict[tuple, list[str]], variant: str, depth: int) -> str:
  """'1e-3: 1 of 12 escaped, none kept' for each lr above the kept edge where some seed escaped
  and fell back; '' where there is none."""
  kept = [lr for (v, d, lr), o in cells.items() if (v, d) == (variant, depth) and "trained" in o]
  top = max(kept, default=0.0)
  notes = [
    f"{lr_text(lr)}: {o.count('fell back')} of {len(o)} escaped, none kept"
    for (v, d, lr), o in sorted(cells.items())
    if (v, d) == (variant, depth) and lr > top and "fell back" in o
  ]
  return "; ".join(notes)


def row_edges() -> list[str]:
  cells = kept_cells(lr_cells())
  depths = sorted({d for (_, d, _) in cells})
  # the grid: the lrs every Pre-LN curve has; an lr run for some Post-LN curves only (the left
  # edge) is named apart
  grid = sorted({lr for (v, _, lr) in cells if v == "prenorm"})
  extra = sorted({lr for (_, _, lr) in cells} - set(grid))
  parts = [
    f"{variant_label(v)} " + " / ".join(kept_edge(cells, v, d) for d in depths)
    for v in ("postnorm", "deepnorm")
  ]
  pre = {k: o for k, o in cells.items() if k[0] == "prenorm"}
  if all(o.count("trained") == len(o) for o in pre.values()):
    parts.append(f"Pre-LN all {len({lr for (_, _, lr) in pre})} lrs at each")
  at = " / ".join(str(d) for d in depths)
  budget = f"1,000 steps, no warmup, constant lr {lr_text(grid[0])} to {lr_text(grid[-1])}"
  if extra:
    rows = [r for r in read("docs/lr_sensitivity/results.csv") if float(r["opt.lr"]) in extra]
    where = ", ".join(sorted({r["num_layers"] for r in rows}, key=int))
    lrs = ", ".join(lr_text(lr) for lr in extra)
    trained = sum(r["outcome"] == "trained" for r in rows)
    falling = sum(r["late_trend"] == "falling" for r in rows)
    budget += (
      f" (Post-LN at {where} layers also {lrs}: {trained} of {len(rows)} trained, "
      f"{falling} still falling)"
    )
  return [
    "Post-LN's usable lr shrinks with depth, DeepNorm's hardly, Pre-LN's not at all",
    f"largest lr whose escape lasts to the end on some seed, at {at} layers: " + "; ".join(parts),
    f"{budget}; seed 0, 0-2 next to edges, 12 at the survival cells (1,500 steps); stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "[curves](docs/lr_sensitivity/curves.png), `docs/lr_sensitivity/results.csv`",
  ]


def survival_cells() -> list[dict[str, str]]:
  path = "docs/survival/cells.csv"
  return read(path) if os.path.isfile(os.path.join(ROOT, path)) else []


def row_survival() -> list[str] | None:
  cells = survival_cells()
  if not cells:
    return None
  horizon = int(cells[0]["horizon"])
  low, high = min(int(c["seeds"]) for c in cells), max(int(c["seeds"]) for c in cells)
  n_seeds = f"{low}" if low == high else f"{low}-{high}"
  relapsed = sum(int(c["relapsed_runs"]) for c in cells)
  runs = sum(int(c["seeds"]) for c in cells)
  return [
    "The odds at the edges",
    f"kept to step {horizon:,} (95% interval; first passages): "
    + odds_by_cell(cells, long=True)
    + f"; {relapsed} of {runs} fell back",
    f"{horizon:,} steps, eval every 25 steps on 8,192 tokens, {n_seeds} seeds per cell; stdlib; "
    + tokens_note("docs/survival/runs/deepnorm-L24-lr0.004-s0"),
    "[survival](docs/survival/survival.png), `docs/survival/cells.csv`",
  ]


def row_budget() -> list[str]:
  rows = [r for r in read("docs/lr_sensitivity/budget.csv") if r["variant"] == "postnorm"]
  held = [r for r in rows if r["outcome"] == "stuck" and r["late_trend"]]
  count = collections.Counter(r["late_trend"] for r in held)
  steps = max(int(r["steps"]) for r in held)
  return [
    "Stuck, not slow: the plateau does not drain",
    f"of {len(held)} Post-LN runs still on the plateau at step {steps:,}, the late slope is "
    f"flat on {count['flat']}, rising on {count['rising']}, falling on {count['falling']} "
    "(2 standard errors robust to autocorrelated evals); none diverged",
    "3,000 steps, 12-24 layers, no warmup or DeepNet's; 1-3 seeds; stdlib; "
    + tokens_note("docs/lr_sensitivity/budget/runs/postnorm-L24-const-lr0.00025-w0-s0"),
    "[curves](docs/lr_sensitivity/budget_curves.png), `docs/lr_sensitivity/budget.csv`",
  ]


def row_xiong_rescue() -> list[str]:
  rows = read("docs/xiong_rescue/runs/results.csv") + read("docs/xiong_rescue/unseen/results.csv")
  rows = [r for r in rows if "-L12-constant-lr0.001-" in r["name"]]

  def count(warmup: str) -> str:
    arm = [r for r in rows if r["opt.warmup_steps"] == warmup]
    return f"{sum(r['outcome'] == 'trained' for r in arm)} of {len(arm)}"

  corpora = len({r.get("data.path") or r.get("data.source") for r in rows})
  return [
    "Xiong: Post-LN needs warmup, and warmup rescues it",
    f"12 layers, lr 1e-3: trained on {count('0')} runs without warmup, {count('1000')} with "
    f"1,000 warmup steps, over {corpora} corpora",
    "1,500 steps; 3 seeds on 2 corpora, seed 0 on 3 never tuned on; "
    + tokens_note("docs/xiong_rescue/runs/stdlib-L12-constant-lr0.0005-w0-s0"),
    "[figure](docs/xiong_rescue/rescue_seeds.png), `docs/xiong_rescue/`",
  ]


def row_prenorm() -> list[str]:
  cells = {k: o for k, o in lr_cells().items() if k[0] == "prenorm"}
  runs = sum(len(o) for o in cells.values())
  trained = sum(o.count("trained") for o in cells.values())
  depths = sorted({d for (_, d, _) in cells})
  return [
    "Xiong: Pre-LN needs no warmup",
    f"without warmup Pre-LN trained on {trained} of {runs} runs of the loss-vs-lr grid "
    f"({depths[0]}-{depths[-1]} layers)",
    "as the first row",
    "`docs/lr_sensitivity/results.csv`",
  ]


def row_grad_norms() -> list[str]:
  rows = read("docs/grad_norms_at_init/grad_norms_vs_depth.csv")
  ratio = {
    (r["config"], int(r["depth"])): float(r["last_w2_grad_norm"]) / float(r["first_w2_grad_norm"])
    for r in rows
  }
  at24 = ", ".join(f"{variant_label(v)} {ratio[(v, 24)]:.1f}x" for v in MAIN if (v, 24) in ratio)
  post = ", ".join(
    f"{ratio[('postnorm', d)]:.2f}x at {d}" for d in sorted(d for v, d in ratio if v == "postnorm")
  )
  grows = [d for v, d in sorted(ratio) if v == "postnorm" and ratio[(v, d)] >= 2]
  where = f"2x or more at {', '.join(map(str, grows))} layers only" if grows else "under 2x"
  return [
    f"Xiong: at init Post-LN's FFN gradient grows toward the output: {where}",
    f"last layer's W2 gradient norm over the first's at 24 layers: {at24}; Post-LN {post}",
    "init, 8 batches, seed 0, stdlib",
    "[figure](docs/grad_norms_at_init/grad_norms_vs_depth.png), `docs/grad_norms_at_init/`",
  ]


def row_deepnet_warmup() -> list[str]:
  rows = read("docs/deepnet_panel/runs/results.csv")
  stuck = sorted(
    int(r["num_layers"]) for r in rows if r["variant"] == "postnorm" and r["outcome"] == "stuck"
  )
  others = [r for r in rows if r["variant"] in ("prenorm", "deepnorm")]
  ok = sum(r["outcome"] == "trained" for r in others)
  return [
    "DeepNet: warmup does not save deep Post-LN",
    f"200 warmup steps, inverse sqrt, lr 1e-3: Post-LN stuck at {', '.join(map(str, stuck))} "
    f"layers; Pre-LN and DeepNorm trained on {ok} of {len(others)} (18-96 layers)",
    "1,000 steps, seed 0, stdlib; "
    + tokens_note("docs/deepnet_panel/runs/prenorm-L96-invsqrt-w200"),
    "[figure](docs/deepnet_panel/panel_seeds.png), `docs/deepnet_panel/runs/results.csv`",
  ]


def row_update_bound() -> list[str]:
  rows = read("docs/model_update_linear/lr1e-7/model_update_vs_depth.csv")
  per = collections.defaultdict(dict)
  for r in rows:
    per[r["config"]][int(r["depth"])] = float(r["early_update_per_lr"])

  def growth(v: str) -> str:
    d = per[v]
    return f"{d[max(d)] / d[min(d)]:.1f}x"

  depths = sorted(per["postnorm"])
  return [
    "DeepNet: DeepNorm reduces the model update's growth with depth",
    f"update per unit lr from {depths[0]} to {depths[-1]} layers: Post-LN grows "
    f"{growth('postnorm')}, DeepNorm {growth('deepnorm')}, Pre-LN {growth('prenorm')}",
    "lr 1e-7 (linear regime), 5 Adam steps, seed 0",
    "`docs/model_update_linear/lr1e-7/model_update_vs_depth.csv`",
  ]


def row_1000() -> list[str]:
  rows = {r["name"]: r for r in read("docs/runs/results.csv")}
  post = rows["postnorm-L1000-lr0.0002-w50"]
  pre = rows["prenorm-L1000-lr0.0002-w50"]
  deep = rows["deepnorm-L1000-lr0.0002-w50"]
  fmt = lambda r: f"{r['outcome']} ({float(r['final_eval_loss']):.3f})"
  return [
    "DeepNet: 1000 layers",
    f"lr 2e-4 after 50 warmup steps: Post-LN {fmt(post)}, DeepNorm {fmt(deep)}, Pre-LN {fmt(pre)}",
    "600 steps of 8 x 64 tokens, seed 0, stdlib; "
    + tokens_note("docs/runs/prenorm-L1000-lr0.0002-w50"),
    "`docs/runs/results.csv`",
  ]


def row_later() -> list[str]:
  rows = read("docs/stability_map/runs/results.csv")
  depths = sorted({int(r["num_layers"]) for r in rows})
  names = {
    "subln": "Sub-LN",
    "lnscale": "LN scaling",
    "hyperconn": "hyper-connections",
    "admin": "Admin",
    "mixln": "Mix-LN",
    "ngpt": "nGPT",
  }
  everywhere = [
    n for v, n in names.items() if all(r["outcome"] == "trained" for r in rows if r["variant"] == v)
  ]
  not_yet = {
    n: sorted(int(r["num_layers"]) for r in rows if r["variant"] == v and r["outcome"] == "stuck")
    for v, n in names.items()
  }
  # 200 steps say "not trained yet", not "stuck": nGPT, on the plateau at every depth here,
  # trains by step 500 at 6 layers (docs/variants/ngpt-L6-500steps)
  stuck = "not trained by step 200: " + "; ".join(
    f"{n} at {', '.join(map(str, d))}" for n, d in not_yet.items() if d
  )
  longer = "docs/variants/ngpt-L6-500steps"
  if not_yet["nGPT"] and os.path.isfile(os.path.join(ROOT, longer, "summary.json")):
    stuck += f" (nGPT at 6 layers {_summary(longer)['outcome']} by step 500)"
  return [
    "The later variants",
    f"lr 1e-3, no warmup, {', '.join(map(str, depths))} layers: {', '.join(everywhere)} "
    f"train at every depth; {stuck}",
    "200 steps, seed 0, stdlib; " + tokens_note("docs/stability_map/runs/admin-L96"),
    "[map](docs/stability_map/stability_map.png), `docs/stability_map/runs/results.csv`",
  ]


# The 2025-26 variants as their sweep grid names them; each one's name is its named config's LABEL.
LITERATURE = {v: variant_label(v) for v in literature.VARIANTS}


def _literature_row(depth: int) -> list[str] | None:
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
  parts, partial = [], []
  for v, name in (*LITERATURE.items(), ("prenorm", "Pre-LN")):
    mine = [r for r in rows if r["variant"] == v]
    if not mine:
      partial.append(f"{name} 0")
      continue
    best = min(mine, key=lambda r: float(r["capped_loss"]))
    blew = [lr_text(float(r["opt.lr"])) for r in mine if r["outcome"] == "diverged"]
    reach = edge(cells, v, depth)
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
  return [
    f"The 2025-26 variants at {depth} layers",
    "best lr (loss) / largest that trains: " + "; ".join(parts),
    f"1,000 steps, no warmup, constant {lrs}; seed 0{run}; stdlib; "
    + tokens_note(f"docs/lr_sensitivity/runs/prenorm-L{depth}-lr0.004-s0"),
    "[curves](docs/lr_sensitivity/literature.png), `docs/lr_sensitivity/results.csv`",
  ]


def row_literature() -> list[str] | None:
  """The 2025-26 variants at 6 layers (the grid's 9 lrs)."""
  return _literature_row(6)


def row_literature_24() -> list[str] | None:
  """The 2025-26 variants at 24 layers (the 3 lrs around Pre-LN's best)."""
  return _literature_row(24)


CONTRASTS = "docs/lr_sensitivity/contrasts.csv"  # scripts/lr_sensitivity.py writes it


def seeds_text(seeds: list[int]) -> str:
  """'0-4' for consecutive seeds, '0, 2' otherwise."""
  seeds = sorted(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}-{seeds[-1]}"
  return ", ".join(map(str, seeds))


def _seed_mean_contrast() -> dict[str, str] | None:
  return next((r for r in _optional(CONTRASTS) if r["kind"] == "seed mean"), None)


def valueres_contrast() -> str | None:
  """'-0.077 (95% -0.101 to -0.053; seeds 0-4 each)': the SEED_CONTRAST's difference over the
  seeds each ran, with its Welch interval (contrasts.csv); None before 2 seeds each."""
  r = _seed_mean_contrast()
  if r is None:
    return None
  a, b = ([int(x) for x in side.split()] for side in r["seeds"].split(" / "))
  seeds = f"seeds {seeds_text(a)} each" if a == b else f"seeds {seeds_text(a)} and {seeds_text(b)}"
  d, lo, hi = (float(r[k]) for k in ("difference", "lo", "hi"))
  return f"{d:+.3f} (95% {lo:+.3f} to {hi:+.3f}; {seeds})"


def valueres_seed0_below() -> str:
  """'-0.105 / -0.089 / -0.101': seed 0's variant-minus-versus loss at each lr (contrasts.csv)."""
  rows = sorted(
    (r for r in _optional(CONTRASTS) if r["kind"] == "seed 0"), key=lambda r: float(r["lr"])
  )
  return " / ".join(f"{float(r['difference']):+.3f}" for r in rows) or "not run"


def row_valueres() -> list[str] | None:
  """Value residuals against Pre-LN at 24 layers and 4e-3 (both curves' best) over seeds."""
  diff, r = valueres_contrast(), _seed_mean_contrast()
  if diff is None or r is None:
    return None
  lo, hi = float(r["lo"]), float(r["hi"])
  verdict = "beat" if hi < 0 else ("trail" if lo > 0 else "do not clearly beat")
  return [
    f"Value residuals {verdict} Pre-LN at 24 layers, over seeds",
    f"final eval loss, value residuals minus Pre-LN, at lr 4e-3: {diff}; seed 0 alone at "
    f"2e-3 / 4e-3 / 8e-3: {valueres_seed0_below()}",
    "1,000 steps, no warmup, constant lr; Welch interval; stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/valueres-L24-lr0.004-s0"),
    "[curves](docs/lr_sensitivity/literature.png), `docs/lr_sensitivity/contrasts.csv`",
  ]


def row_depth_transfer() -> list[str] | None:
  """Each parametrization's slope of log2(best lr) on log2(L) as the range over three fits of
  the same best lrs (weighted 5-point vertex, its OLS, the 3-point vertex), and the
  CompleteP-minus-sp difference with its OLS standard error and seed bootstrap."""
  path = "docs/depth_transfer/slopes.csv"
  if not os.path.exists(os.path.join(ROOT, path)):
    return None
  names = {"depth_mup": "depth-muP", "sp": "sp", "completep": "CompleteP"}
  fits = ("5pt", "5pt-ols", "3pt")
  slopes = collections.defaultdict(dict)
  for r in read(path):
    if r["variant"] == "prenorm" and r["fit"] in fits:
      slopes[r["depth_param"]][r["fit"]] = r
  parts = []
  for p, name in names.items():
    if p in slopes:
      vals = sorted(float(r["slope"]) for r in slopes[p].values())
      parts.append(f"{name} {vals[0]:+.3f} to {vals[-1]:+.3f}")
  depths = next(iter(slopes.values()))["5pt"]["depths"].split()
  text = f"d log2(best lr) / d log2(L), {depths[0]}-{depths[-1]} layers, over 3 fits: " + ", ".join(
    parts
  )
  contrast = [
    r for r in _optional("docs/depth_transfer/contrast.csv") if "ols slope" in r["quantity"]
  ]
  if contrast:
    c = contrast[0]
    d, se = float(c["difference"]), float(c["difference_se"])
    verdict = "undecided" if abs(d) < 2 * se else ("CompleteP higher" if d > 0 else "sp higher")
    text += f"; CompleteP - sp {d:+.3f} +- {se:.3f} (OLS, seed 0): {verdict}"
  seeded = [
    r for r in _optional("docs/depth_transfer/contrast.csv") if "log2 best lr" in r["quantity"]
  ]
  if seeded:
    c = seeded[0]
    text += (
      f"; at {c['depths']} layers, seeds {c['seeds'].replace(' ', ', ')}: log2 best lr "
      f"{float(c['difference']):+.2f} ({float(c['boot_lo']):+.2f} to "
      f"{float(c['boot_hi']):+.2f})"
    )
  return [
    "Depth transfer of Pre-LN's best lr",
    text,
    f"0 = transfer; 1,000 steps, 7 lrs ({len(depths)} depths; 3 lrs, a 3-point vertex, at 48 "
    "under depth-muP and CompleteP); seed 0; 95% seed bootstrap; stdlib; "
    + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "[figure](docs/depth_transfer/prenorm.png), `docs/depth_transfer/slopes.csv`, "
    "`docs/depth_transfer/contrast.csv`",
  ]


def _optional(path: str) -> list[dict[str, str]]:
  return read(path) if os.path.exists(os.path.join(ROOT, path)) else []


def row_completep_loss() -> list[str] | None:
  """CompleteP's and sp's best Pre-LN loss at each depth, and at 24 layers the seed-mean
  contrast on the lrs both ran with every seed (docs/depth_transfer/contrast.csv)."""
  best = [r for r in _optional("docs/depth_transfer/best_lr.csv") if r["variant"] == "prenorm"]
  if not best:
    return None
  by = {(r["depth_param"], int(r["num_layers"])): float(r["grid_best_loss"]) for r in best}
  depths = sorted({d for p, d in by if p == "completep"})
  losses = "; ".join(
    f"{name} " + " / ".join(f"{by[(p, d)]:.3f}" for d in depths)
    for p, name in (("completep", "CompleteP"), ("sp", "sp"))
  )
  text = f"best loss at {' / '.join(map(str, depths))} layers: {losses}"
  seeded = [
    r
    for r in _optional("docs/depth_transfer/contrast.csv")
    if "best seed-mean loss" in r["quantity"]
  ]
  budget = "1,000 steps, lrs 2.5e-4 to 1.6e-2; seed 0 (seed means where seeds ran)"
  if seeded:
    c = seeded[0]
    text += (
      f"; at {c['depths']} layers, seeds {c['seeds'].replace(' ', ', ')} on the lrs both ran: "
      f"CompleteP minus sp {float(c['difference']):+.3f} (95% bootstrap "
      f"{float(c['boot_lo']):+.3f} to {float(c['boot_hi']):+.3f})"
    )
  else:
    text += "; the 24-layer seeds at every lr around the best are not all run yet"

  def falls(p: str) -> str:
    seq = [by[(p, d)] for d in depths]
    return "falls" if all(b < a for a, b in zip(seq, seq[1:], strict=False)) else "does not fall"

  return [
    f"CompleteP's best loss {falls('completep')} with depth, sp's {falls('sp')}",
    text,
    budget + "; stdlib; " + tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0"),
    "`docs/depth_transfer/best_lr.csv`, `docs/depth_transfer/contrast.csv`",
  ]


def row_param_edges() -> list[str] | None:
  """Post-LN's and DeepNorm's edge (largest lr that trains on some seed) under sp and under
  CompleteP, at the depths CompleteP was run, and the best loss there."""
  path = "docs/depth_transfer/results.csv"
  if not os.path.exists(os.path.join(ROOT, path)):
    return None
  rows = read(path)
  best = {
    (r["variant"], r["depth_param"], int(r["num_layers"])): r
    for r in read("docs/depth_transfer/best_lr.csv")
  }
  parts, all_depths = [], set()
  for variant in ("postnorm", "deepnorm"):
    cp = [r for r in rows if r["variant"] == variant and r["depth_param"] == "completep"]
    # above the base depth (at 6 layers CompleteP's runs are sp's)
    depths = sorted({int(r["num_layers"]) for r in cp} - {6})
    if not depths:
      continue
    all_depths |= set(depths)
    text = []
    for param, name in (("sp", "sp"), ("completep", "CompleteP")):
      cells = lr_cells_of([r for r in rows if r["depth_param"] == param])
      # sp's survival cells (12 seeds) stand for the grid's in the edge: kept escapes
      kept = kept_cells(cells) if param == "sp" else cells
      edges = " / ".join(edge(kept, variant, d) for d in depths)
      losses = []
      for d in depths:
        b = best.get((variant, param, d))
        # the rule's own verdict at the best lr, not the margin worked out again here
        trained = b and "trained" in cells.get((variant, d, float(b["grid_best_lr"])), [])
        losses.append(f"{float(b['grid_best_loss']):.3f}" if trained else "-")
      text.append(f"{name} {edges} (best loss {' / '.join(losses)})")
    parts.append(f"{variant_label(variant)}: " + ", ".join(text))
  if not parts:
    return None
  at = " / ".join(str(d) for d in sorted(all_depths))
  return [
    "CompleteP moves Post-LN's edge",
    f"largest lr whose escape lasts on some seed at {at} layers: " + "; ".join(parts),
    "1,000 steps, no warmup, constant lr 2.5e-4 to 1.6e-2; seed 0, 0-2 at some cells; stdlib; "
    + tokens_note("docs/depth_transfer/runs/postnorm-completep-L24-lr0.002-s0"),
    "[figure](docs/depth_transfer/postnorm.png), `docs/depth_transfer/results.csv`",
  ]


def row_width() -> list[str] | None:
  """Each variant's best lr and largest lr that trains on some seed ('(k/n)' where not every
  seed did) at every width run, and how many runs above the narrowest width diverged."""
  path = "docs/width/edges.csv"
  if not os.path.exists(os.path.join(ROOT, path)):
    return None
  edges = read(path)
  widths = sorted({int(r["d_model"]) for r in edges})
  if len(widths) < 2:
    return None
  by = {(r["variant"], int(r["d_model"])): r for r in edges}
  results = read("docs/width/results.csv")
  cells = lr_cells_of(results, axis="d_model")
  parts = []
  for variant in ("postnorm", "deepnorm", "prenorm"):
    texts = []
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
  diverged = sum(r["outcome"] == "diverged" for r in runs)
  at = ", ".join(str(d) for d in widths)
  seeds = {d: sorted({int(r["seed"]) for r in results if int(r["d_model"]) == d}) for d in widths}
  more = [d for d in widths if len(seeds[d]) > 1]
  top = max((seeds[d][-1] for d in more), default=0)
  seed_text = (
    f"seed 0 (d_model {', '.join(map(str, more))}: 0-{top} next to edges)" if more else "seed 0"
  )
  return [
    "Width moves the edges down in sp",
    f"best (seed 0)/largest lr trained (k/n) at d_model {at}: "
    + "; ".join(parts)
    + f"; {diverged}/{len(runs)} runs above {widths[0]} diverged",
    f"12 layers, 1,000 steps, no warmup, constant lr; head dim 16; {seed_text}; <=: best at "
    "the smallest lr run; stdlib; " + tokens_note("docs/width/runs/deepnorm-L12-d256-lr0.0005-s0"),
    "[figure](docs/width/curves.png), `docs/width/edges.csv`, `docs/width/results.csv`",
  ]


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
  if best["outcome"] != "trained":
    best_text = "none"
  else:
    lr = float(best["opt.lr"])
    below = any(float(r["opt.lr"]) < lr for r in runs)
    best_text = lr_text(lr) if below else f"<={lr_text(lr)}"
  shared = [r for r in runs if float(r["opt.lr"]) in lrs]
  reach = edge(lr_cells_of(shared, axis="d_model"), variant, d_model) if shared else "-"
  return best_text, reach


def row_width_mup() -> list[str] | None:
  """muP against sp at each width muP ran: each variant's seed-0 best lr on its own lrs, and
  the largest lr that trained on the lrs both ran there (the two sweeps' results.csv; the
  losses are in docs/width/README.md)."""
  path = "docs/width/mup/results.csv"
  if not os.path.exists(os.path.join(ROOT, path)):
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
  return [
    "muP against sp across width",
    f"at d_model {'/'.join(map(str, widths))}: Pre-LN's best lr {both_ways('prenorm', 0)}; "
    f"Post-LN's best lr {both_ways('postnorm', 0)}, its largest lr trained "
    f"{both_ways('postnorm', 1)}",
    "12 layers, seed 0 (sp's seeds split at Post-LN's edge); best lr on each one's lrs "
    "(<=: its smallest run), largest trained on the lrs both ran; 1,000 steps, no warmup, "
    "constant lr; base width "
    "64, head dim 16; stdlib; " + tokens_note("docs/width/runs/postnorm-L12-d256-mup-lr0.00025-s0"),
    "[figure](docs/width/mup/curves.png), `docs/width/mup/results.csv`",
  ]


def row_second_corpus() -> list[str] | None:
  """At 12 layers, each variant's largest lr that trains on some seed and its best lr, on the
  stdlib and on the second corpus (docs/second_corpus/results.csv: both columns)."""
  path = "docs/second_corpus/results.csv"
  if not os.path.exists(os.path.join(ROOT, path)):
    return None
  rows = read(path)
  corpora = sorted({r["data"] for r in rows}, key=lambda c: (c != "stdlib bytes", c))
  if len(corpora) < 2:
    return None
  short = {"stdlib bytes": "stdlib", "tinyshakespeare.txt": "Shakespeare"}
  edges = {(r["variant"], r["data"]): r for r in read("docs/second_corpus/edges.csv")}
  parts = []
  for variant in MAIN:
    reach, best = [], []
    for c in corpora:
      e = edges.get((variant, c))
      cells = lr_cells_of([r for r in rows if r["data"] == c])
      # stdlib's survival cells (12 seeds, 1,500 steps) stand for its grid's: kept escapes
      reach.append(edge(kept_cells(cells) if c == "stdlib bytes" else cells, variant, 12))
      best.append(lr_text(float(e["best_lr"])) if e and e["best_lr"] else "none")
    parts.append(f"{variant_label(variant)} to {' / '.join(reach)}, best {' / '.join(best)}")
  seeds = sorted({r["seed"] for r in rows if r["data"] != "stdlib bytes"}, key=int)
  names = " / ".join(short.get(c, c) for c in corpora)
  extra = f", {seeds[0]}-{seeds[-1]} on Shakespeare next to edges" if len(seeds) > 1 else ""
  return [
    "The edges on a second corpus",
    f"12 layers, largest lr whose escape lasts on some seed on {names}: " + "; ".join(parts),
    f"1,000 steps, no warmup, constant lr 1.25e-4 to 3.2e-2; seed 0{extra}; each corpus "
    "against its own no-context loss; "
    + tokens_note("docs/second_corpus/runs/shakespeare-deepnorm-L12-lr0.000125-s0"),
    "[curves](docs/second_corpus/curves.png), `docs/second_corpus/edges.csv`",
  ]


def row_early_warning() -> list[str] | None:
  """Held-out AUC of the pre-specified all-core-signals predictor on runs still on the
  plateau at step k, per data set; the earliest k at AUC >= 0.9; the replayed stop rule."""
  rows = _optional("docs/early_warning/results.csv")
  if not rows:
    return None
  # the survival cells are 12 seeds of one config each: the question there is which seeds of
  # a cell escape (the AUC within a cell); across the grid's cells, which cells (pooled AUC)
  sets = (
    ("survival, on the plateau at k", "survival seeds", "within_cell_auc"),
    ("stdlib grid, on the plateau at k", "grid", "auc"),
    ("shakespeare, on the plateau at k", "Shakespeare", "auc"),
  )
  ks = sorted({int(r["k"]) for r in rows})
  parts, early = [], []
  for key, name, column in sets:
    got = {
      int(r["k"]): float(r[column])
      for r in rows
      if r["set"] == key and r["predictor"] == "all core signals" and r[column] not in ("", "nan")
    }
    if not got:
      continue
    parts.append(f"{name} " + "/".join(f"{got[k]:.2f}" if k in got else "-" for k in ks))
    first = next((k for k in ks if got.get(k, 0) >= 0.9), None)
    early.append(f"{name.split(' ')[0]} at {first}" if first else f"{name.split(' ')[0]} never")
  save = [r for r in _optional("docs/early_warning/savings.csv") if r["sweep"] == "stdlib grid"]
  text = (
    f"held-out AUC at k = {'/'.join(map(str, ks))}: "
    + "; ".join(parts)
    + f" (0.9: {', '.join(early)})"
  )
  if save:
    r = min(save, key=lambda r: int(r["k"]))
    text += (
      f"; a stop at {r['k']} saves {float(r['core_hours_saved']):.1f} of the grid's "
      f"{float(r['core_hours_total']):.1f} core-hours ({r['stopped_that_would_have_escaped']} "
      f"of {r['escaped']} trained lost)"
    )
  return [
    "Early warning: can the first steps tell a doomed run?",
    text,
    "runs on the plateau at k (survival: AUC within a cell's seeds); logistic regression on "
    "loss, gradient, update, parameter norms; cells held out; fit on stdlib; committed runs",
    "[figure](docs/early_warning/auc_vs_k.png), `docs/early_warning/results.csv`",
  ]


ROWS: tuple[Callable[[], list[str] | None], ...] = (
  row_edges,
  row_survival,
  row_budget,
  row_xiong_rescue,
  row_prenorm,
  row_grad_norms,
  row_deepnet_warmup,
  row_update_bound,
  row_1000,
  row_later,
  row_literature,
  row_literature_24,
  row_valueres,
  row_depth_transfer,
  row_completep_loss,
  row_param_edges,
  row_width,
  row_width_mup,
  row_second_corpus,
  row_early_warning,
)


def answer() -> str:
  """The one-sentence answer on top of Results."""
  cells = kept_cells(lr_cells())
  depths = sorted({d for (_, d, _) in cells})
  post = ", ".join(f"{kept_edge(cells, 'postnorm', d)} at {d}" for d in depths)
  runs = read("docs/lr_sensitivity/results.csv") + read("docs/lr_sensitivity/budget.csv")
  diverged = [r for r in runs if r["outcome"] == "diverged"]
  which = ", ".join(
    f"{variant_label(r['variant'])} at {r['num_layers']} layers, lr {lr_text(float(r['opt.lr']))}"
    for r in diverged
  )
  text = (
    "**The answer:** without warmup, deep Post-LN is stuck, not unstable: above an lr that "
    f"falls with depth (the largest whose escape lasts to the end: {post} layers) it stays on "
    f"the no-context plateau ({len(diverged)} of "
    f"{len(runs)} runs diverged{': ' + which if which else ''})"
  )
  surv = survival_cells()
  if surv:
    text += f"; at the edge escape is a matter of odds ({odds_by_cell(surv, long=False)})"
  deep = [(lr, o) for (v, d, lr), o in cells.items() if (v, d) == ("deepnorm", depths[-1])]
  lr, outcomes = max((x for x in deep if "trained" in x[1]), default=(None, []))
  if lr is None:
    return text + ", Pre-LN trains at every lr."
  seeds = f"{outcomes.count('trained')} of {len(outcomes)} seed{'s' if len(outcomes) > 1 else ''}"
  return text + (
    f"; DeepNorm trains at {lr_text(lr)} at {depths[-1]} layers on {seeds} run there, "
    "Pre-LN at every lr."
  )


def render() -> str:
  """The Results section's body between the markers."""
  lines = [
    BEGIN,
    answer(),
    "",
    "| claim | what the runs show | budget, seeds, corpus | figure / data |",
    "| --- | --- | --- | --- |",
  ]
  for make in ROWS:
    row = make()
    if row:
      lines.append("| " + " | ".join(row) + " |")
  lines.append(END)
  return "\n".join(lines)


def render_survival() -> str:
  """docs/results.md's escape-probability section (resnorm_jax/tools/survival_section.py)."""
  cells = survival_cells()
  runs = read("docs/survival/runs.csv") if cells else []
  return survival_section.render(cells, runs, read("docs/lr_sensitivity/results.csv"))


def section(text: str, begin: str = BEGIN, end: str = END) -> str | None:
  """The README's Results section of `text` (markers included), None when absent."""
  return doc_sections.section(text, begin, end)


RESULTS_MD = os.path.join(ROOT, "docs", "results.md")
# (file, begin marker, end marker, renderer): every generated section
SECTIONS = (
  (README, BEGIN, END, render),
  (RESULTS_MD, survival_section.BEGIN, survival_section.END, render_survival),
)


def _summary(run: str) -> dict:
  with open(os.path.join(ROOT, run, "summary.json")) as f:
    return json.load(f)


def step_text(step: int | None) -> str:
  return "none" if step is None else f"{int(step):,}"


def run_fact(name: str) -> str | None:
  """A fact named by the run folder it reads: `escape:<run>` (its escape step, 'none' when it
  never escaped), `loss:<run>` (its final eval loss, 3 decimals); None for other names."""
  kind, _, run = name.partition(":")
  if kind not in ("escape", "loss") or not os.path.isfile(os.path.join(ROOT, run, "summary.json")):
    return None
  summary = _summary(run)
  if kind == "escape":
    return step_text(summary.get("escape_step"))
  return f"{float(summary['final_eval_loss']):.3f}"


def _escapes(pattern: str, seeds: tuple[int, ...] = (0, 1, 2)) -> str:
  """'250 / 500 / 500': the escape steps of a run folder's seeds."""
  return " / ".join(step_text(_summary(pattern.format(s)).get("escape_step")) for s in seeds)


XIONG_W1000 = "docs/xiong_rescue/runs/{corpus}-L12-constant-lr0.001-w1000-s{{}}"


def _xiong_w1000_steps() -> str:
  """'250 or 500': the escape steps of the six warmup-rescued runs (both corpora, 3 seeds)."""
  steps = sorted(
    {
      _summary(XIONG_W1000.format(corpus=c).format(s))["escape_step"]
      for c in ("stdlib", "shakespeare")
      for s in (0, 1, 2)
    }
  )
  return " or ".join(step_text(x) for x in steps)


RESULTS_MD_NAME = "results.md"
# Numbers stated in docs/results.md's prose, each computed from its data: a sentence carries
# `<!-- fact:NAME -->text<!-- /fact -->`, and the check fails when the text is not the data's.
FACTS: dict[str, doc_sections.Fact] = {
  "xiong_rescue.escape.stdlib.w1000": (
    RESULTS_MD_NAME,
    lambda: _escapes(XIONG_W1000.format(corpus="stdlib")),
  ),
  "xiong_rescue.escape.shakespeare.w1000": (
    RESULTS_MD_NAME,
    lambda: _escapes(XIONG_W1000.format(corpus="shakespeare")),
  ),
  "xiong_rescue.escape.w1000.all": (RESULTS_MD_NAME, _xiong_w1000_steps),
  "valueres.L24.seed0.below_prenorm": (RESULTS_MD_NAME, valueres_seed0_below),
  "valueres.L24.lr4e-3.minus_prenorm": (
    RESULTS_MD_NAME,
    lambda: valueres_contrast() or "not run on 2 or more seeds each",
  ),
}


def check(path: str = README) -> list[str]:
  """The differences between a file's generated sections and facts (those of the file of the
  same name: README.md, results.md) and the data's: empty when they agree."""
  return doc_sections.check(path, SECTIONS) + doc_sections.check_facts(path, FACTS, run_fact)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--write", action="store_true", help="rewrite the sections from the data")
  args = parser.parse_args()
  paths = (README, RESULTS_MD)
  if args.write:
    for path in paths:
      try:
        doc_sections.write(path, SECTIONS)
        doc_sections.write_facts(path, FACTS, run_fact)
      except ValueError as e:
        sys.exit(str(e))
  problems = [p for path in paths for p in check(path)]
  if problems:
    print("\n".join(problems))
    sys.exit(1)
  print(f"README.md and docs/results.md agree with the data ({len(ROWS)} README claims)")


if __name__ == "__main__":
  main()
