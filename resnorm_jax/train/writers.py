"""Metrics to `<workdir>/metrics.jsonl` and TensorBoard event files in `<workdir>` (process 0).

metrics.jsonl: one JSON object per logged step; a per-layer statistic is one list
(`"stream_rms": [layer 0, layer 1, ...]`). Files written before lists (one key per layer,
`stream_rms/layer_012`) still read the same through `metrics_file.read_metrics`. Non-finite
values are the bare tokens `NaN` / `Infinity` (Python's json default): a diverged run's last
loss stays visible; read the file with Python's `json`, strict JSON parsers refuse them.

TensorBoard: the events go straight into the workdir, so `tensorboard --logdir runs/` lists
each run by its folder name. Tags sort so the loss comes first in the Time Series tab:
`eval/...`, `train/...` (loss, lr, norms, speed), then `train_depth/<stat>` (one layer x step
image per per-layer statistic) and `train_layers/<stat>/layer_<i>` (first, quarter, middle,
last layer as scalars): a few dozen cards at any depth, written by resnorm_jax.train.tb_events
(the two evals' names, the Custom Scalars layout). A workdir from before (events in `tb/`)
keeps writing there. A write error of the events (a full disk, a read-only folder) is one
warning line and `tb_error` (summary.json's `tensorboard_error`); the run goes on, metrics.jsonl
keeps every row (resnorm_jax.train.tb_events). A resumed run keeps the earlier segment's HParams
file until it writes its own (resnorm_jax.train.hparams).

Every path goes through resnorm_jax.data.fs (etils.epath). A gs:// workdir: both files are written
in a local staging folder and uploaded whole every `sync_seconds`, at `flush()` (the loop
calls it before each checkpoint, so a checkpoint never runs ahead of the uploaded curve) and
at `close()`. Not tensorboardX's own GCS writer: it needs google-cloud-storage, uploads on its
own schedule, and would leave metrics.jsonl, which no object store can append to, without a
path.
"""

import json
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from etils import epath

from resnorm_jax.data import fs
from resnorm_jax.runs import metrics_file
from resnorm_jax.train import depth_profile, hparams
from resnorm_jax.train.tb_events import Events, tb_dir

SYNC_SECONDS = 60.0  # a gs:// workdir's upload interval (TensorBoard's own flush is 120 s)


def _floats(array: np.ndarray) -> list[float]:
  """A 1-D array as floats; float32 ones by their shortest repr (half the characters)."""
  if array.dtype == np.float32:
    return [float(str(v)) for v in array]
  return [float(v) for v in array]


def flatten_metrics(metrics: Mapping[str, Any]) -> dict[str, float | list[float]]:
  """Scalars -> floats; a 1-D per-layer array -> a list of floats; dicts -> `a/b` keys."""
  flat: dict[str, float | list[float]] = {}
  for key, value in metrics.items():
    if isinstance(value, Mapping):
      flat.update({f"{key}/{k}": v for k, v in flatten_metrics(value).items()})
      continue
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
      raise ValueError(f"metric {key!r} has a non-numeric value {value!r}")
    if array.ndim == 0:
      flat[key] = float(array)
    elif array.ndim == 1:
      flat[key] = _floats(array)
    else:
      raise ValueError(
        f"metric {key!r} has shape {array.shape}; expected a scalar or 1-D per layer"
      )
  return flat


class MetricWriter:
  """Appends one JSON line and TensorBoard summaries per `write`; a no-op when not enabled.

  `profile_every`: log steps that are multiples of it also redraw the depth images (and
  close() draws the last one); None: only close(); `depth_images` False: never.
  `no_context_loss`: drawn as `eval/no_context_loss` beside every eval loss (the periodic
  eval set's). `eval_tokens`: {"periodic": n, "final": n} tokens of the two evals, named in
  the eval tags' descriptions.
  `sync_seconds`: how often a gs:// workdir's files are uploaded between flushes.
  """

  def __init__(
    self,
    workdir: str,
    enabled: bool = True,
    truncate_after: int | None = None,
    *,
    profile_every: int | None = None,
    depth_images: bool = True,
    no_context_loss: float | None = None,
    eval_tokens: Mapping[str, int | None] | None = None,
    sync_seconds: float = SYNC_SECONDS,
  ):
    self.enabled = enabled
    self._file = None
    self._events: Events | None = None
    if not enabled:
      return
    epath.Path(workdir).mkdir(parents=True, exist_ok=True)
    self.path = os.path.join(workdir, metrics_file.METRICS)
    self.sync_seconds = sync_seconds
    logdir = tb_dir(workdir)
    # A gs:// workdir: metrics.jsonl and the events are written locally, uploaded by _sync.
    self._staged = _staging(workdir, logdir) if fs.is_remote(workdir) else {}
    local = self._staged[workdir].local if self._staged else workdir
    local_metrics = os.path.join(local, metrics_file.METRICS)
    exists = (
      self._staged[workdir].pull(metrics_file.METRICS)
      if self._staged
      else os.path.exists(self.path)
    )
    if truncate_after is not None:  # the earlier segment's hparams stay until this one ends
      hparams.keep_steps_at_most(logdir, truncate_after)
    self._events = Events(
      self._staged[logdir].local if self._staged else logdir,
      purge_step=None if truncate_after is None else truncate_after + 1,
      profile_every=profile_every,
      depth_images=depth_images,
      no_context_loss=no_context_loss,
      eval_tokens=eval_tokens,
    )
    if truncate_after and not exists:  # a resume whose earlier rows are gone: said, not hidden
      print(
        f"warning: {self.path} is missing: the logged rows of steps 1-{truncate_after} are "
        f"lost; the run resumes from its checkpoint at step {truncate_after} and logs from there",
        flush=True,
      )
    if truncate_after is not None and exists:
      metrics_file.truncate(local_metrics, truncate_after)
      for record in metrics_file.read_metrics(
        local_metrics
      ):  # what the resumed run's images start from
        self._events.remember(record["step"], record)
    self._file = fs.open_nofollow(local_metrics, "a")  # a symbolic link: refused
    self._synced = time.monotonic()
    if self._staged:  # a truncated metrics.jsonl replaces the bucket's at once, as locally
      self._sync()

  @property
  def history(self) -> depth_profile.DepthHistory:
    return self._events.history

  @property
  def tb_error(self) -> str | None:
    """The first write error of the TensorBoard events (one line), None while there is none;
    the events stop there, metrics.jsonl goes on (resnorm_jax.train.tb_events)."""
    return self._events.error if self._events is not None else None

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Appends `{"step": step, **flat metrics}` and logs it to TensorBoard."""
    if not self.enabled:
      return
    step = int(step)
    flat = flatten_metrics(metrics)
    self._file.write(json.dumps({"step": step, **flat}) + "\n")
    self._file.flush()
    self._events.write(step, flat)
    if self._staged and time.monotonic() - self._synced >= self.sync_seconds:
      self._events.flush()
      self._sync()

  def draw_depth(self, step: int) -> None:
    """One image per per-layer statistic: its history by layer and step, up to `step`."""
    self._events.draw_depth(step)

  def _sync(self) -> None:
    """A gs:// workdir: uploads metrics.jsonl and the event files that changed."""
    self._file.flush()
    for staging in self._staged.values():
      staging.sync()
    self._synced = time.monotonic()

  def flush(self) -> None:
    """Flushes metrics.jsonl and the TensorBoard events (a gs:// workdir: uploads both)."""
    if self.enabled:
      self._file.flush()
      self._events.drain()
      if self._staged:
        self._sync()

  def close(self, release_warning: bool = True) -> None:
    """Draws the depth images of the last step (unless `depth_images` is off), flushes and
    closes; later calls are no-ops. TensorBoard's warning held for a full disk is printed
    here, unless `release_warning` is False (the run decides, `release_warning()`)."""
    if self.enabled:
      self.enabled = False
      self._file.close()
      self._events.close()
      for staging in self._staged.values():
        staging.close()
    if release_warning:
      self.release_warning()

  def release_warning(self, say: bool = True) -> None:
    """TensorBoard's warning held for a full disk: printed once, or dropped (`say` False)
    when the run has printed its own error line for that disk."""
    if self._events is not None:
      self._events.release_warning(say)


def _staging(workdir: str, logdir: str) -> dict[str, fs.Staging]:
  """{remote folder: its local staging folder}: the workdir, and `tb/` in a workdir from before."""
  return {folder: fs.Staging(folder) for folder in dict.fromkeys((workdir, logdir))}
