"""Metrics to `<workdir>/metrics.jsonl` and tensorboardX `<workdir>/tb/` (process 0 only).

Non-finite values are written as the bare tokens `NaN` / `Infinity` (Python's json default):
a diverged run's last loss stays visible. Read the file with Python's `json` (`read_metrics`),
which accepts them; strict JSON parsers do not.
"""

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np


def _layer_width(n: int) -> int:
  """Digits for per-layer suffixes: at least 3 (`layer_012`), more past 999 layers."""
  return max(3, len(str(n - 1)))


def flatten_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
  """Scalars -> floats; a 1-D per-layer array `name` -> `name/layer_000`, ...; dicts -> `a/b`."""
  flat: dict[str, float] = {}
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
      width = _layer_width(len(array))
      flat.update({f"{key}/layer_{i:0{width}d}": float(v) for i, v in enumerate(array)})
    else:
      raise ValueError(
        f"metric {key!r} has shape {array.shape}; expected a scalar or 1-D per layer"
      )
  return flat


def read_metrics(path: str) -> list[dict[str, Any]]:
  """All records of a metrics.jsonl file, skipping a torn last line from a killed run."""
  records = []
  with open(path) as f:
    for line in f:
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        continue
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


class MetricWriter:
  """Appends one JSON line and TensorBoard scalars per `write`; a no-op when not enabled."""

  def __init__(self, workdir: str, enabled: bool = True, truncate_after: int | None = None):
    self.enabled = enabled
    self._file = None
    self._tb = None
    if not enabled:
      return
    import tensorboardX  # only process 0 pays for the import

    os.makedirs(workdir, exist_ok=True)
    self.path = os.path.join(workdir, "metrics.jsonl")
    if truncate_after is not None and os.path.exists(self.path):
      _truncate(self.path, truncate_after)
    self._file = open(self.path, "a")
    # purge_step hides the TensorBoard events a preempted run logged after its checkpoint.
    purge = None if truncate_after is None else truncate_after + 1
    self._tb = tensorboardX.SummaryWriter(os.path.join(workdir, "tb"), purge_step=purge)

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Appends `{"step": step, **flat metrics}` and logs each scalar to TensorBoard."""
    if not self.enabled:
      return
    flat = flatten_metrics(metrics)
    self._file.write(json.dumps({"step": int(step), **flat}) + "\n")
    self._file.flush()
    for key, value in flat.items():
      self._tb.add_scalar(key, value, int(step))

  def flush(self) -> None:
    """Flushes metrics.jsonl; TensorBoard events still queued on its thread land by close()."""
    if self.enabled:
      self._file.flush()
      self._tb.flush()

  def close(self) -> None:
    """Flushes and closes both files; later calls are no-ops."""
    if self.enabled:
      self._file.close()
      self._tb.close()
      self.enabled = False
