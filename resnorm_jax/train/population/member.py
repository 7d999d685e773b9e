"""A population member: one run of the program (population/run.py), its folder and what it
writes there, what every member shares, and its output told apart by its folder name."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
from typing import Any, TextIO

from ml_collections import ConfigDict

from resnorm_jax.data import corpora
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import run_log
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train.writers import MetricWriter


class Prefixed(io.TextIOBase):
  """A text stream writing each line to `out` behind a prefix: a member's lines in the
  population's output, told apart by its folder name."""

  def __init__(self, prefix: str, out: TextIO):
    self.prefix, self.out, self._line_start = prefix, out, True

  def write(self, s: str) -> int:
    for piece in s.splitlines(keepends=True):
      if self._line_start:
        self.out.write(self.prefix)
      self.out.write(piece)
      self._line_start = piece.endswith("\n")
    return len(s)

  def flush(self) -> None:
    self.out.flush()


@dataclasses.dataclass(frozen=True)
class Shared:
  """What every member has in common: the run setup, corpus, baselines, devices."""

  run_setup: setup_lib.RunSetup
  corpus: corpora.Corpus
  baselines: dict[str, float]
  devices: dict
  wall_start: float


@dataclasses.dataclass(eq=False)
class Member:
  """One member's run: its config and folder, and what it writes there."""

  config: ConfigDict
  workdir: str
  config_dict: dict  # frozen into each checkpoint's meta
  out: TextIO  # where its lines go
  checkpointer: ckpt_lib.Checkpointer | None = None  # None: completed before, not reopened
  batches: setup_lib.Batches | None = None
  state: Any = None  # its restored TrainState, until the program stacks every slot
  start: int = 0
  resumed: dict = dataclasses.field(default_factory=dict)
  interval: list = dataclasses.field(default_factory=list)
  writer: MetricWriter | None = None
  log: run_log.RunLog | None = None
  compile_seconds: float = 0.0
  population_size: int = 1
  provenance: dict | None = None  # what its config.json records
  summary: dict | None = None  # set when it ends (or found completed)
  reached: int = 0  # the last step dispatched
  closed: bool = False

  @property
  def name(self) -> str:
    return os.path.basename(os.path.normpath(self.workdir))

  def print(self, *lines: str) -> None:
    with contextlib.redirect_stdout(self.out):
      print(*lines, sep="\n", flush=True)

  def close(self) -> None:
    """Closes its writer and checkpointer (waiting for a save in flight); idempotent."""
    if self.closed:
      return
    self.closed = True
    try:
      if self.writer is not None:
        self.writer.close()
    finally:  # a full disk failing the writer's close still closes the checkpointer
      if self.checkpointer is not None:
        self.checkpointer.close()
