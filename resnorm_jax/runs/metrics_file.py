"""metrics.jsonl, a run's one JSON row per logged step: reading it (old per-layer keys folded
into lists, a torn last line skipped), the step of a line, cutting it back to a checkpoint's
step (in place locally; rewritten whole for a gs:// workdir), and the unreadable rows a resume
reports. resnorm_jax.train.writers appends the rows. No JAX here.
"""

import json
import os
import re
from typing import Any

from etils import epath

from resnorm_jax.data import fs
from resnorm_jax.runs import record_files

METRICS = record_files.METRICS
_OLD_LAYER_KEY = re.compile(r"^(.+)/layer_(\d+)$")


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
  with epath.Path(path).open() as f:
    for line in f:
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        continue
      records.append(fold_layer_keys(record) if isinstance(record, dict) else record)
  return records


def truncated(text: str, last_step: int) -> str:
  """The lines of a metrics file with step <= last_step (torn and foreign lines dropped)."""
  steps = ((step_of(line), line) for line in text.split("\n"))
  return "".join(f"{line}\n" for step, line in steps if step is not None and step <= last_step)


def truncate(path: str, last_step: int) -> None:
  """Keeps the records with step <= last_step; replaces the file atomically, mode kept."""
  fs.replace_text(path, truncated(epath.Path(path).read_text(), last_step))


def step_of(line: str) -> int | None:
  """The step of one metrics line, None for a torn or foreign line."""
  try:
    record = json.loads(line)
  except json.JSONDecodeError:
    return None
  step = record.get("step") if isinstance(record, dict) else None
  return step if isinstance(step, int) else None


def unreadable_rows(path: str) -> list[int | None]:
  """For each line of metrics.jsonl that does not parse as a row, the step of the row before
  it (None: the first line); a torn last line (a kill mid-write, a step the resume redoes)
  is not counted."""
  if fs.is_remote(path) or not os.path.exists(path):
    return []
  with open(path, "rb") as f:
    lines = f.read().split(b"\n")
  if lines and lines[-1] == b"":
    lines.pop()
  out, before = [], None
  for i, line in enumerate(lines):
    try:
      step = json.loads(line).get("step")
    except (ValueError, AttributeError):
      step = None
    if isinstance(step, int):
      before = step
    elif i < len(lines) - 1:
      out.append(before)
  return out


def cut_metrics(path: str, last_step: int) -> None:
  """Drops metrics.jsonl's rows after `last_step` (and a torn line after the last row kept)
  in place: a truncate needs no free space, where a rewrite would need the file's size."""
  if fs.is_remote(path) or not os.path.exists(path):
    return
  with fs.open_nofollow(path, "r+b") as f:
    offset = keep = 0  # keep: the end of the last row at or before last_step
    for line in f:
      offset += len(line)
      try:
        step = json.loads(line).get("step")
      except (ValueError, AttributeError):
        continue  # kept between good rows (a resume reports it), cut after the last one
      if isinstance(step, int):
        if step > last_step:
          break
        keep = offset
    f.truncate(keep)
