"""The README's rows of the papers' claims reproduced (docs/xiong_rescue/,
docs/grad_norms_at_init/, docs/deepnet_panel/, docs/model_update_linear/, docs/runs/,
docs/stability_map/; the measurements are resnorm_jax/probes/reproductions.py's), and the
Xiong-rescue escape steps docs/results.md states."""

from __future__ import annotations

import collections
import os

from resnorm_jax.analysis.claims.docs_data import (
  MAIN,
  Claim,
  exists,
  read,
  run_summary,
  step_text,
  tokens_note,
)
from resnorm_jax.analysis.style import variant_label
from resnorm_jax.runs import record_files, status


def row_xiong_rescue() -> Claim:
  rows = read("docs/xiong_rescue/runs/results.csv") + read("docs/xiong_rescue/unseen/results.csv")
  rows = [r for r in rows if "-L12-constant-lr0.001-" in r["name"]]

  def count(warmup: str) -> str:
    arm = [r for r in rows if r["opt.warmup_steps"] == warmup]
    return f"{sum(r['outcome'] == status.TRAINED for r in arm)} of {len(arm)}"

  corpora = len({r.get("data.path") or r.get("data.source") for r in rows})
  seeds = "3 seeds on 2 corpora, seed 0 on 3 never tuned on"
  return Claim(
    "Xiong: Post-LN needs warmup, and warmup rescues it",
    f"12 layers, lr 1e-3: trained on {count('0')} runs without warmup, {count('1000')} with "
    f"1,000 warmup steps, over {corpora} corpora",
    f"1,500 steps; {seeds}; "
    + tokens_note("docs/xiong_rescue/runs/stdlib-L12-constant-lr0.0005-w0-s0"),
    "[figure](docs/xiong_rescue/rescue_seeds.png), `docs/xiong_rescue/`",
    f"12 layers, lr 1e-3: trained {count('0')} without warmup, {count('1000')} with 1,000 "
    "warmup steps",
    f"1,500 steps; {seeds}",
  )


def row_grad_norms() -> Claim:
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
  return Claim(
    f"Xiong: at init Post-LN's FFN gradient grows toward the output: {where}",
    f"last layer's W2 gradient norm over the first's at 24 layers: {at24}; Post-LN {post}",
    "init, 8 batches, seed 0, stdlib",
    "[figure](docs/grad_norms_at_init/grad_norms_vs_depth.png), `docs/grad_norms_at_init/`",
    f"last over first layer's W2 gradient norm at 24 layers: {at24}",
    "init, 8 batches; seed 0",
  )


def row_deepnet_warmup() -> Claim:
  rows = read("docs/deepnet_panel/runs/results.csv")
  stuck = sorted(
    int(r["num_layers"])
    for r in rows
    if r["variant"] == "postnorm" and r["outcome"] == status.STUCK
  )
  others = [r for r in rows if r["variant"] in ("prenorm", "deepnorm")]
  ok = sum(r["outcome"] == status.TRAINED for r in others)
  return Claim(
    "DeepNet: warmup does not save deep Post-LN",
    f"200 warmup steps, inverse sqrt, lr 1e-3: Post-LN stuck at {', '.join(map(str, stuck))} "
    f"layers; Pre-LN and DeepNorm trained on {ok} of {len(others)} (18-96 layers)",
    "1,000 steps, seed 0, stdlib; "
    + tokens_note("docs/deepnet_panel/runs/prenorm-L96-invsqrt-w200"),
    "[figure](docs/deepnet_panel/panel_seeds.png), `docs/deepnet_panel/runs/results.csv`",
    f"with 200 warmup steps Post-LN stuck at {', '.join(map(str, stuck))} layers; Pre-LN and "
    f"DeepNorm trained {ok} of {len(others)}",
    "1,000 steps; seed 0",
  )


def row_update_bound() -> Claim:
  rows = read("docs/model_update_linear/lr1e-7/model_update_vs_depth.csv")
  per = collections.defaultdict(dict)
  for r in rows:
    per[r["config"]][int(r["depth"])] = float(r["early_update_per_lr"])

  def growth(v: str) -> str:
    d = per[v]
    return f"{d[max(d)] / d[min(d)]:.1f}x"

  depths = sorted(per["postnorm"])
  grows = f"Post-LN {growth('postnorm')}, DeepNorm {growth('deepnorm')}, Pre-LN {growth('prenorm')}"
  return Claim(
    "DeepNet: DeepNorm reduces the model update's growth with depth",
    f"update per unit lr from {depths[0]} to {depths[-1]} layers: Post-LN grows "
    f"{growth('postnorm')}, DeepNorm {growth('deepnorm')}, Pre-LN {growth('prenorm')}",
    "lr 1e-7 (linear regime), 5 Adam steps, seed 0",
    "`docs/model_update_linear/lr1e-7/model_update_vs_depth.csv`",
    f"update per unit lr grows from {depths[0]} to {depths[-1]} layers: {grows}",
    "5 Adam steps at lr 1e-7; seed 0",
  )


def row_1000() -> Claim:
  rows = {r["name"]: r for r in read("docs/runs/results.csv")}
  post = rows["postnorm-L1000-lr0.0002-w50"]
  pre = rows["prenorm-L1000-lr0.0002-w50"]
  deep = rows["deepnorm-L1000-lr0.0002-w50"]
  fmt = lambda r: f"{r['outcome']} ({float(r['final_eval_loss']):.3f})"
  outcomes = f"Post-LN {fmt(post)}, DeepNorm {fmt(deep)}, Pre-LN {fmt(pre)}"
  return Claim(
    "DeepNet: 1000 layers",
    f"lr 2e-4 after 50 warmup steps: {outcomes}",
    "600 steps of 8 x 64 tokens, seed 0, stdlib; "
    + tokens_note("docs/runs/prenorm-L1000-lr0.0002-w50"),
    "`docs/runs/results.csv`",
    outcomes,
    "600 steps, lr 2e-4, 50 warmup steps; seed 0",
  )


def row_later() -> Claim:
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
    n
    for v, n in names.items()
    if all(r["outcome"] == status.TRAINED for r in rows if r["variant"] == v)
  ]
  not_yet = {
    n: sorted(
      int(r["num_layers"]) for r in rows if r["variant"] == v and r["outcome"] == status.STUCK
    )
    for v, n in names.items()
  }
  # 200 steps say "not trained yet", not "stuck": nGPT, on the plateau at every depth here,
  # trains by step 500 at 6 layers (docs/variants/ngpt-L6-500steps)
  stuck = "not trained by step 200: " + "; ".join(
    f"{n} at {', '.join(map(str, d))}" for n, d in not_yet.items() if d
  )
  longer = "docs/variants/ngpt-L6-500steps"
  if not_yet["nGPT"] and exists(os.path.join(longer, record_files.SUMMARY)):
    stuck += f" (nGPT at 6 layers {run_summary(longer)['outcome']} by step 500)"
  return Claim(
    "The later variants",
    f"lr 1e-3, no warmup, {', '.join(map(str, depths))} layers: {', '.join(everywhere)} "
    f"train at every depth; {stuck}",
    "200 steps, seed 0, stdlib; " + tokens_note("docs/stability_map/runs/admin-L96"),
    "[map](docs/stability_map/stability_map.png), `docs/stability_map/runs/results.csv`",
    f"{', '.join(everywhere)} train at {', '.join(map(str, depths))} layers; not yet at some "
    f"depth by step 200: {', '.join(n for n, d in not_yet.items() if d)}",
    "200 steps, lr 1e-3; seed 0",
  )


def _escapes(pattern: str, seeds: tuple[int, ...] = (0, 1, 2)) -> str:
  """'250 / 500 / 500': the escape steps of a run folder's seeds."""
  return " / ".join(step_text(run_summary(pattern.format(s)).get("escape_step")) for s in seeds)


XIONG_W1000 = "docs/xiong_rescue/runs/{corpus}-L12-constant-lr0.001-w1000-s{{}}"


def _xiong_w1000_steps() -> str:
  """'250 or 500': the escape steps of the six warmup-rescued runs (both corpora, 3 seeds)."""
  steps = sorted(
    {
      run_summary(XIONG_W1000.format(corpus=c).format(s))["escape_step"]
      for c in ("stdlib", "shakespeare")
      for s in (0, 1, 2)
    }
  )
  return " or ".join(step_text(x) for x in steps)


# The README's Results rows this module states, by their place in the table.
README_ROWS = {
  40: row_xiong_rescue,
  60: row_grad_norms,
  70: row_deepnet_warmup,
  80: row_update_bound,
  90: row_1000,
  100: row_later,
}
