"""Numbers in docs/results.md's prose that no axis module of this package states: the verdicts
re-derived by the held-out rule (docs/verdict/), and the stabilizers' and the gate's (their
modules, stabilizers.py and gate.py, state their own pages'). No JAX."""

from __future__ import annotations

import functools
import os

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims.docs_data import ROOT, read, run_summary
from resnorm_jax.analysis.claims.reproductions_facts import (
  below_range,
  csv_loss,
  escape_set,
  eval_range,
)
from resnorm_jax.runs import status

RESULTS_MD = os.path.join(ROOT, "docs", "results.md")
REDERIVED = "docs/verdict/rederived.csv"
BOUNDARY = "docs/stability_boundary/results.csv"
BOUNDARY_RUNS = "docs/stability_boundary/runs"


def verdicts_changed() -> str:
  """'none of their 64 verdicts changes': the older runs' verdicts re-judged by the held-out
  rule (docs/verdict/rederived.csv: a row per run, `changed` set where the verdict moved)."""
  rows = read(REDERIVED)
  changed = sum(bool(r["changed"].strip()) for r in rows)
  if not changed:
    return f"none of their {len(rows)} verdicts changes"
  return f"{changed} of their {len(rows)} verdicts change{'s' if changed == 1 else ''}"


def run_count(path: str) -> str:
  """'214': the runs (rows) of a results CSV."""
  return str(len(read(path)))


def outcome_count(runs: tuple[str, ...], outcome: str = status.TRAINED) -> str:
  """'2 of 3': the run folders `runs` whose summary.json's outcome is `outcome`."""
  return f"{sum(run_summary(r).get('outcome') == outcome for r in runs)} of {len(runs)}"


NOISE = "docs/verdict/plateau_noise.csv"
ESCAPES = "docs/verdict/escape_steps.csv"


def noise(corpus: str, column: str, digits: int) -> str:
  """'0.038': a corpus's `column` of plateau_noise.csv (the unigram model's eval-set std, the
  held-out and train entropies), `digits` decimals."""
  row = next(r for r in read(NOISE) if r["corpus"] == corpus)
  return f"{float(row[column]):.{digits}f}"


def loop_offset() -> str:
  """'0.015': how far the exact unigram model scores from the held-out baseline on the loop's
  own eval set, the larger over the corpora, 3 decimals."""
  offsets = [
    abs(float(r["unigram_model_on_loop_eval_set"]) - float(r["heldout_unigram_entropy"]))
    for r in read(NOISE)
  ]
  return f"{max(offsets):.3f}"


def margin_over_std() -> str:
  """'2.6': the verdict's 0.1-nat margin over the larger eval-set std, 1 decimal."""
  return f"{0.1 / max(float(r['unigram_model_eval_std']) for r in read(NOISE)):.1f}"


def _below(outcome: str) -> list[float]:
  """How far below its baseline each committed run of an outcome ends (escape_steps.csv)."""
  return [
    float(r["baseline"]) - float(r["final_eval_loss"])
    for r in read(ESCAPES)
    if r["outcome"] == outcome
  ]


def stuck_deepest() -> str:
  """'0.045': the most a stuck run ends below its baseline, 3 decimals."""
  return f"{max(_below(status.STUCK)):.3f}"


def trained_shallowest() -> str:
  """'0.147': the least a trained run ends below its baseline, 3 decimals."""
  return f"{min(_below(status.TRAINED)):.3f}"


def trained_within(nats: float) -> str:
  """'42 of the 249': the trained runs that end less than `nats` below their baseline."""
  below = _below(status.TRAINED)
  return f"{sum(b < nats for b in below)} of the {len(below)}"


def escape_census(kind: str) -> str:
  """The committed runs' escape census (escape_steps.csv): 'runs' (all), 'escaped', 'never',
  'diverged' ('none' when 0), 'late' (escaped after half their budget), 'late_boundary' (of
  those, in the stability-boundary sweep), 'late_other' (the rest), 'eval_set' (runs with an
  eval-set no-context loss), 'split_only' (the others)."""
  rows = read(ESCAPES)
  late = [
    r for r in rows if r["escape_step"] and int(float(r["escape_step"])) > int(r["steps"]) / 2
  ]
  boundary = [r for r in late if r["path"].startswith("docs/stability_boundary/")]
  count = {
    "runs": len(rows),
    "escaped": sum(bool(r["escape_step"]) for r in rows),
    "never": sum(not r["escape_step"] for r in rows),
    status.DIVERGED: sum(bool(r["diverged_step"]) for r in rows),
    "late": len(late),
    "late_boundary": len(boundary),
    "late_other": len(late) - len(boundary),
    "eval_set": sum(bool(r["eval_set_baseline"]) for r in rows),
    "split_only": sum(not r["eval_set_baseline"] for r in rows),
  }[kind]
  return "none" if kind == status.DIVERGED and not count else str(count)


BASELINES = "docs/verdict/eval_set_baselines.csv"


def eval_set_offset(baseline: str, margin: float = 0.0, digits: int = 3) -> str:
  """'0.060': the periodic eval set's no-context loss minus the split's, for the corpus whose
  split baseline starts with `baseline`, plus `margin` (0.1: what an escape would have needed
  against the split's value)."""
  row = next(r for r in read(BASELINES) if r["baseline"].startswith(baseline) and r["offset"])
  return f"{float(row['offset']) + margin:.{digits}f}"


def boundary_range(variant: str, depths: tuple[int, ...], lo: float, hi: float) -> str:
  """'3.248-3.314': the lowest and highest final eval loss of the stability boundary's seed-0
  runs without warmup (results.csv) of a variant at `depths` and lrs `lo`-`hi`."""
  losses = [
    float(r["final_eval_loss"])
    for r in read(BOUNDARY)
    if r["variant"] == variant
    and int(r["num_layers"]) in depths
    and r["seed"] == "0"
    and r["opt.warmup_steps"] == "0"
    and lo <= float(r["opt.lr"]) <= hi
  ]
  return f"{min(losses):.3f}-{max(losses):.3f}"


def _b(name: str, folder: str = "runs") -> str:
  return f"docs/stability_boundary/{folder}/{name}"


_BOUNDARY_RANGES = {
  "postnorm:L24-48": ("postnorm", (24, 48), 0, 1),
  "postnorm:L24-48:from5e-4": ("postnorm", (24, 48), 5e-4, 1),
  "postnorm:L24-48:to2.5e-4": ("postnorm", (24, 48), 0, 2.5e-4),
  "deepnorm:L6-48:4e-3": ("deepnorm", (6, 12, 24, 48), 4e-3, 4e-3),
  "prenorm:L6-48:8e-3": ("prenorm", (6, 12, 24, 48), 8e-3, 8e-3),
}
_BOUNDARY_EVALS = (
  ("rezero-L6-lr0.000125-w0", 50),
  ("rezero-L6-lr0.000125-w0", 300),
  ("postnorm-L48-lr0.000125-w0", 300),
  ("postnorm-L12-lr0.002-w100", 200),
  ("postnorm-L12-lr0.002-w100", 250),
)


MECHANISM = "docs/mechanism/mechanism.csv"
RATIO = "grad_low_over_high"  # the first 3 layers' gradient norm over the last 3's


def mech_text(column: str, value: float) -> str:
  """A mechanism.csv number as the page writes it: the gradient ratio to 3 significant digits
  (2 in the '3.4e-4' form below 1e-3), every other column to 3 decimals."""
  if column != RATIO:
    return f"{value:.3f}"
  if value >= 1e-3:
    return f"{value:.3g}"
  mantissa, exponent = f"{value:.1e}".split("e")
  return f"{mantissa}e{int(exponent)}"


def _mech(variant: str, columns: str, start: int = 0, end: int | None = None) -> list[float]:
  """A variant's values of `columns` ('a/b': both) at logged steps `start`-`end`."""
  return [
    float(r[c])
    for r in read(MECHANISM)
    if r["variant"] == variant and start <= int(r["step"]) <= (end if end is not None else 1e18)
    for c in columns.split("/")
  ]


def mech_value(variant: str, column: str, step: int) -> str:
  """'0.433': one logged value of mechanism.csv (24 layers, a variant, a step)."""
  (value,) = _mech(variant, column, step, step)
  return mech_text(column, value)


def mech_range(variant: str, columns: str, start: int = 0) -> str:
  """'0.034-0.079': the lowest and highest of a variant's `columns` from step `start` on."""
  values = _mech(variant, columns, start)
  column = columns.split("/")[0]
  return f"{mech_text(column, min(values))}-{mech_text(column, max(values))}"


_MECH_STEPS = (5, 25, 100, 500)
_MECH_COLUMNS = ("update_norm", RATIO, "norm_in_rms_last")
_MECH_RANGES = (
  ("postnorm", "update_norm", 100),
  ("deepnorm", "update_norm", 100),
  ("prenorm", "update_norm", 100),
  ("deepnorm", RATIO, 0),
  ("prenorm", RATIO, 0),
  ("deepnorm", "norm_in_rms_first/norm_in_rms_last", 0),
  ("prenorm", "norm_in_rms_first", 0),
  ("prenorm", "norm_in_rms_last", 0),
)


# Numbers in docs/results.md's prose computed here (resnorm_jax.analysis.claims.readme).
FACTS: dict[str, doc_sections.Fact] = {
  "verdict.rederived.changed": (RESULTS_MD, verdicts_changed),
  **{
    f"mechanism.{c}:{v}:{step}": (RESULTS_MD, functools.partial(mech_value, v, c, step))
    for step in _MECH_STEPS
    for c in _MECH_COLUMNS
    for v in ("postnorm", "deepnorm", "prenorm")
  },
  **{
    f"mechanism.range:{c}:{v}:from{start}": (RESULTS_MD, functools.partial(mech_range, v, c, start))
    for v, c, start in _MECH_RANGES
  },
  **{
    f"verdict.escapes.{k}": (RESULTS_MD, functools.partial(escape_census, k))
    for k in (
      "escaped",
      "never",
      status.DIVERGED,
      "late",
      "late_boundary",
      "late_other",
      "eval_set",
      "split_only",
    )
  },
  "verdict.eval_set.need:stdlib": (
    RESULTS_MD,
    functools.partial(eval_set_offset, "3.2383", 0.1, 2),
  ),
  "verdict.eval_set.offset:shakespeare": (RESULTS_MD, functools.partial(eval_set_offset, "3.3474")),
  "verdict.noise.loop_offset": (RESULTS_MD, loop_offset),
  "verdict.noise.margin_over_std": (RESULTS_MD, margin_over_std),
  "verdict.stuck.deepest": (RESULTS_MD, stuck_deepest),
  "verdict.trained.shallowest": (RESULTS_MD, trained_shallowest),
  "verdict.trained.within_0.6": (RESULTS_MD, functools.partial(trained_within, 0.6)),
  **{
    f"verdict.noise.{column}:{corpus}": (RESULTS_MD, functools.partial(noise, corpus, column, d))
    for corpus in ("stdlib", "tinyshakespeare")
    for column, d in (
      ("unigram_model_eval_std", 3),
      ("heldout_unigram_entropy", 4),
      ("unigram_entropy", 4),
    )
  },
  "stability_boundary.runs": (RESULTS_MD, lambda: run_count(BOUNDARY)),
  "verdict.escape_steps.runs": (RESULTS_MD, lambda: run_count("docs/verdict/escape_steps.csv")),
  "stability_boundary.count:postnorm-L12-lr0.0005-w0": (
    RESULTS_MD,
    lambda: outcome_count(
      tuple(
        f"docs/stability_boundary/{d}/postnorm-L12-lr0.0005-w0"
        for d in ("runs", "runs_seed1", "runs_seed2")
      )
    ),
  ),
  **{
    f"stability_boundary.eval:postnorm-L24-lr0.000125-w0:{step}": (
      RESULTS_MD,
      lambda step=step: eval_range(f"{BOUNDARY_RUNS}/postnorm-L24-lr0.000125-w0", step, step, 3),
    )
    for step in (50, 300)
  },
  **{
    f"stability_boundary.range:{k}": (RESULTS_MD, functools.partial(boundary_range, *v))
    for k, v in _BOUNDARY_RANGES.items()
  },
  **{
    f"stability_boundary.eval:{run}:{step}": (
      RESULTS_MD,
      functools.partial(eval_range, _b(run), step, step, 3),
    )
    for run, step in _BOUNDARY_EVALS
  },
  **{
    f"stability_boundary.below:{run}": (RESULTS_MD, functools.partial(below_range, (_b(run),)))
    for run in ("dyt-L24-lr0.008-w0", "deepnorm-L24-lr0.008-w0", "postnorm-L12-lr0.0005-w0")
  },
  "stability_boundary.escapes:deepnorm:L6-48:4e-3": (
    RESULTS_MD,
    functools.partial(escape_set, tuple(_b(f"deepnorm-L{d}-lr0.004-w0") for d in (6, 12, 24, 48))),
  ),
  "stability_boundary.below:postnorm-L12-lr0.002-w100": (
    RESULTS_MD,
    lambda: csv_loss(BOUNDARY, "postnorm-L12-lr0.002-w100", "gap", 2),
  ),
}
