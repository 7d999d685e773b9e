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

Written at the end of each run segment as the hparams plugin's protos, into an event file
of its own beside the run's curves (`tb_events.HPARAMS_SUFFIX`), not `SummaryWriter.add_hparams`,
which opens a sub-run per call. TensorBoard keeps the first hparams it reads from a run, so a
run dir holds exactly one such file, the latest segment's: it is written whole (a temporary
file renamed; an object replaced), and only then are the earlier ones deleted; a failed
write leaves the earlier file and one warning line. A resumed segment leaves the earlier
file in place until it writes its own (a run killed again keeps its last hparams), only
moving its events back to the step it resumes from where they lie after it: the resumed
curves' restart marker (purge_step) hides every event of the run from that step on.
A gs:// workdir: the file is written straight to the bucket (resnorm_jax.data.fs).
scripts/export_tensorboard.py writes the same file for a committed run (`write_run`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any

from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config import model_keys
from resnorm_jax.data import fs
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.model import config_types as ct
from resnorm_jax.runs import outcome
from resnorm_jax.runs import status as run_status
from resnorm_jax.runs.outcome import is_finite_number
from resnorm_jax.train import tb_events

# (order, hparam, dotted config key) of the columns outside the core model keys; the model's
# columns are the keys declared with an hparam Column (resnorm_jax/config/model_keys.py).
_OTHER_COLUMNS = (
  (0, "config", "name"),
  (160, "optimizer", "opt.name"),
  (170, "lr", "opt.lr"),
  (180, "warmup_steps", "opt.warmup_steps"),
  (190, "schedule", "opt.schedule"),
  (200, "weight_decay", "opt.weight_decay"),
  (210, "clip_norm", "opt.clip_norm"),
  (220, "batch_size", "train.batch_size"),
  (230, "seq_len", "train.seq_len"),
  (240, "steps", "train.steps"),
  (260, "data", "data.source"),
  (270, "seed", "seed"),
)


def _axes() -> tuple[tuple[str, str], ...]:
  """(hparam, dotted config key) of every column, ordered by each column's order."""
  columns = sorted([*_OTHER_COLUMNS, *model_keys.hparam_columns()])
  for a, b in zip(columns, columns[1:], strict=False):
    if a[0] == b[0]:
      raise ValueError(f"HParams columns {a[1]!r} and {b[1]!r} have the same order {a[0]}")
  return tuple((name, key) for _, name, key in columns)


AXES = _axes()
FINAL_NORM = "final_norm"  # resolved by the model (config_types.resolve_final_norm), a bool
OUTCOME = "outcome"
# (metric tag, summary.json key, what it is): the HParams table's first five metric columns.
COMPARE = (
  ("compare/best_periodic_eval_loss", "best_eval_loss", "Lowest periodic eval loss (eval/loss)."),
  (
    "compare/escape_step",
    "escape_step",
    "First step from which the periodic eval loss stayed below its no-context loss by the "
    "stuck margin (resnorm_jax.runs.outcome); absent for a run that never escaped.",
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
_STATUS = {run_status.COMPLETED: "STATUS_SUCCESS", run_status.DIVERGED: "STATUS_FAILURE"}


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
    resolved = ct.resolve_final_norm(config.model)
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


def _record(data: bytes) -> bytes:
  """One TFRecord: length, its masked crc32c, the data, its masked crc32c."""
  from tensorboardX.record_writer import masked_crc32c

  header = struct.pack("<Q", len(data))
  crc = lambda b: struct.pack("<I", masked_crc32c(b))  # noqa: E731
  return header + crc(header) + data + crc(data)


def _records(blob: bytes) -> list[bytes] | None:
  """The records of an event file; None when one is torn or its checksum is wrong."""
  from tensorboardX.record_writer import masked_crc32c

  out, i = [], 0
  while i < len(blob):
    if i + 12 > len(blob):
      return None
    header = blob[i : i + 8]
    (n,) = struct.unpack("<Q", header)
    data, end = blob[i + 12 : i + 12 + n], i + 16 + n
    if end > len(blob) or struct.unpack("<I", blob[i + 8 : i + 12])[0] != masked_crc32c(header):
      return None
    if struct.unpack("<I", blob[end - 4 : end])[0] != masked_crc32c(data):
      return None
    out.append(data)
    i = end
  return out


def _replace_bytes(path: str, blob: bytes) -> None:
  """Writes a file so no reader sees half of it: a temporary file renamed (its name without
  `tfevents`: TensorBoard never reads it), or an object replaced whole."""
  if fs.is_remote(path):
    epath.Path(path).write_bytes(blob)
    return
  tmp = os.path.join(os.path.dirname(path), f".hparams.{fs.unique_suffix()}.tmp")
  try:
    with open_nofollow(tmp, "wb") as f:
      f.write(blob)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


def event_file(summaries_at_step: list, step: int) -> bytes:
  """An event file's bytes: its version record, then each summary at `step`, now."""
  from tensorboardX.proto.event_pb2 import Event

  now = time.time()
  events = [Event(wall_time=now, file_version="brain.Event:2")]
  events += [Event(wall_time=now, step=int(step), summary=s) for s in summaries_at_step]
  return b"".join(_record(e.SerializeToString()) for e in events)


def write(
  workdir: str,
  hparams: Mapping[str, Any],
  status: str,
  step: int,
  summary: Mapping[str, Any] | None = None,
) -> str:
  """Replaces the run's hparams event file (with the `compare/` scalars of `summary`, at
  `step`); returns its path. The new file is written whole before the earlier ones go."""
  logdir = tb_events.tb_dir(workdir)
  epath.Path(logdir).mkdir(parents=True, exist_ok=True)
  stamp = f"{int(time.time()):010d}.{socket.gethostname()}"
  name = f"{tb_events.EVENTS_PREFIX}{stamp}{tb_events.HPARAMS_SUFFIX}"
  path = os.path.join(logdir, name)
  content = summaries(hparams, status) + compare_scalars(summary or {})
  _replace_bytes(path, event_file(content, step))
  tb_events.remove_hparams_files(logdir, keep=name)
  return path


def keep_steps_at_most(logdir: str, step: int) -> None:
  """A resumed segment (from `step`): the run's hparams file stays, its events moved back to
  `step` where they lie after it, so the resumed curves' restart marker does not hide them."""
  from tensorboardX.proto.event_pb2 import Event

  folder = epath.Path(logdir)
  if not folder.is_dir():
    return
  for path in folder.iterdir():
    if not tb_events.is_hparams_file(path.name):
      continue
    records = _records(path.read_bytes())
    if records is None:  # torn or damaged: not TensorBoard's to read; the segment's end replaces it
      continue
    events = [Event.FromString(r) for r in records]
    if all(e.step <= step for e in events):
      continue
    for e in events:
      e.step = min(e.step, int(step))
    _replace_bytes(os.fspath(path), b"".join(_record(e.SerializeToString()) for e in events))


def write_run(
  workdir: str, config: ConfigDict, summary: Mapping[str, Any], quiet: bool = False
) -> str | None:
  """The end of a run segment: its axes, outcome and status into TensorBoard's HParams; the
  path, or None (one warning line, none when `quiet`) when it could not be written: the
  earlier one stays."""
  status, steps = str(summary.get("status")), summary.get("steps") or 0
  try:
    return write(workdir, run_hparams(config, summary), status, steps, summary)
  except OSError as e:
    if quiet:
      return None
    where = e.filename or tb_events.tb_dir(workdir)
    print(
      f"WARNING: TensorBoard HParams not updated: {e.strerror or e} (writing {where}); "
      "the earlier segment's file stays",
      flush=True,
    )
    return None
