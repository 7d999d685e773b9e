"""A run's axes and how it ended, in TensorBoard's HParams dashboard (one session per run).

Hparams: the config axes (norm, norm_position, residual, ..., lr, warmup_steps, seed) and the
run's outcome (trained / stuck / diverged / interrupted). Metrics: the last value of scalar
tags the run already logs (final and best eval loss, the no-context loss, final train loss),
so the table sorts by final loss and every number in it is also a curve.

Written at the end of each run segment, through tensorboardX's file writer, as the hparams
plugin's own protos (the experiment with discrete domains from the code's lists of valid
values, session start and end), into an event file of its own beside the run's curves
(`writers.HPARAMS_SUFFIX`). TensorBoard keeps the first hparams it reads from a run, so the
file is replaced, not appended to, when a run resumes; not `SummaryWriter.add_hparams`, which
opens a sub-run per call.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Mapping
from typing import Any

from ml_collections import ConfigDict

from resnorm_jax import config_types as ct
from resnorm_jax import writers
from resnorm_jax.initializers import INITS
from resnorm_jax.norms import NORMS
from resnorm_jax.optim import OPTIMIZERS, SCHEDULES
from resnorm_jax.residual import RESIDUALS

# (hparam, dotted config key, valid values or None for a number or free text)
AXES = (
  ("config", "name", None),
  ("norm", "model.norm", NORMS),
  ("norm_position", "model.norm_position", ct.POSITIONS),
  ("residual", "model.residual", RESIDUALS),
  ("block", "model.block", ct.BLOCKS),
  ("init", "model.init", INITS),
  ("num_layers", "model.num_layers", None),
  ("d_model", "model.d_model", None),
  ("num_heads", "model.num_heads", None),
  ("d_ff", "model.d_ff", None),
  ("ffn_activation", "model.ffn_activation", ct.ACTIVATIONS),
  ("position", "model.position", ct.EMBED_POSITIONS),
  ("optimizer", "opt.name", OPTIMIZERS),
  ("lr", "opt.lr", None),
  ("warmup_steps", "opt.warmup_steps", None),
  ("schedule", "opt.schedule", SCHEDULES),
  ("weight_decay", "opt.weight_decay", None),
  ("clip_norm", "opt.clip_norm", None),
  ("batch_size", "train.batch_size", None),
  ("seq_len", "train.seq_len", None),
  ("steps", "train.steps", None),
  ("dtype", "train.dtype", ct.DTYPES),
  ("data", "data.source", None),
  ("seed", "seed", None),
)
# Resolved by the model ("auto" -> on for pre/peri), a bool.
FINAL_NORM = "final_norm"
OUTCOME = "outcome"

# (scalar tag, display name, dataset): the last value of each is the run's end metric.
METRICS = (
  ("eval/loss", "final eval loss", "DATASET_VALIDATION"),
  ("eval/best_loss", "best eval loss", "DATASET_VALIDATION"),
  ("eval/no_context_loss", "no-context loss (unigram)", "DATASET_VALIDATION"),
  ("train/loss", "final train loss", "DATASET_TRAINING"),
)

_STATUS = {"completed": "STATUS_SUCCESS", "diverged": "STATUS_FAILURE"}  # else UNKNOWN


def _get(config: ConfigDict, dotted: str) -> Any:
  value = config
  for part in dotted.split("."):
    value = value.get(part) if hasattr(value, "get") else None
  return value


def run_hparams(config: ConfigDict, summary: Mapping[str, Any]) -> dict[str, Any]:
  """{hparam: str | float | bool}: the axes of `config` and the summary's outcome."""
  out: dict[str, Any] = {}
  for name, key, _ in AXES:
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
  """The experiment, session start and session end summaries of one run."""
  from tensorboardX.proto import api_pb2, plugin_hparams_pb2

  domains = {name: valid for name, _, valid in AXES}
  infos = []
  for name, v in hparams.items():
    info = api_pb2.HParamInfo(name=name)
    if isinstance(v, bool):
      info.type = api_pb2.DATA_TYPE_BOOL
      info.domain_discrete.extend([False, True])
    elif isinstance(v, (int, float)):
      info.type = api_pb2.DATA_TYPE_FLOAT64
    else:
      info.type = api_pb2.DATA_TYPE_STRING
      if domains.get(name):
        info.domain_discrete.extend(list(domains[name]))
    infos.append(info)
  metrics = [
    api_pb2.MetricInfo(
      name=api_pb2.MetricName(tag=tag),
      display_name=display,
      dataset_type=api_pb2.DatasetType.Value(dataset),
    )
    for tag, display, dataset in METRICS
  ]
  now = time.time()
  experiment = api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics, time_created_secs=now)
  start = plugin_hparams_pb2.SessionStartInfo(start_time_secs=now)
  for name, v in hparams.items():
    _value(start.hparams[name], v)
  end = plugin_hparams_pb2.SessionEndInfo(
    status=api_pb2.Status.Value(_STATUS.get(status, "STATUS_UNKNOWN")), end_time_secs=now
  )
  return [
    _summary("_hparams_/experiment", {"experiment": experiment}),
    _summary("_hparams_/session_start_info", {"session_start_info": start}),
    _summary("_hparams_/session_end_info", {"session_end_info": end}),
  ]


def write(workdir: str, hparams: Mapping[str, Any], status: str, step: int) -> str:
  """Replaces the run's hparams event file; returns its path."""
  from tensorboardX.writer import FileWriter

  logdir = writers.tb_dir(workdir)
  writers.remove_hparams_files(logdir)
  w = FileWriter(logdir, filename_suffix=writers.HPARAMS_SUFFIX)
  for s in summaries(hparams, status):
    w.add_summary(s, global_step=int(step))
  w.close()
  (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*" + writers.HPARAMS_SUFFIX))
  return path


def write_run(workdir: str, config: ConfigDict, summary: Mapping[str, Any]) -> str:
  """The end of a run segment: its axes, outcome and status into TensorBoard's HParams."""
  return write(
    workdir, run_hparams(config, summary), str(summary.get("status")), summary.get("steps") or 0
  )
