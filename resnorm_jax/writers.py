"""Metrics to `<workdir>/metrics.jsonl` and TensorBoard event files in `<workdir>` (process 0).

metrics.jsonl: one JSON object per logged step; a per-layer statistic is one list
(`"stream_rms": [layer 0, layer 1, ...]`). Files written before lists (one key per layer,
`stream_rms/layer_012`) still read the same through `read_metrics`. Non-finite values are
the bare tokens `NaN` / `Infinity` (Python's json default): a diverged run's last loss stays
visible; read the file with Python's `json`, strict JSON parsers refuse them.

TensorBoard: the events go straight into the workdir, so `tensorboard --logdir runs/` lists
each run by its folder name. Tags sort so the loss comes first in the Time Series tab:
`eval/...` (loss, lowest loss so far, no-context loss), `train/...` (loss, lr, norms, speed), then
`train_depth/<stat>` (one layer x step image per per-layer statistic) and
`train_layers/<stat>/layer_<i>` (first, quarter, middle, last layer as scalars): a few
dozen cards at any depth. A workdir from before (events in `tb/`) keeps writing there.
"""

import json
import os
import re
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from resnorm_jax import depth_profile

HPARAMS_SUFFIX = ".hparams"  # the event file of resnorm_jax.hparams, replaced on resume
_OLD_LAYER_KEY = re.compile(r"^(.+)/layer_(\d+)$")


def tb_dir(workdir: str) -> str:
  """Where a run's TensorBoard events go: the workdir itself, or `tb/` where one exists."""
  old = os.path.join(workdir, "tb")
  return old if os.path.isdir(old) else workdir


def remove_hparams_files(logdir: str) -> None:
  """Deletes the hparams event file of an earlier segment of this run (if any)."""
  if os.path.isdir(logdir):
    for name in os.listdir(logdir):
      if name.startswith("events.out.tfevents.") and name.endswith(HPARAMS_SUFFIX):
        os.remove(os.path.join(logdir, name))


def _layer_width(n: int) -> int:
  """Digits for per-layer suffixes: at least 3 (`layer_012`), more past 999 layers."""
  return max(3, len(str(n - 1)))


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


def fold_layer_keys(record: dict[str, Any]) -> dict[str, Any]:
  """An old record's `name/layer_000`, ... keys as one list `name`, where they cover every
  layer from 0; an excerpt of a few layers (docs/runs/*/curve.jsonl) keeps its keys."""
  layers: dict[str, dict[int, Any]] = {}
  for key, value in record.items():
    m = _OLD_LAYER_KEY.match(key)
    if m:
      layers.setdefault(m.group(1), {})[int(m.group(2))] = value
  complete = {name: by for name, by in layers.items() if sorted(by) == list(range(len(by)))}
  if not complete:
    return record
  out: dict[str, Any] = {}
  for key, value in record.items():
    m = _OLD_LAYER_KEY.match(key)
    if m and m.group(1) in complete:
      name = m.group(1)
      if name not in out:
        out[name] = [complete[name][i] for i in range(len(complete[name]))]
    else:
      out[key] = value
  return out


def read_metrics(path: str) -> list[dict[str, Any]]:
  """All records of a metrics.jsonl file, per-layer values as lists (old files included),
  skipping a torn last line from a killed run."""
  records = []
  with open(path) as f:
    for line in f:
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        continue
      records.append(fold_layer_keys(record) if isinstance(record, dict) else record)
  return records


def _truncate(path: str, last_step: int) -> None:
  """Keeps the records with step <= last_step; replaces the file atomically."""
  with open(path) as f:
    steps_lines = [(_step_of(line), line.rstrip("\n") + "\n") for line in f]
  kept = [line for step, line in steps_lines if step is not None and step <= last_step]
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".metrics.", suffix=".tmp")
  with os.fdopen(fd, "w") as f:
    f.writelines(kept)
  os.replace(tmp, path)


def _step_of(line: str) -> int | None:
  """The step of one metrics line, None for a torn or foreign line."""
  try:
    record = json.loads(line)
  except json.JSONDecodeError:
    return None
  step = record.get("step") if isinstance(record, dict) else None
  return step if isinstance(step, int) else None


def tb_tag(key: str) -> str:
  """The TensorBoard tag of a metrics.jsonl key: `lr` -> `train/lr`; `eval/loss` stays."""
  return key if "/" in key else f"train/{key}"


class MetricWriter:
  """Appends one JSON line and TensorBoard summaries per `write`; a no-op when not enabled.

  `profile_every`: log steps that are multiples of it also redraw the depth images (and
  close() draws the last one); None: only close(). `no_context_loss`: drawn as
  `eval/no_context_loss` beside every eval loss.
  """

  def __init__(
    self,
    workdir: str,
    enabled: bool = True,
    truncate_after: int | None = None,
    *,
    profile_every: int | None = None,
    no_context_loss: float | None = None,
  ):
    self.enabled = enabled
    self._file = None
    self._tb = None
    if not enabled:
      return
    import tensorboardX  # only process 0 pays for the import

    os.makedirs(workdir, exist_ok=True)
    self.path = os.path.join(workdir, "metrics.jsonl")
    self.profile_every = profile_every
    self.no_context_loss = no_context_loss
    self.history = depth_profile.DepthHistory()
    self._best_eval = float("inf")
    self._drawn_step: int | None = None
    if truncate_after is not None and os.path.exists(self.path):
      _truncate(self.path, truncate_after)
      for record in read_metrics(self.path):  # what the resumed run's images start from
        self._remember(record["step"], record)
    self._file = open(self.path, "a")
    logdir = tb_dir(workdir)
    remove_hparams_files(logdir)  # an earlier segment's end; this one writes its own
    # purge_step hides the TensorBoard events a preempted run logged after its checkpoint.
    purge = None if truncate_after is None else truncate_after + 1
    self._tb = tensorboardX.SummaryWriter(logdir, purge_step=purge)

  def _remember(self, step: int, flat: Mapping[str, Any]) -> dict[str, list[float]]:
    """Keeps the best eval loss and the per-layer arrays; returns the arrays."""
    arrays = {k: v for k, v in flat.items() if isinstance(v, list)}
    if arrays:
      self.history.add(step, arrays)
    loss = flat.get("eval/loss")
    if isinstance(loss, float) and loss < self._best_eval:
      self._best_eval = loss
    return arrays

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Appends `{"step": step, **flat metrics}` and logs it to TensorBoard."""
    if not self.enabled:
      return
    step = int(step)
    flat = flatten_metrics(metrics)
    self._file.write(json.dumps({"step": step, **flat}) + "\n")
    self._file.flush()
    arrays = self._remember(step, flat)
    for key, value in flat.items():
      if not isinstance(value, list):
        self._tb.add_scalar(tb_tag(key), value, step)
    if "eval/loss" in flat:
      self._tb.add_scalar("eval/min_loss", self._best_eval, step)  # best_eval_loss
      if self.no_context_loss is not None:
        self._tb.add_scalar("eval/no_context_loss", self.no_context_loss, step)
    for name, values in arrays.items():
      width = _layer_width(len(values))
      for i in depth_profile.chosen_layers(len(values)):
        self._tb.add_scalar(f"train_layers/{name}/layer_{i:0{width}d}", values[i], step)
    if arrays and self.profile_every and step % self.profile_every == 0:
      self.draw_depth(step)

  def draw_depth(self, step: int) -> None:
    """One image per per-layer statistic: its history by layer and step, up to `step`."""
    for name in self.history.columns:
      steps, values = self.history.matrix(name)
      image = depth_profile.render(name, steps, values)
      self._tb.add_image(f"train_depth/{name}", image, step, dataformats="HWC")
    self._drawn_step = step

  def flush(self) -> None:
    """Flushes metrics.jsonl; TensorBoard events still queued on its thread land by close()."""
    if self.enabled:
      self._file.flush()
      self._tb.flush()

  def close(self) -> None:
    """Draws the depth images of the last step, flushes and closes; later calls are no-ops."""
    if self.enabled:
      latest = self.history.latest
      if latest is not None and latest[0] != self._drawn_step:
        self.draw_depth(latest[0])
      self._file.close()
      self._tb.close()
      self.enabled = False
