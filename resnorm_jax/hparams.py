"""A run's axes and how it ended, in TensorBoard's HParams dashboard (one session per run).

Hparams: the config axes (norm, norm_position, residual, ..., lr, warmup_steps, seed) and the
run's outcome (trained / stuck / diverged / interrupted). Metrics: TensorBoard takes the last
value of each scalar tag of the run and lists the tags in sorted order, showing the first
five. Those five are the numbers runs are compared by, written here at the end of each run
segment under `compare/` (sorting before `eval/` and `train/`), from summary.json:
  compare/best_periodic_eval_loss  best_eval_loss: the lowest periodic eval (eval/loss's set)
  compare/escape_step              escape_step: when the periodic eval left the plateau for
                                   good (absent for a run that never did)
  compare/final_eval_loss          final_eval_loss: the end-of-run eval (final_eval_tokens),
                                   the verdict's number
  compare/no_context_loss          heldout_unigram_entropy: what the verdict judges it against
  compare/tokens_per_second        tokens_per_second: training throughput
Every other tag (eval/loss, eval/final_loss, train/loss, ...) stays a column one tick away.

Only the session's start and end are written, no experiment summary: TensorBoard then
builds the experiment from all runs, with discrete domains of the values seen and the axes
that differ between runs first (its table shows five columns at first, then the
alphabetical rest); an experiment summary would fix the columns alphabetically and the
metrics to one run's list.

Written at the end of each run segment through tensorboardX's file writer, as the hparams
plugin's protos, into an event file of its own beside the run's curves
(`writers.HPARAMS_SUFFIX`): TensorBoard keeps the first hparams it reads from a run, so the
file is replaced, not appended to, when a run resumes. Not `SummaryWriter.add_hparams`,
which opens a sub-run per call. A gs:// workdir: written locally, then uploaded (resnorm_jax.fs).
scripts/export_tensorboard.py writes the same file for a committed run (`write_run`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax import config_types as ct
from resnorm_jax import fs, outcome, writers
from resnorm_jax.outcome import is_finite_number

# (hparam, dotted config key)
AXES = (
  ("config", "name"),
  ("norm", "model.norm"),
  ("norm_position", "model.norm_position"),
  ("residual", "model.residual"),
  ("block", "model.block"),
  ("init", "model.init"),
  ("num_layers", "model.num_layers"),
  ("d_model", "model.d_model"),
  ("num_heads", "model.num_heads"),
  ("d_ff", "model.d_ff"),
  ("ffn_activation", "model.ffn_activation"),
  ("position", "model.position"),
  ("optimizer", "opt.name"),
  ("lr", "opt.lr"),
  ("warmup_steps", "opt.warmup_steps"),
  ("schedule", "opt.schedule"),
  ("weight_decay", "opt.weight_decay"),
  ("clip_norm", "opt.clip_norm"),
  ("batch_size", "train.batch_size"),
  ("seq_len", "train.seq_len"),
  ("steps", "train.steps"),
  ("dtype", "model.dtype"),
  ("data", "data.source"),
  ("seed", "seed"),
)
FINAL_NORM = "final_norm"  # resolved by the model ("auto": on for pre/peri), a bool
OUTCOME = "outcome"
# (metric tag, summary.json key, what it is): the HParams table's first five metric columns.
COMPARE = (
  ("compare/best_periodic_eval_loss", "best_eval_loss", "Lowest periodic eval loss (eval/loss)."),
  (
    "compare/escape_step",
    "escape_step",
    "First step from which the periodic eval loss stayed below its no-context loss by the "
    "stuck margin (resnorm_jax.outcome); absent for a run that never escaped.",
  ),
  (
    "compare/final_eval_loss",
    "final_eval_loss",
    "End-of-run eval loss (final_eval_tokens held-out tokens): the verdict's number.",
  ),
  (
    "compare/no_context_loss",
    "heldout_unigram_entropy",
    "Held-out no-context loss: what the verdict judges the final eval loss against.",
  ),
  ("compare/tokens_per_second", "tokens_per_second", "Training throughput, evals excluded."),
)
# The status filter of the dashboard knows no ABORTED: an interrupted run stays UNKNOWN.
_STATUS = {"completed": "STATUS_SUCCESS", "diverged": "STATUS_FAILURE"}


def _get(config: ConfigDict, dotted: str) -> Any:
  value = config
  for part in dotted.split("."):
    value = value.get(part) if hasattr(value, "get") else None
  return value


def run_hparams(config: ConfigDict, summary: Mapping[str, Any]) -> dict[str, Any]:
  """{hparam: str | float | bool}: the axes of `config` and the summary's outcome.

  `config`: the run's, or its config.json as a ConfigDict (its resolved_model is read
  there, not resolved again: a committed run's config may predate the current checks)."""
  out: dict[str, Any] = {}
  for name, key in AXES:
    value = _get(config, key)
    if isinstance(value, (str, bool, int, float)):
      out[name] = value
  resolved = _get(config, "resolved_model.final_norm")
  if not isinstance(resolved, bool):
    resolved = ct.model_config_from(config).final_norm
  out[FINAL_NORM] = bool(resolved)
  out[OUTCOME] = str(summary.get("outcome") or summary.get("status") or "unknown")
  return out


def _value(proto_value, v: Any) -> None:
  if isinstance(v, bool):
    proto_value.bool_value = v
  elif isinstance(v, (int, float)):
    proto_value.number_value = float(v)
  else:
    proto_value.string_value = str(v)


def _summary(tag: str, content) -> Any:
  """A tensorboardX Summary carrying hparams plugin data under `tag`."""
  from tensorboardX.proto import plugin_hparams_pb2
  from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata

  data = plugin_hparams_pb2.HParamsPluginData(version=0, **content)
  meta = SummaryMetadata(
    plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=data.SerializeToString())
  )
  return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def summaries(hparams: Mapping[str, Any], status: str) -> list:
  """The session start (the hparams) and session end (the status) summaries of one run."""
  from tensorboardX.proto import api_pb2, plugin_hparams_pb2

  now = time.time()
  start = plugin_hparams_pb2.SessionStartInfo(start_time_secs=now)
  for name, v in hparams.items():
    _value(start.hparams[name], v)
  end = plugin_hparams_pb2.SessionEndInfo(
    status=api_pb2.Status.Value(_STATUS.get(status, "STATUS_UNKNOWN")), end_time_secs=now
  )
  return [
    _summary("_hparams_/session_start_info", {"session_start_info": start}),
    _summary("_hparams_/session_end_info", {"session_end_info": end}),
  ]


def compare_scalars(summary: Mapping[str, Any]) -> list:
  """The `compare/` scalars of a summary (`COMPARE`), those it has a finite number for."""
  from tensorboardX.summary import scalar

  # The no-context loss as the verdict takes it: held-out, or the train split's in a
  # summary from before the held-out one was recorded.
  values = {**summary, "heldout_unigram_entropy": outcome.baseline(summary)}
  return [
    scalar(tag, float(values[key]), summary_description=text)
    for tag, key, text in COMPARE
    if is_finite_number(values.get(key))
  ]


def write(
  workdir: str,
  hparams: Mapping[str, Any],
  status: str,
  step: int,
  summary: Mapping[str, Any] | None = None,
) -> str:
  """Replaces the run's hparams event file (with the `compare/` scalars of `summary`, at
  `step`); returns its path."""
  from tensorboardX.writer import FileWriter

  logdir = writers.tb_dir(workdir)
  writers.remove_hparams_files(logdir)
  with fs.writable_folder(logdir) as local:
    w = FileWriter(local, filename_suffix=writers.HPARAMS_SUFFIX)
    for s in summaries(hparams, status) + compare_scalars(summary or {}):
      w.add_summary(s, global_step=int(step))
    w.close()
    (name,) = [n for n in os.listdir(local) if writers.is_hparams_file(n)]
  return os.path.join(logdir, name)


def write_run(workdir: str, config: ConfigDict, summary: Mapping[str, Any]) -> str:
  """The end of a run segment: its axes, outcome and status into TensorBoard's HParams."""
  status, steps = str(summary.get("status")), summary.get("steps") or 0
  return write(workdir, run_hparams(config, summary), status, steps, summary)
