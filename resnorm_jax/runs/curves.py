"""A run folder as the figures read it: the folders that paths and globs name, the train and eval
curves, the no-context loss the periodic eval curve is drawn against (and which one it is), the
corpus's short name, and run_record, what the curve and per-seed figures draw of a run.
No JAX here.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.data.fs import read_json
from resnorm_jax.runs import record_files
from resnorm_jax.runs.escape import curve_path, run_fields
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.runs.outcome import EVAL_SET_BASELINE, curve_baseline, is_finite_number


def expand_runs(patterns: Sequence[str]) -> list[str]:
  """Run folders (holding a curve file) matching the paths or globs, in the given order."""
  runs: list[str] = []
  for pattern in patterns:
    matches = sorted(glob.glob(os.path.expanduser(pattern))) or [pattern]
    for path in matches:
      if curve_path(path) and path not in runs:
        runs.append(path)
  return runs


def read_curves(run_dir: str) -> dict[str, Any]:
  """{'train': (steps, losses), 'eval': (steps, losses), 'unigram': float | None}.

  'unigram' is the plateau of the periodic eval curve, the no-context loss its escape is judged
  against (`eval_baseline`).
  """
  records = read_metrics(curve_path(run_dir) or os.path.join(run_dir, record_files.METRICS))
  curves: dict[str, Any] = {}
  for key, name in (("train/loss", "train"), ("eval/loss", "eval")):
    points = [(r["step"], r[key]) for r in records if key in r]
    curves[name] = ([s for s, _ in points], [v for _, v in points])
  curves["unigram"] = eval_baseline(run_dir)
  return curves


def eval_baseline(run_dir: str) -> float | None:
  """The no-context loss a run's periodic eval curve is drawn against: the one its escape step
  is judged against (outcome.curve_baseline: the periodic eval's own tokens', e.g. 3.299 on
  stdlib, not the whole held-out split's 3.238; the split's for runs that predate it)."""
  summary = read_json(os.path.join(run_dir, record_files.SUMMARY))
  return curve_baseline(summary) if isinstance(summary, dict) else None


# What a run's curve baseline is, by the summary key it came from (outcome.curve_baseline's
# order): its periodic eval set's own no-context loss, else the held-out split's, else (runs
# older still) the train split's unigram entropy.
BASELINE_KINDS = {
  EVAL_SET_BASELINE: "the periodic eval's tokens'",
  "heldout_unigram_entropy": "the held-out split's",
  "unigram_entropy": "the train split's unigram entropy",
}


def baseline_kind(run_dir: str) -> str | None:
  """Which no-context loss `eval_baseline` is for this run (a BASELINE_KINDS key)."""
  summary = read_json(os.path.join(run_dir, record_files.SUMMARY)) or {}
  return next((k for k in BASELINE_KINDS if is_finite_number(summary.get(k))), None)


# Configs named for an experiment rather than a variant, drawn in their variant's colour.
VARIANT_ALIASES = {"xiong_rescue": "postnorm"}


# The text corpora the docs name, by a part of their path (docs/xiong_rescue/unseen/corpora.csv).
CORPUS_NAMES = {
  "tinyshakespeare": "tiny Shakespeare",
  "vim": "Vim help",
  "nodejs": "Node.js API docs",
  "perl": "Perl pod",
}


def corpus_name(data: Mapping[str, Any] | None) -> str:
  """A short name of a run's corpus from its config's data block (for titles)."""
  data = data or {}
  if data.get("source", "stdlib") != "text":
    return str(data.get("source") or "stdlib")
  path = str(data.get("path", ""))
  for key, name in CORPUS_NAMES.items():
    if key in path:
      return name
  parts = [p for p in path.split("/") if p and not any(ch in p for ch in "*?[")]
  return parts[-1] if parts else path


def run_record(run_dir: str) -> dict[str, Any]:
  """A run folder as the per-seed figures need it: variant (its colour's), depth, seed, corpus,
  lr, warmup, norm, budget (steps), outcome, escape_step (computed from the curve by the
  rule, outcome.curve_fields), baseline (the periodic eval curve's no-context loss, the one that
  rule uses: `eval_baseline`), the train curve, the periodic eval curve and the end-of-run eval
  (`final`: (step, loss), the summary's final_eval_loss at its last step). Older loops logged
  the end-of-run eval as the last `eval/loss`: that point is the final eval, not a periodic
  one, and is left out of `eval`."""
  from resnorm_jax.runs.sweep_results import run_row

  row = run_row(run_dir)
  config, curves = row["_config"], read_curves(run_dir)
  steps, final_loss = row["steps"], row["final_eval_loss"]
  eval_steps, eval_losses = curves["eval"]
  if not steps:
    steps = max([*eval_steps, *curves["train"][0]], default=0)
  periodic = [
    (s, x)
    for s, x in zip(eval_steps, eval_losses, strict=True)
    if not (s == steps and final_loss is not None and abs(x - final_loss) < 1e-6)
  ]
  opt = config.get("opt", {})
  return {
    "name": row["name"],
    "variant": VARIANT_ALIASES.get(row["variant"], row["variant"]),
    "num_layers": row["num_layers"],
    "seed": row["seed"] if row["seed"] is not None else 0,
    "corpus": corpus_name(config.get("data")),
    "lr": opt.get("lr"),
    "warmup": opt.get("warmup_steps") or 0,
    "steps": steps,
    "outcome": row["outcome"],
    "norm": (config.get("resolved_model") or config.get("model") or {}).get("norm"),
    "escape_step": run_fields(run_dir)["escape_step"],
    "baseline": curves["unigram"],
    "baseline_kind": baseline_kind(run_dir),
    "final_baseline": row["baseline"],  # the end-of-run verdict's (outcome.baseline)
    "train": curves["train"],
    "eval": ([s for s, _ in periodic], [x for _, x in periodic]),
    "final": (steps, final_loss) if is_finite_number(final_loss) else None,
  }
