"""train.stop_when: end a run that a fitted stop rule judges doomed, at the rule's step k.

A stop rule is data (resnorm_jax/analysis/early_warning.py writes and reads it: the committed
docs/early_warning/stop_rule_k100.json and stop_rule_k200.json, each with its provenance): a
logistic model of the metrics a run logged up to step k, and a threshold below which it says
the run will not leave the plateau and keep it. Off by default (train.stop_when="").

Checked before anything compiles (`check`, from run_setup.validate, so a sweep checks every
point before any runs): the file must be a rule (load_rule), and its k at most train.steps and
a multiple of train.log_every. The rule reads the logged rows up to step k (metrics.jsonl), so
step k must be a logged step; a k that is not is refused, not moved to the next logged step
(that would judge the run on other features than those the rule was fitted on). Else one line,
exit status 2.

In the run (trainer.Trainer): once, after step k's row is logged, the rule is applied to the rows
of metrics.jsonl (every segment of a resumed run) and the train split's unigram entropy
(summary.json's `unigram_entropy`, known at setup). If it says stop, the run saves a
checkpoint at step k and ends with status `stopped_early` (outcome `stopped_early`: no
verdict), summary.json recording `stop_rule` (the path), `stop_score`, `stop_threshold` and
`stop_step`, says so in one line with the command that trains it to the end, and exits 0.
A run that starts (resumes) at or after step k is not judged.

Going on after a stop: the same command (the rule still set) has nothing to do, as for a
completed run (it was stopped on purpose: `stopped_run`); the same command with
`--config.train.stop_when=` resumes from the checkpoint of step k to train.steps and ends
`completed`. train.stop_when is a run-control key (same_experiment.RUN_CONTROL): a workdir's
and a checkpoint's run may be resumed with it changed, and a sweep compares finished runs
without it. A sweep (sweeps.grid.run_state) counts a stopped_early point as done while it sets
a rule (any rule) for that point, and resumes it to the end when it sets none.

A population (experiments.train_population, sweep.py --vmap) does not apply a rule: refused
there in one line, and sweep.py --vmap runs a point with a rule as a single run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax.runs import record_files, status
from resnorm_jax.runs import stop_features as early_warning
from resnorm_jax.runs.end_line import (
  STOP_KEY,
)

STATUS = status.STOPPED_EARLY
KEY = STOP_KEY


def path_of(train_cfg: ConfigDict | Mapping[str, Any]) -> str:
  """train.stop_when of a train section ("" where it is off or the section predates it)."""
  return train_cfg.get("stop_when", "") or ""


def check(train_cfg: ConfigDict) -> dict[str, Any] | None:
  """The rule train.stop_when names, checked against the run (None when off); ValueError in
  one line naming the file when it is not a rule, or its k is past train.steps or not a
  logged step."""
  path = path_of(train_cfg)
  if not isinstance(path, str):
    raise ValueError(f"{KEY}={path!r} must be the path of a stop rule (a JSON file) or ''")
  if not path:
    return None
  rule = early_warning.load_rule(path)
  k, steps, every = rule["k"], train_cfg.steps, train_cfg.log_every
  if isinstance(k, bool) or not isinstance(k, int) or k < 1:
    raise ValueError(f"{KEY}={path!r}: its k={k!r} is not a positive step")
  if k > steps:
    raise ValueError(
      f"{KEY}={path!r} judges at step {k}, after the run's last (train.steps={steps})"
    )
  if k % every:
    raise ValueError(
      f"{KEY}={path!r} judges at step {k}, which is not logged (train.log_every={every}): "
      f"its rows up to step {k} are what it reads; use a train.log_every that divides {k}"
    )
  return rule


@dataclasses.dataclass
class StopRule:
  """The rule a run applies: from `path`, judged on the rows of `metrics_path` against the
  train split's unigram entropy `entropy`. `fields` holds summary.json's stop_* fields once
  it said stop."""

  path: str
  rule: dict[str, Any]
  metrics_path: str
  entropy: float
  fields: dict[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def k(self) -> int:
    return int(self.rule["k"])

  def judge(self, rows: Sequence[Mapping[str, Any]], step: int) -> bool:
    """Whether the run stops at `step` (its k), from its logged `rows`; one line either way.
    A run whose rows the rule cannot read up to step k (metrics.jsonl lost) goes on."""
    threshold = float(self.rule["threshold"])
    verdict = early_warning.rule_says_stop(self.rule, rows, self.entropy)
    if verdict is None:
      print(
        f"step {step}: the stop rule {self.path} cannot judge the run (no logged rows up to "
        f"step {self.k} in {self.metrics_path}): it goes on",
        flush=True,
      )
      return False
    stop, score = verdict
    if not stop:
      print(
        f"step {step}: the stop rule {self.path} scores the run {score:.4g} >= its threshold "
        f"{threshold:.4g}: it goes on",
        flush=True,
      )
      return False
    self.fields = {
      "stop_rule": self.path,
      "stop_score": score,
      "stop_threshold": threshold,
      "stop_step": step,
    }
    return True


def for_run(train_cfg: ConfigDict, workdir: str, entropy: float) -> StopRule | None:
  """The StopRule of a run in `workdir` (None when train.stop_when is off)."""
  rule = check(train_cfg)
  if rule is None:
    return None
  return StopRule(path_of(train_cfg), rule, os.path.join(workdir, record_files.METRICS), entropy)


def stopped_run(config: ConfigDict, workdir: str) -> dict | None:
  """The summary of a run in `workdir` that a stop rule stopped, while this run sets one too
  (it was stopped on purpose: nothing to do), else None (no rule: it resumes to the end).
  The stop is read from summary.json, or, when that is lost or older than the newest
  checkpoint, from the checkpoint the stop saved (its meta records the status and the stop_*
  fields: Trainer.save)."""
  if not path_of(config.train):
    return None
  from resnorm_jax.runs import workdir as workdir_lib  # (no JAX)

  summary = workdir_lib.stopped_early_summary(workdir)
  if summary is not None:  # printed as it is: a hand-edited time is refused, not printed
    workdir_lib.check_summary_times(summary, os.path.join(workdir, record_files.SUMMARY))
  return summary
