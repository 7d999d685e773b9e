"""A run's axes and how it ended, in TensorBoard's HParams dashboard (one session per run).

Hparams: the config axes (norm, norm_position, residual, ..., lr, warmup_steps, seed) and the
run's outcome (trained / stuck / diverged / interrupted). Metrics: TensorBoard takes the last
value of each scalar tag of the run: `eval/loss` (final eval loss), `eval/min_loss` (best),
`eval/no_context_loss`, `train/loss`, ... so the table sorts by final loss and every number
in it is also a curve.

Only the session's start and end are written, no experiment summary: TensorBoard then
builds the experiment from all runs, with discrete domains of the values seen and the axes
that differ between runs first (its table shows five columns at first, then the
alphabetical rest); an experiment summary would fix the columns alphabetically. The metrics
it lists start with the `eval/` and `train/` tags, in tag order.

Written at the end of each run segment through tensorboardX's file writer, as the hparams
plugin's protos, into an event file of its own beside the run's curves
(`writers.HPARAMS_SUFFIX`): TensorBoard keeps the first hparams it reads from a run, so the
file is replaced, not appended to, when a run resumes. Not `SummaryWriter.add_hparams`,
which opens a sub-run per call. A gs:// workdir: written locally, then uploaded (resnorm_jax.fs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax import config_types as ct
from resnorm_jax import fs, writers

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
# The status filter of the dashboard knows no ABORTED: an interrupted run stays UNKNOWN.
_STATUS = {"completed": "STATUS_SUCCESS", "diverged": "STATUS_FAILURE"}


def _get(config: ConfigDict, dotted: str) -> Any:
  value = config
  for part in dotted.split("."):
    value = value.get(part) if hasattr(value, "get") else None
  return value


def run_hparams(config: ConfigDict, summary: Mapping[str, Any]) -> dict[str, Any]:
  """{hparam: str | float | bool}: the axes of `config` and the summary's outcome."""
  out: dict[str, Any] = {}
  for name, key in AXES:
    value = _get(config, key)
    if isinstance(value, (str, bool, int, float)):
      out[name] = value
  out[FINAL_NORM] = bool(ct.model_config_from(config).final_norm)
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


def write(workdir: str, hparams: Mapping[str, Any], status: str, step: int) -> str:
  """Replaces the run's hparams event file; returns its path."""
  from tensorboardX.writer import FileWriter

  logdir = writers.tb_dir(workdir)
  writers.remove_hparams_files(logdir)
  with fs.writable_folder(logdir) as local:
    w = FileWriter(local, filename_suffix=writers.HPARAMS_SUFFIX)
    for s in summaries(hparams, status):
      w.add_summary(s, global_step=int(step))
    w.close()
    (name,) = [n for n in os.listdir(local) if writers.is_hparams_file(n)]
  return os.path.join(logdir, name)


def write_run(workdir: str, config: ConfigDict, summary: Mapping[str, Any]) -> str:
  """The end of a run segment: its axes, outcome and status into TensorBoard's HParams."""
  return write(
    workdir, run_hparams(config, summary), str(summary.get("status")), summary.get("steps") or 0
  )
