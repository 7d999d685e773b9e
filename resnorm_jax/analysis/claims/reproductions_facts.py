"""The numbers in docs/results.md's prose that read the reproductions' runs (stability map,
Xiong, DeepNet panel, seeds, grad norms and flow, model update, 1000 layers), as facts
(`FACTS`, checked by scripts/claims.py). The README rows are reproductions.py's. No JAX.
"""

from __future__ import annotations

import collections
import functools
import os

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import (
  MAIN,
  RESULTS_MD_NAME,
  ROOT,
  read,
  run_summary,
  step_text,
)
from resnorm_jax.analysis.claims.reproductions import XIONG_W1000, _escapes, _xiong_w1000_steps
from resnorm_jax.runs import record_files, status


def csv_loss(path: str, name: str, column: str = "final_eval_loss", digits: int = 3) -> str:
  """'2.546': one run's `column` in a results CSV (the row whose `name` is `name`), `digits`
  decimals: the runs without a folder (docs/stability_map/results.csv's main variants)."""
  row = next(r for r in read(path) if r["name"] == name)
  return f"{float(row[column]):.{digits}f}"


def seeds_mean_std(variant: str) -> str:
  """'3.315 +- 0.003': a variant's final eval loss over the 24-layer seeds, mean +- std
  (docs/seeds/results_seeds.csv)."""
  row = next(r for r in read(SEEDS) if r["variant"] == variant and r["num_layers"] == "24")
  return f"{float(row['final_eval_mean']):.3f} +- {float(row['final_eval_std']):.3f}"


def seeds_range(variant: str) -> str:
  """'3.313-3.319': a variant's lowest and highest final eval loss over the 24-layer seeds
  (docs/seeds/results_seeds.csv)."""
  row = next(r for r in read(SEEDS) if r["variant"] == variant and r["num_layers"] == "24")
  return f"{float(row['final_eval_min']):.3f}-{float(row['final_eval_max']):.3f}"


UPDATES = "docs/model_update_linear/lr1e-7/model_update_vs_depth.csv"


def _updates() -> dict[str, dict[int, float]]:
  per: dict[str, dict[int, float]] = collections.defaultdict(dict)
  for r in read(UPDATES):
    per[r["config"]][int(r["depth"])] = float(r["early_update_per_lr"])
  return per


def update_growth(variant: str, digits: int) -> str:
  """'108': how many times a variant's update per unit lr grows from the shallowest to the
  deepest model (model_update_vs_depth.csv), `digits` decimals."""
  d = _updates()[variant]
  return f"{d[max(d)] / d[min(d)]:.{digits}f}"


def update_ratio(depths: tuple[int, ...]) -> str:
  """'97-107': Post-LN's update per unit lr over DeepNorm's at `depths`, the least and the most,
  whole numbers."""
  per = _updates()
  ratios = [per["postnorm"][d] / per["deepnorm"][d] for d in depths]
  return f"{min(ratios):.0f}-{max(ratios):.0f}"


def seeds_value(variant: str, column: str) -> str:
  """'3.315': a column of a variant's 24-layer seed row (results_seeds.csv), 3 decimals."""
  row = next(r for r in read(SEEDS) if r["variant"] == variant and r["num_layers"] == "24")
  return f"{float(row[column]):.3f}"


def _seed_rows() -> dict[str, dict[str, str]]:
  return {r["variant"]: r for r in read(SEEDS) if r["num_layers"] == "24"}


def seeds_gap() -> str:
  """'0.75': the smallest gap between stuck Post-LN's seed mean and a trained variant's, 2
  decimals (the 24-layer seeds)."""
  rows = _seed_rows()
  post = float(rows["postnorm"]["final_eval_mean"])
  return f"{min(post - float(rows[v]['final_eval_mean']) for v in ('prenorm', 'deepnorm')):.2f}"


def seeds_gap_over_spread() -> str:
  """'57': that gap over the widest min-max spread of a variant's seeds, whole times."""
  rows = _seed_rows()
  post = float(rows["postnorm"]["final_eval_mean"])
  gap = min(post - float(rows[v]["final_eval_mean"]) for v in ("prenorm", "deepnorm"))
  spread = max(float(r["final_eval_max"]) - float(r["final_eval_min"]) for r in rows.values())
  return f"{gap / spread:.0f}"


def below_no_context(path: str, name: str, digits: int = 2) -> str:
  """'0.16': how far a run's final eval loss ends below the held-out no-context loss, `digits`
  decimals (docs/verdict/rederived.csv's `below_baseline`, its row for a CSV's run)."""
  row = next(r for r in read(REDERIVED) if r["file"] == path and r["name"] == name)
  return f"{float(row['below_baseline']):.{digits}f}"


def _eval_curve(run: str) -> tuple[list[int], list[float]]:
  from resnorm_jax.analysis.lr_sweep_rows import eval_curve

  return eval_curve(os.path.join(ROOT, run))


def evals_between(run: str, start: int, end: int | None = None) -> list[float]:
  """A run's periodic evals from step `start` to `end` (the last when None), both included."""
  steps, losses = _eval_curve(run)
  return [v for s, v in zip(steps, losses, strict=True) if s >= start and (end is None or s <= end)]


def eval_range(run: str, start: int, end: int | None = None, digits: int = 2) -> str:
  """'3.37-3.39': the lowest and highest periodic eval of a run from step `start` to `end`
  (the last when None), `digits` decimals; one number when they agree at `digits`."""
  late = evals_between(run, start, end)
  lo, hi = f"{min(late):.{digits}f}", f"{max(late):.{digits}f}"
  return lo if lo == hi else f"{lo}-{hi}"


def eval_no_context(run: str) -> str:
  """'3.299': the no-context loss of a run's periodic eval set (summary.json), 3 decimals."""
  return f"{float(run_summary(run)['periodic_eval_no_context_loss']):.3f}"


def runs_eval_range(
  runs: tuple[str, ...], start: int, end: int | None = None, digits: int = 3
) -> str:
  """'3.30-3.32': the lowest and highest periodic eval of run folders `runs` from step `start`
  to `end` (the last when None), `digits` decimals; one number when they agree."""
  values = [v for r in runs for v in evals_between(r, start, end)]
  lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
  return lo if lo == hi else f"{lo}-{hi}"


def eval_list(run: str, start: int = 0, digits: int = 2) -> str:
  """'3.33, 3.30, 3.16': a run's periodic evals from step `start` on, in step order."""
  return ", ".join(f"{v:.{digits}f}" for v in evals_between(run, start))


def _below(run: str) -> float:
  """How far below its held-out no-context loss a run ends (negative: above)."""
  summary = run_summary(run)
  return float(summary["heldout_unigram_entropy"]) - float(summary["final_eval_loss"])


def below_range(runs: tuple[str, ...], digits: int = 2) -> str:
  """'1.26-1.32': how far below their held-out no-context loss the runs end, least and most."""
  below = [_below(r) for r in runs]
  lo, hi = f"{min(below):.{digits}f}", f"{max(below):.{digits}f}"
  return lo if lo == hi else f"{lo}-{hi}"


def below_or_above(runs: tuple[str, ...]) -> str:
  """'between 0.02 below and 0.05 above': where runs end against their no-context loss."""
  below = [_below(r) for r in runs]
  hi, lo = max(below), min(below)
  part = lambda v: f"{abs(v):.2f} {'below' if v >= 0 else 'above'}"  # noqa: E731
  return f"between {part(hi)} and {part(lo)}"


def most_below(runs: tuple[str, ...]) -> str:
  """'0.02': the most any of the runs ends below its no-context loss, 2 decimals."""
  return f"{max(_below(r) for r in runs):.2f}"


def below_ratio(run: str, margin: float = 0.1) -> str:
  """'1.5': how many times the verdict's margin a run ends below its no-context loss."""
  return f"{_below(run) / margin:.1f}"


def seed_spread(cells: tuple[tuple[str, ...], ...]) -> str:
  """'0.034': the largest range of final eval loss over one cell's seeds, among `cells`."""
  spreads = []
  for runs in cells:
    losses = [float(run_summary(r)["final_eval_loss"]) for r in runs]
    spreads.append(max(losses) - min(losses))
  return f"{max(spreads):.3f}"


def _mean_loss(runs: tuple[str, ...]) -> float:
  return sum(float(run_summary(r)["final_eval_loss"]) for r in runs) / len(runs)


def arm_gap(pairs: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], digits: int = 2) -> str:
  """'1.28-1.32': seed means of the first arm minus the second's, over (arm, arm) pairs."""
  gaps = [_mean_loss(a) - _mean_loss(b) for a, b in pairs]
  return f"{min(gaps):.{digits}f}-{max(gaps):.{digits}f}"


def gap_over_spread(pairs, cells) -> str:
  """'38': the smallest seed-mean gap of `pairs` over the largest seed range of `cells`."""
  gaps = [_mean_loss(a) - _mean_loss(b) for a, b in pairs]
  return f"{min(gaps) / float(seed_spread(cells)):.0f}"


def wall_range(runs: tuple[str, ...], digits: int = 0) -> str:
  """'9-18': the shortest and longest wall time of run folders, in minutes."""
  minutes = [float(run_summary(r)["wall_seconds"]) / 60 for r in runs]
  lo, hi = f"{min(minutes):.{digits}f}", f"{max(minutes):.{digits}f}"
  return lo if lo == hi else f"{lo}-{hi}"


def run_baseline(run: str) -> str:
  """'3.462': a run's held-out no-context loss (summary.json), 3 decimals."""
  return f"{float(run_summary(run)['heldout_unigram_entropy']):.3f}"


def escape_set(runs: tuple[str, ...]) -> str:
  """'500': the escape steps of runs, each once, in order ('250 or 500')."""
  steps = sorted({run_summary(r).get("escape_step") for r in runs}, key=lambda x: (x is None, x))
  return " or ".join(step_text(x) for x in steps)


def signed_below(run: str, digits: int = 3) -> str:
  """'0.015 above' or '0.022 below': where a run ends against its held-out no-context loss."""
  v = _below(run)
  return f"{abs(v):.{digits}f} {'below' if v >= 0 else 'above'}"


def loss_range(runs: tuple[str, ...]) -> str:
  """'2.418-2.464': the lowest and highest final eval loss of run folders, 3 decimals."""
  losses = [float(run_summary(r)["final_eval_loss"]) for r in runs]
  return f"{min(losses):.3f}-{max(losses):.3f}"


def first_below(runs: tuple[str, ...], level: float) -> str:
  """'300': the step by which every run's periodic eval has come below `level` (the latest
  of their first evals below it)."""
  firsts = []
  for r in runs:
    steps, losses = _eval_curve(r)
    firsts.append(next(s for s, v in zip(steps, losses, strict=True) if v < level))
  return step_text(max(firsts))


def no_context_gap(run: str, start: int, end: int) -> str:
  """'0.17-0.20': how far below its eval set's no-context loss a run's periodic evals are
  from step `start` to `end`, least and most, 2 decimals."""
  base = float(run_summary(run)["periodic_eval_no_context_loss"])
  gaps = [base - v for v in evals_between(run, start, end)]
  return f"{min(gaps):.2f}-{max(gaps):.2f}"


UNSEEN_CORPORA = "docs/xiong_rescue/unseen/corpora.csv"


def corpus_mb(corpus: str) -> str:
  """'9.5': an unseen corpus's size in MB (corpora.csv's bytes / 1e6), 1 decimal."""
  row = next(r for r in read(UNSEEN_CORPORA) if r["corpus"] == corpus)
  return f"{int(row['bytes']) / 1e6:.1f}"


def _train_curve(run: str) -> list[tuple[int, float]]:
  from resnorm_jax.runs.metrics_file import read_metrics

  rows = read_metrics(os.path.join(ROOT, run, record_files.METRICS))
  return [(int(r["step"]), float(r["train/loss"])) for r in rows if "train/loss" in r]


def train_band(runs: tuple[str, ...], start: int) -> str:
  """'between 0.12 below and 0.24 above': the runs' train loss from step `start` on against
  their held-out no-context loss, 2 decimals."""
  offsets = [
    loss - float(run_summary(r)["heldout_unigram_entropy"])
    for r in runs
    for step, loss in _train_curve(r)
    if step >= start
  ]
  return f"between {-min(offsets):.2f} below and {max(offsets):.2f} above"


def train_crossing(runs: tuple[str, ...]) -> str:
  """'300-310': the first logged step at which each run's train loss is below its held-out
  no-context loss, the earliest and the latest."""
  steps = []
  for r in runs:
    base = float(run_summary(r)["heldout_unigram_entropy"])
    steps.append(next(s for s, v in _train_curve(r) if v < base))
  lo, hi = step_text(min(steps)), step_text(max(steps))
  return lo if lo == hi else f"{lo}-{hi}"


SEEDS = "docs/seeds/results_seeds.csv"
REDERIVED = "docs/verdict/rederived.csv"
MAP = "docs/stability_map/results.csv"
WARMUP = "docs/xiong_warmup/results.csv"

XR = "docs/xiong_rescue/runs"
XU = "docs/xiong_rescue/unseen"


def _xr(corpus: str, warmup: int, seeds=(0, 1, 2), lr: str = "0.001", depth: int = 12) -> tuple:
  return tuple(f"{XR}/{corpus}-L{depth}-constant-lr{lr}-w{warmup}-s{k}" for k in seeds)


def _xu(warmup: int) -> tuple[str, ...]:
  return tuple(f"{XU}/{c}-L12-constant-lr0.001-w{warmup}-s0" for c in ("vim", "nodejs", "perl"))


_ARMS = (
  (_xr("stdlib", 0), _xr("stdlib", 1000)),
  (_xr("shakespeare", 0), _xr("shakespeare", 1000)),
)
_CELLS = tuple(arm for pair in _ARMS for arm in pair)
_L24 = tuple(
  f"{XR}/{c}-L24-constant-lr{lr}-w{w}-s0"
  for c in ("stdlib", "shakespeare")
  for lr in ("0.001", "0.00025")
  for w in (0, 1000)
)
_L24_ESC = f"{XR}/stdlib-L24-constant-lr0.00025-w0-s0"
_P = functools.partial
XIONG_FACTS: dict[str, doc_sections.Fact] = {
  "xiong_rescue.eval_no_context:stdlib": (
    RESULTS_MD_NAME,
    _P(eval_no_context, _xr("stdlib", 0)[0]),
  ),
  "xiong_rescue.evals:stdlib-w0-s0..1": (
    RESULTS_MD_NAME,
    _P(runs_eval_range, _xr("stdlib", 0, (0, 1)), 0, None, 2),
  ),
  "xiong_rescue.most_below:w0": (
    RESULTS_MD_NAME,
    _P(most_below, _xr("stdlib", 0) + _xr("shakespeare", 0)),
  ),
  "xiong_rescue.eval:stdlib-w0-s2:500": (
    RESULTS_MD_NAME,
    _P(eval_range, _xr("stdlib", 0, (2,))[0], 500, 500, 3),
  ),
  "xiong_rescue.below:w1000": (
    RESULTS_MD_NAME,
    _P(below_range, _xr("stdlib", 1000) + _xr("shakespeare", 1000)),
  ),
  "xiong_rescue.arm_gap": (RESULTS_MD_NAME, _P(arm_gap, _ARMS)),
  "xiong_rescue.gap_over_spread": (RESULTS_MD_NAME, _P(gap_over_spread, _ARMS, _CELLS)),
  "xiong_rescue.seed_spread": (RESULTS_MD_NAME, _P(seed_spread, _CELLS)),
  "xiong_rescue.wall:L12": (
    RESULTS_MD_NAME,
    _P(wall_range, _CELLS[0] + _CELLS[1] + _CELLS[2] + _CELLS[3]),
  ),
  "xiong_rescue.wall:unseen": (RESULTS_MD_NAME, _P(wall_range, _xu(0) + _xu(1000), 1)),
  "xiong_rescue.wall:L24": (RESULTS_MD_NAME, _P(wall_range, _L24)),
  **{
    f"xiong_rescue.baseline:{c}": (
      RESULTS_MD_NAME,
      _P(run_baseline, f"{XU}/{c}-L12-constant-lr0.001-w0-s0"),
    )
    for c in ("vim", "nodejs", "perl")
  },
  **{
    f"xiong_rescue.corpus_mb:{c}": (RESULTS_MD_NAME, _P(corpus_mb, c))
    for c in ("vim", "nodejs", "perl")
  },
  "xiong_rescue.train_band:unseen-w0": (RESULTS_MD_NAME, _P(train_band, _xu(0), 50)),
  "xiong_rescue.train_crossing:unseen-w1000": (RESULTS_MD_NAME, _P(train_crossing, _xu(1000))),
  "xiong_rescue.below:unseen-w1000": (RESULTS_MD_NAME, _P(below_range, _xu(1000))),
  "xiong_rescue.below_or_above:unseen-w0": (RESULTS_MD_NAME, _P(below_or_above, _xu(0))),
  "xiong_rescue.escapes:unseen-w1000": (RESULTS_MD_NAME, _P(escape_set, _xu(1000))),
  "xiong_rescue.evals:L24-esc": (RESULTS_MD_NAME, _P(eval_list, _L24_ESC, 250)),
  "xiong_rescue.evals:L24-stdlib-lr0.00025-w1000:1000-": (
    RESULTS_MD_NAME,
    _P(runs_eval_range, (f"{XR}/stdlib-L24-constant-lr0.00025-w1000-s0",), 1000, None, 2),
  ),
  **{
    f"xiong_rescue.evals:L24-shakespeare-lr0.00025-w{w}:750-": (
      RESULTS_MD_NAME,
      _P(runs_eval_range, (f"{XR}/shakespeare-L24-constant-lr0.00025-w{w}-s0",), 750, None, 2),
    )
    for w in (0, 1000)
  },
  **{
    f"xiong_rescue.evals:L24-{c}-lr0.001:500-": (
      RESULTS_MD_NAME,
      _P(
        runs_eval_range,
        tuple(f"{XR}/{c}-L24-constant-lr0.001-w{w}-s0" for w in (0, 1000)),
        500,
        None,
        2,
      ),
    )
    for c in ("stdlib", "shakespeare")
  },
  "xiong_rescue.below:L24-esc": (RESULTS_MD_NAME, _P(below_range, (_L24_ESC,))),
  "xiong_rescue.below_ratio:L24-esc": (RESULTS_MD_NAME, _P(below_ratio, _L24_ESC)),
}

GRAD = "docs/grad_norms_at_init"


def _per_layer(variant: str, depth: int) -> dict[int, float]:
  rows = read(f"{GRAD}/grad_norms_per_layer_L{depth}.csv")
  return {int(r["layer"]): float(r["w2_grad_norm"]) for r in rows if r["config"] == variant}


def grad_layers(variant: str, depth: int, first: int, last: int, digits: int = 3) -> str:
  """'0.478', or '1.19-1.43' over several layers: a variant's FFN W2 gradient norm at init at
  layers `first`-`last` (grad_norms_per_layer_L<depth>.csv)."""
  values = [v for k, v in _per_layer(variant, depth).items() if first <= k <= last]
  lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
  return lo if lo == hi else f"{lo}-{hi}"


def _last(variant: str) -> dict[int, float]:
  rows = read(f"{GRAD}/grad_norms_vs_depth.csv")
  return {int(r["depth"]): float(r["last_w2_grad_norm"]) for r in rows if r["config"] == variant}


def grad_last(variant: str, depth: int) -> str:
  """'1.120': the last layer's W2 gradient norm at init at a depth (grad_norms_vs_depth.csv)."""
  return f"{_last(variant)[depth]:.3f}"


def grad_last_range(variant: str) -> str:
  """'1.12-1.33': the last layer's W2 gradient norm over every depth, 2 decimals."""
  values = _last(variant).values()
  return f"{min(values):.2f}-{max(values):.2f}"


def grad_last_factor(variant: str) -> str:
  """'5.0': the shallowest depth's last-layer W2 gradient norm over the deepest's, 1 decimal."""
  d = _last(variant)
  return f"{d[min(d)] / d[max(d)]:.1f}"


_P2 = functools.partial
GRAD_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"grad_norms.L24:{v}:{k}": (RESULTS_MD_NAME, _P2(grad_layers, v, 24, k, k))
    for v in MAIN
    for k in (0, 6, 12, 18, 23)
  },
  **{
    f"grad_norms.last:{v}:L{d}": (RESULTS_MD_NAME, _P2(grad_last, v, d))
    for v in MAIN
    for d in (6, 12, 24, 48, 96)
  },
  "grad_norms.last_range:postnorm": (RESULTS_MD_NAME, _P2(grad_last_range, "postnorm")),
  "grad_norms.last_factor:prenorm": (RESULTS_MD_NAME, _P2(grad_last_factor, "prenorm")),
  "grad_norms.L24:postnorm:0:2": (RESULTS_MD_NAME, _P2(grad_layers, "postnorm", 24, 0, 0, 2)),
  "grad_norms.L24:postnorm:18-23": (RESULTS_MD_NAME, _P2(grad_layers, "postnorm", 24, 18, 23, 2)),
  "grad_norms.L6:postnorm:0-4": (RESULTS_MD_NAME, _P2(grad_layers, "postnorm", 6, 0, 4, 2)),
  "grad_norms.L6:postnorm:5": (RESULTS_MD_NAME, _P2(grad_layers, "postnorm", 6, 5, 5, 2)),
  "grad_norms.L24:prenorm:0:2": (RESULTS_MD_NAME, _P2(grad_layers, "prenorm", 24, 0, 0, 2)),
  "grad_norms.L24:prenorm:12-23": (RESULTS_MD_NAME, _P2(grad_layers, "prenorm", 24, 12, 23, 2)),
  "grad_norms.L96:postnorm": (RESULTS_MD_NAME, _P2(grad_layers, "postnorm", 96, 0, 95, 1)),
}

FLOW = "docs/grad_flow/grad_flow.csv"
FLOW_STATES = {
  "init": "init",
  status.TRAINED: "after 5 steps",
  "reset norm_bias": "biases back",
  "reset attn": "attention back",
  "reset mlp": "FFN back",
  "reset norm_scale": "gains back",
  "reset outside_layers": "embeddings back",
}


def _flow(state: str) -> dict[int, float]:
  return {int(r["layer"]): float(r["grad_norm"]) for r in read(FLOW) if r["state"] == state}


def flow_text(value: float) -> str:
  """A gradient norm as the grad-flow table writes it: '0.278' from 0.03 up, '6.2e-5' below."""
  if value >= 0.03:
    return f"{value:.3f}"
  mantissa, exponent = f"{value:.1e}".split("e")
  return f"{mantissa}e{int(exponent)}"


def flow_value(state: str, layer: int) -> str:
  """'0.278': one layer's parameter-gradient norm in a grad-flow state (grad_flow.csv)."""
  return flow_text(_flow(state)[layer])


def flow_ratio(state: str) -> str:
  """'3,050': the last layer's gradient norm over the first's in a state, 3 significant
  digits, thousands with commas ('2.8', '1.01')."""
  g = _flow(state)
  ratio = float(f"{g[max(g)] / g[min(g)]:.3g}")
  return f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.3g}"


def flow_dip(state: str) -> str:
  """'6.5': how many times lower the mid-stack layer's gradient is than the lower of the two
  ends', 1 decimal."""
  g = _flow(state)
  mid = g[(max(g) + 1) // 2]
  return f"{min(g[min(g)], g[max(g)]) / mid:.1f}"


FLOW_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"grad_flow.{state.replace(' ', '_')}:{layer}": (
      RESULTS_MD_NAME,
      functools.partial(flow_value, state, layer),
    )
    for state in FLOW_STATES
    for layer in (0, 250, 500, 750, 999)
  },
  **{
    f"grad_flow.ratio:{state.replace(' ', '_')}": (
      RESULTS_MD_NAME,
      functools.partial(flow_ratio, state),
    )
    for state in FLOW_STATES
  },
  "grad_flow.dip:reset_norm_bias": (
    RESULTS_MD_NAME,
    functools.partial(flow_dip, "reset norm_bias"),
  ),
}

DP = "docs/deepnet_panel"


def _dp(variant: str, depth: int, folder: str = "runs") -> str:
  return f"{DP}/{folder}/{variant}-L{depth}-invsqrt-w200"


_S0_18 = _dp("postnorm", 18)
_S1_18 = _dp("postnorm", 18, "runs_seed1")
_S2_18 = _dp("postnorm", 18, "runs_seed2")
_SEEDS_18 = (_S0_18, _S1_18, _S2_18)
# name: (runs, first step, last step, decimals): the periodic-eval ranges the page states
DEEPNET_RANGES = {
  "postnorm-L96:200-1000": ((_dp("postnorm", 96),), 200, 1000, 2),
  "postnorm-L48:200-1000": ((_dp("postnorm", 48),), 200, 1000, 2),
  "postnorm-L24:300-1000": ((_dp("postnorm", 24),), 300, 1000, 2),
  "postnorm-L18-s0:300-700": ((_S0_18,), 300, 700, 2),
  "postnorm-L18-s1:300-1000": ((_S1_18,), 300, 1000, 2),
  "postnorm-L18-s2:400-700": ((_S2_18,), 400, 700, 2),
  "postnorm-L18-s2:900-1000": ((_S2_18,), 900, 1000, 2),
  "shakespeare:postnorm-L24:200-1000": ((_dp("postnorm", 24, "shakespeare"),), 200, 1000, 2),
  "vim:postnorm-L24:200-1000": ((_dp("postnorm", 24, "vim"),), 200, 1000, 2),
  "postnorm-L18-s0:800": ((_S0_18,), 800, 800, 3),
  "postnorm-L18-s0:1000": ((_S0_18,), 1000, 1000, 3),
  "prenorm-L96:1000": ((_dp("prenorm", 96),), 1000, 1000, 3),
  "deepnorm-L96:1000": ((_dp("deepnorm", 96),), 1000, 1000, 2),
  "prenorm-L48:1000": ((_dp("prenorm", 48),), 1000, 1000, 2),
  "deepnorm-L48:1000": ((_dp("deepnorm", 48),), 1000, 1000, 2),
}
DEEPNET_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"deepnet_panel.evals:{k}": (RESULTS_MD_NAME, functools.partial(runs_eval_range, *v))
    for k, v in DEEPNET_RANGES.items()
  },
  **{
    f"deepnet_panel.below_2.5:L{d}": (
      RESULTS_MD_NAME,
      functools.partial(first_below, (_dp("prenorm", d), _dp("deepnorm", d)), 2.5),
    )
    for d in (24, 48, 96)
  },
  **{
    f"deepnet_panel.wall:L{'-'.join(map(str, ds))}": (
      RESULTS_MD_NAME,
      functools.partial(
        wall_range,
        tuple(
          _dp(v, d, f)
          for v in MAIN
          for d in ds
          for f in ("runs", "runs_seed1", "runs_seed2")
          if os.path.isdir(os.path.join(ROOT, _dp(v, d, f)))
        ),
      ),
    )
    for ds in ((18, 24), (48,), (96,))
  },  # fmt: skip
  "deepnet_panel.wall:corpora": (
    RESULTS_MD_NAME,
    functools.partial(
      wall_range, tuple(_dp(v, 24, c) for v in MAIN for c in ("shakespeare", "vim"))
    ),
  ),
  "deepnet_panel.count_stuck:postnorm-L18": (
    RESULTS_MD_NAME,
    lambda: (
      f"{sum(run_summary(r)['outcome'] == status.STUCK for r in (_S0_18, _S1_18, _S2_18))} of 3"
    ),
  ),
  "deepnet_panel.below:postnorm-L18-s0": (
    RESULTS_MD_NAME,
    functools.partial(below_range, (_S0_18,)),
  ),
  "deepnet_panel.below:trained-s0": (
    RESULTS_MD_NAME,
    functools.partial(
      below_range, tuple(_dp(v, d) for v in ("prenorm", "deepnorm") for d in (18, 24, 48, 96)), 1
    ),
  ),
  "deepnet_panel.eval_gap:postnorm-L18-s2:400-700": (
    RESULTS_MD_NAME,
    functools.partial(no_context_gap, _S2_18, 400, 700),
  ),
  "deepnet_panel.baseline:vim": (
    RESULTS_MD_NAME,
    functools.partial(run_baseline, _dp("postnorm", 24, "vim")),
  ),
  "deepnet_panel.eval_no_context": (RESULTS_MD_NAME, functools.partial(eval_no_context, _S0_18)),
}

_R = "docs/runs"
# name: (run under docs/runs, first step, last step, decimals): the 1000-layer runs' evals
RUNS_EVALS = {
  **{
    f"{v}-L1000-lr0.0002-w50:600": (f"{v}-L1000-lr0.0002-w50", 600, 600, 3)
    for v in ("postnorm", "prenorm", "deepnorm")
  },
  "deepnorm-L1000-lr0.0002-w0:100": ("deepnorm-L1000-lr0.0002-w0", 100, 100, 2),
  "deepnorm-L1000-lr0.0002-w0:200": ("deepnorm-L1000-lr0.0002-w0", 200, 200, 2),
  "deepnorm-L1000-lr0.0002-w0:600": ("deepnorm-L1000-lr0.0002-w0", 600, 600, 2),
  "deepnorm-L1000-lr0.0002-w0:600:3": ("deepnorm-L1000-lr0.0002-w0", 600, 600, 3),
  "deepnorm-L1000-lr0.0002-w0:100:3": ("deepnorm-L1000-lr0.0002-w0", 100, 100, 3),
  "deepnorm-L1000-lr0.0002-w200:600": ("deepnorm-L1000-lr0.0002-w200", 600, 600, 3),
  "deepnorm-L1000-lr0.0002-w200:100": ("deepnorm-L1000-lr0.0002-w200", 100, 100, 3),
  "deepnorm-L1000-lr0.001-w0:50-600": ("deepnorm-L1000-lr0.001-w0", 50, 600, 2),
  "deepnorm-L1000-lr0.001-w0:600": ("deepnorm-L1000-lr0.001-w0", 600, 600, 3),
  "deepnorm-L1000-lr0.001-w0:50": ("deepnorm-L1000-lr0.001-w0", 50, 50, 2),
  **{
    f"deepnorm-L1000-lr0.001-w200:{k}": ("deepnorm-L1000-lr0.001-w200", k, k, 3)
    for k in (100, 200, 600)
  },
  **{
    f"deepnorm_frozen-L1000-lr0.001-w0:{k}": ("deepnorm_frozen-L1000-lr0.001-w0", k, k, 3)
    for k in (100, 300, 400, 600)
  },
  "deepnorm_frozen-L1000-lr0.001-w0:50": ("deepnorm_frozen-L1000-lr0.001-w0", 50, 50, 2),
}
_WALLS = (
  ("postnorm-L1000-lr0.0002-w50", "prenorm-L1000-lr0.0002-w50"),
  ("deepnorm-L1000-lr0.0002-w50",),
  ("deepnorm-L1000-lr0.0002-w0",),
  ("deepnorm-L1000-lr0.001-w0",),
  ("deepnorm-L1000-lr0.001-w200",),
  ("deepnorm_frozen-L1000-lr0.001-w0",),
  ("deepnorm_1000L_lr2e-4",),
)
RUNS_FACTS: dict[str, doc_sections.Fact] = {
  **{
    f"runs.evals:{k}": (
      RESULTS_MD_NAME,
      functools.partial(runs_eval_range, (f"{_R}/{v[0]}",), *v[1:]),
    )
    for k, v in RUNS_EVALS.items()
  },
  **{
    f"runs.wall:{'/'.join(runs)}": (
      RESULTS_MD_NAME,
      functools.partial(wall_range, tuple(f"{_R}/{r}" for r in runs)),
    )
    for runs in _WALLS
  },
  **{
    f"runs.signed_below:{r}": (RESULTS_MD_NAME, functools.partial(signed_below, f"{_R}/{r}", 2))
    for r in (
      "prenorm-L1000-lr0.0002-w50",
      "deepnorm-L1000-lr0.0002-w50",
      "deepnorm-L1000-lr0.001-w0",
      "postnorm-L1000-lr0.0002-w50",
    )
  },
}

# Numbers in docs/results.md's prose computed here (resnorm_jax.analysis.claims.readme).
FACTS: dict[str, doc_sections.Fact] = {
  **RUNS_FACTS,
  **DEEPNET_FACTS,
  **GRAD_FACTS,
  **FLOW_FACTS,
  **{
    f"stability_map.loss:{v}-L{d}": (RESULTS_MD_NAME, functools.partial(csv_loss, MAP, f"{v}-L{d}"))
    for v in MAIN
    for d in (6, 12, 96)
  },
  **{
    f"stability_map.loss:{v}-L1000": (
      RESULTS_MD_NAME,
      functools.partial(csv_loss, MAP, f"{v}-L1000"),
    )
    for v in ("postnorm", "prenorm")
  },
  **{
    f"seeds.L24.mean_std:{v}": (RESULTS_MD_NAME, functools.partial(seeds_mean_std, v)) for v in MAIN
  },
  **{f"seeds.L24.range:{v}": (RESULTS_MD_NAME, functools.partial(seeds_range, v)) for v in MAIN},
  **{
    f"seeds.L24.{c}:{v}": (RESULTS_MD_NAME, functools.partial(seeds_value, v, c))
    for v in MAIN
    for c in ("final_eval_mean", "final_eval_std", "final_eval_min", "final_eval_max")
  },
  "seeds.L24.gap": (RESULTS_MD_NAME, seeds_gap),
  "seeds.L24.gap_over_spread": (RESULTS_MD_NAME, seeds_gap_over_spread),
  **{
    f"xiong_warmup.loss:{n}": (RESULTS_MD_NAME, functools.partial(csv_loss, WARMUP, n))
    for n in (
      "postnorm-L24-constant-w0-lr0.0001",
      "postnorm-L24-inverse_sqrt-w1000-lr0.0001",
      "postnorm-L12-inverse_sqrt-w0-lr0.001",
      "postnorm-L12-inverse_sqrt-w200-lr0.001",
      "postnorm-L12-constant-w0-lr0.001",
      "postnorm-L12-constant-w200-lr0.001",
      "postnorm-L24-inverse_sqrt-w1000-lr0.0005",
      "postnorm-L24-constant-w200-lr0.001",
      "postnorm-L6-constant-w0-lr0.003",
      "postnorm-L6-constant-w200-lr0.003",
      "prenorm-L6-constant-w0-lr0.003",
    )
  },
  "xiong_warmup.runs": (RESULTS_MD_NAME, lambda: str(len(read(WARMUP)))),
  "xiong_warmup.below:postnorm-L24-inverse_sqrt-w1000-lr0.0001": (
    RESULTS_MD_NAME,
    functools.partial(below_no_context, WARMUP, "postnorm-L24-inverse_sqrt-w1000-lr0.0001"),
  ),
  "model_update.growth:postnorm": (
    RESULTS_MD_NAME,
    functools.partial(update_growth, "postnorm", 0),
  ),
  "model_update.growth:deepnorm": (
    RESULTS_MD_NAME,
    functools.partial(update_growth, "deepnorm", 1),
  ),
  "model_update.postnorm_over_deepnorm:96-192": (
    RESULTS_MD_NAME,
    functools.partial(update_ratio, (96, 192)),
  ),
  "runs.below:deepnorm_frozen-L1000-lr0.001-w0": (
    RESULTS_MD_NAME,
    functools.partial(
      csv_loss, "docs/runs/results.csv", "deepnorm_frozen-L1000-lr0.001-w0", "gap", 2
    ),
  ),
  **XIONG_FACTS,
  **{
    f"stability_map.loss:{v}-L{d}": (RESULTS_MD_NAME, functools.partial(csv_loss, MAP, f"{v}-L{d}"))
    for v in (
      "rmsnorm_prenorm",
      "sandwich",
      "rezero",
      "layerscale",
      "dyt",
      "parallel",
      "batchnorm",
      "noresidual",
    )
    for d in (6, 24, 96)
  },
  **{
    f"stability_map.loss:{v}-L24": (RESULTS_MD_NAME, functools.partial(csv_loss, MAP, f"{v}-L24"))
    for v in MAIN
  },
  **{
    f"stability_map.train_loss:{v}-L96": (
      RESULTS_MD_NAME,
      functools.partial(csv_loss, MAP, f"{v}-L96", "final_train_loss"),
    )
    for v in MAIN
  },
  "stability_map.below:prenorm-L1000": (
    RESULTS_MD_NAME,
    functools.partial(below_no_context, MAP, "prenorm-L1000", 3),
  ),
  "stability_map.range:later-L24": (
    RESULTS_MD_NAME,
    functools.partial(
      loss_range,
      tuple(f"docs/stability_map/runs/{v}-L24" for v in ("subln", "admin", "lnscale", "hyperconn")),
    ),
  ),
  **{
    f"stability_map.signed_below:ngpt-L{d}": (
      RESULTS_MD_NAME,
      functools.partial(signed_below, f"docs/stability_map/runs/ngpt-L{d}"),
    )
    for d in (6, 24, 96)
  },
  **{
    f"stability_boundary.eval:shakespeare:postnorm-L24-lr0.00025-w0:{step}": (
      RESULTS_MD_NAME,
      functools.partial(
        eval_range,
        "docs/stability_boundary/runs_shakespeare/postnorm-L24-lr0.00025-w0",
        step,
        step,
        3,
      ),
    )
    for step in (50, 300)
  },
  "runs.eval_range_from_350:postnorm-L1000-lr0.0002-w50": (
    RESULTS_MD_NAME,
    functools.partial(eval_range, "docs/runs/postnorm-L1000-lr0.0002-w50", 350),
  ),
  "xiong_rescue.escape.stdlib.w1000": (
    RESULTS_MD_NAME,
    lambda: _escapes(XIONG_W1000.format(corpus="stdlib")),
  ),
  "xiong_rescue.escape.shakespeare.w1000": (
    RESULTS_MD_NAME,
    lambda: _escapes(XIONG_W1000.format(corpus="shakespeare")),
  ),
  "xiong_rescue.escape.w1000.all": (RESULTS_MD_NAME, _xiong_w1000_steps),
}
