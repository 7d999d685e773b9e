"""A run's TensorBoard events: scalars, per-layer scalars and depth images, the two evals
named for what they are, and the Custom Scalars layout.

The two evals, named the same in metrics.jsonl and TensorBoard (each eval card's info icon
says which it is, `DESCRIPTIONS`):
  eval/loss        the periodic eval: the first train.eval_batches held-out batches (the same
                   tokens each time, 8,192 at CPU scale), every train.eval_every steps;
  eval/min_loss    the lowest eval/loss so far (summary.json `best_eval_loss`: same eval set);
  eval/no_context_loss  that eval set's no-context loss, the plateau of eval/loss;
  eval/final_loss  the end-of-run eval: at least train.final_eval_tokens held-out tokens
                   (16,384 at CPU scale), at the last step only (summary.json
                   `final_eval_loss`: the verdict's number).

Custom Scalars (`LAYOUT`, written by every run and by scripts/export_tensorboard.py): the
periodic eval loss with its no-context baseline on one chart, train and eval loss on
another; TensorBoard merges the identical layouts of all runs into one.

Write errors: tensorboardX writes the events in a thread of its own, which an error (a full
disk, a read-only folder) ends without a word, its queue then filling until the run hangs in
add_scalar. Here the first error is printed once, one line naming the error and the
event file, and kept (`Events.error`; the run puts it in summary.json as
`tensorboard_error`); the file is then set aside and later events are dropped, so the run
goes on: metrics.jsonl is the record of every row, TensorBoard's curves stop at the error.
"""

import errno
import functools
import os
from collections.abc import Mapping
from typing import Any

from etils import epath

from resnorm_jax.runs import record_files
from resnorm_jax.train import depth_profile

# What each eval tag is, shown by its card's info icon; {periodic} and {final}: the token
# counts ("8,192 tokens, ", "16,384 "), empty where the writer was not told them.
HPARAMS_SUFFIX = (
  ".hparams"  # the event file of resnorm_jax.train.hparams, replaced at a segment's end
)
EVENTS_PREFIX = "events.out.tfevents."


def tb_dir(workdir: str) -> str:
  """Where a run's TensorBoard events go: the workdir itself, or `tb/` where one exists."""
  old = os.path.join(workdir, record_files.EVENTS)
  return old if epath.Path(old).is_dir() else workdir


def is_hparams_file(name: str) -> bool:
  """Whether a file name is an hparams event file (resnorm_jax.train.hparams)."""
  return name.startswith(EVENTS_PREFIX) and name.endswith(HPARAMS_SUFFIX)


def remove_hparams_files(logdir: str, keep: str | None = None) -> None:
  """Deletes the hparams event files in `logdir` but the one named `keep`."""
  folder = epath.Path(logdir)
  if folder.is_dir():
    for path in folder.iterdir():
      if is_hparams_file(path.name) and path.name != keep:
        path.unlink()


DESCRIPTIONS = {
  "eval/loss": "Periodic eval: mean loss on the first train.eval_batches held-out batches "
  "({periodic}the same tokens each time), every train.eval_every steps.",
  "eval/min_loss": "Lowest periodic eval loss so far (eval/loss's eval set; summary.json "
  "best_eval_loss).",
  "eval/no_context_loss": "No-context loss of the periodic eval set: the train split's "
  "token frequencies scored on its tokens, the plateau of eval/loss (summary.json "
  "periodic_eval_no_context_loss).",
  "eval/final_loss": "End-of-run eval: mean loss on {final}held-out tokens "
  "(train.final_eval_tokens), at the last step only; summary.json final_eval_loss, the "
  "number the run's verdict uses. A larger eval set than eval/loss.",
}
# The Custom Scalars tab: {category: {chart: ["Multiline", [tag regex, ...]]}}; the baseline
# on the loss chart answers "is this run below the plateau?" in one card.
LAYOUT = {
  "loss": {
    "periodic eval loss and its no-context baseline": [
      "Multiline",
      [r"^eval/loss$", r"^eval/no_context_loss$"],
    ],
    "train loss, periodic and end-of-run eval loss": [
      "Multiline",
      [r"^train/loss$", r"^eval/loss$", r"^eval/final_loss$"],
    ],
  },
  "optimizer": {
    "learning rate": ["Multiline", [r"^train/lr$"]],
    "gradient and update norms": ["Multiline", [r"^train/grad_norm$", r"^train/update_norm$"]],
  },
}


def _layer_width(n: int) -> int:
  """Digits for per-layer suffixes: at least 3 (`layer_012`), more past 999 layers."""
  return max(3, len(str(n - 1)))


def tb_tag(key: str) -> str:
  """The TensorBoard tag of a metrics.jsonl key: `lr` -> `train/lr`; `eval/loss` stays."""
  return key if "/" in key else f"train/{key}"


def _describe(tag: str, eval_tokens: Mapping[str, int | None]) -> str:
  """The info-icon text of an eval tag ("" for any other tag)."""
  periodic, final = eval_tokens.get("periodic"), eval_tokens.get("final")
  return DESCRIPTIONS.get(tag, "").format(
    periodic="" if periodic is None else f"{periodic:,} tokens, ",
    final="" if final is None else f"{final:,} ",
  )


def _described(tag: str, value: float, text: str):
  """A scalar summary whose card shows `text` (its info icon) in TensorBoard.

  The metadata names the scalars plugin and its data class: TensorBoard's Rust data server
  keeps a scalar's description only then (tensorboardX's add_scalar leaves the class unset,
  its proto predates the field), so it is built with TensorBoard's proto and handed over as
  bytes (the field survives as an unknown field).
  """
  from tensorboard.compat.proto import summary_pb2 as tb
  from tensorboardX.proto.summary_pb2 import Summary

  meta = tb.SummaryMetadata(summary_description=text, data_class=tb.DATA_CLASS_SCALAR)
  meta.plugin_data.plugin_name = "scalars"
  value = tb.Summary.Value(tag=tag, simple_value=float(value), metadata=meta)
  return Summary.FromString(tb.Summary(value=[value]).SerializeToString())


# A full disk (or quota): the next checkpoint or summary.json meets it too, and the run's
# own error line says it; TensorBoard's warning waits for the run's end (release_warning).
FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def describe_error(e: BaseException, path: str) -> str:
  """`No space left on device [ENOSPC] (writing PATH)`: an error of one file, in one line."""
  if isinstance(e, OSError) and e.strerror:
    code = f" [{errno.errorcode[e.errno]}]" if e.errno in errno.errorcode else ""
    return f"{e.strerror}{code} (writing {path})"
  return f"{type(e).__name__}: {e} (writing {path})".replace("\n", " ")


class _Discard:
  """Where a failed event file's later events go: nowhere (no fileno: nothing to fsync)."""

  def write(self, data: bytes) -> int:
    return len(data)

  def flush(self) -> None:
    pass

  def close(self) -> None:
    pass


@functools.cache
def _reporting_thread():
  """tensorboardX's writer thread, reporting its errors (imported only where events are)."""
  from tensorboardX.event_file_writer import _EventLoggerThread

  class ReportingThread(_EventLoggerThread):
    """Writes the queued events as tensorboardX's does; an error goes to `on_error` (which
    sets the file aside) and the thread carries on taking events off the queue, so a writer
    never blocks on the full queue of a dead thread."""

    def __init__(self, queue, record_writer, flush_secs, on_error):
      super().__init__(queue, record_writer, flush_secs)
      self._on_error = on_error

    def run(self):
      while True:
        try:
          super().run()
          return
        except BaseException as e:  # noqa: BLE001 - anything would end the thread unseen,
          # and a writer would then block for ever on its full queue (seen in the suite: a
          # run's Queue.put waiting on a thread that had died)
          try:
            self._on_error(e)
          except BaseException:  # noqa: BLE001 - the report itself failed: keep draining
            pass

  return ReportingThread


class Events:
  """A run's TensorBoard events: each scalar by `tb_tag`, the eval group, per-layer scalars
  and depth images, and the Custom Scalars layout. MetricWriter and
  scripts/export_tensorboard.py (committed runs) both write through it.

  `eval_tokens`: {"periodic": tokens, "final": tokens} of the two evals, for the descriptions.
  `filename_suffix`: of the event file (an exported run's are told from a run's own by it).
  """

  def __init__(
    self,
    logdir: str,
    *,
    purge_step: int | None = None,
    profile_every: int | None = None,
    depth_images: bool = True,
    no_context_loss: float | None = None,
    eval_tokens: Mapping[str, int | None] | None = None,
    filename_suffix: str = "",
  ):
    import tensorboardX  # only process 0 pays for the import

    self.profile_every = profile_every
    self.depth_images = depth_images
    self.no_context_loss = no_context_loss
    self.eval_tokens = dict(eval_tokens or {})
    self.history = depth_profile.DepthHistory()
    self.best_eval = float("inf")
    self.drawn_step: int | None = None
    self.error: str | None = None  # the first write error of the event file (one line)
    self.held_warning: str | None = None  # its line, on a full disk: see release_warning
    # purge_step hides the events a preempted run logged after its checkpoint.
    self.tb = tensorboardX.SummaryWriter(
      logdir, purge_step=purge_step, filename_suffix=filename_suffix
    )
    self._writer = self.tb._get_file_writer().event_writer  # tensorboardX 2.6's (pinned)
    self._set_aside = False
    self._restart_worker()
    self.tb.add_custom_scalars(LAYOUT)  # every segment: identical layouts merge into one

  @property
  def path(self) -> str:
    """The event file."""
    return self._writer._ev_writer._file_name

  def _restart_worker(self) -> None:
    """Stops the writer thread once it has written every event queued so far, then starts a
    ReportingThread on the same queue and file (FIFO: nothing is lost or reordered)."""
    writer = self._writer
    if writer._closed:
      return
    writer._worker.stop()
    thread = _reporting_thread()
    args = (writer._event_queue, writer._ev_writer, writer._flush_secs, self._failed)
    writer._worker = thread(*args)
    writer._worker.start()

  def _failed(self, e: BaseException) -> None:
    """The first error: one line, kept in `error`; the file is closed and set aside (later
    events are dropped), so nothing raises or blocks again."""
    events = self._writer._ev_writer
    with events._lock:
      if not self._set_aside:
        records = events._py_recordio_writer
        try:
          records._writer.close()
        except (OSError, ValueError):
          pass  # its buffer cannot be written: dropped with it
        records._writer = _Discard()
        self._set_aside = True
    if self.error is None:
      self.error = describe_error(e, events._file_name)
      line = (
        f"WARNING: TensorBoard events stopped: {self.error}; later events are dropped, "
        "metrics.jsonl keeps every row"
      )
      if getattr(e, "errno", None) in FULL_DISK:  # said by the run's own line if it fails
        self.held_warning = line
      else:
        print(line, flush=True)

  def release_warning(self, say: bool = True) -> None:
    """Prints the warning held for a full disk (once), unless `say` is False: the run has
    printed its own error line for that disk (a failed save), and this one would repeat it."""
    line, self.held_warning = self.held_warning, None
    if line is not None and say:
      print(line, flush=True)

  def flush(self) -> None:
    """Flushes the event file (only what the writer thread has written so far)."""
    try:
      self.tb.flush()
    except (OSError, ValueError) as e:
      self._failed(e)

  def drain(self) -> None:
    """Writes every event queued so far to the file, then flushes it.

    tensorboardX's flush() only flushes the file: events still in its queue are written
    later by its thread, so a flush followed by an upload could miss the last scalars (seen
    under load). Restarting the thread processes the queue up to its stop signal first.
    """
    self._restart_worker()
    self.flush()

  def remember(self, step: int, flat: Mapping[str, Any]) -> dict[str, list[float]]:
    """Keeps the best eval loss and the per-layer arrays; returns the arrays."""
    arrays = {k: v for k, v in flat.items() if isinstance(v, list)}
    if arrays:
      self.history.add(step, arrays)
    loss = flat.get("eval/loss")
    if isinstance(loss, float) and loss < self.best_eval:
      self.best_eval = loss
    return arrays

  def _scalar(self, tag: str, value: float, step: int, walltime: float | None) -> None:
    text = _describe(tag, self.eval_tokens)
    if not text:
      self.tb.add_scalar(tag, value, step, walltime=walltime)
      return
    self.tb._get_file_writer().add_summary(_described(tag, value, text), step, walltime)

  def write(self, step: int, flat: Mapping[str, Any], walltime: float | None = None) -> None:
    """One logged step's flat metrics (flatten_metrics) as scalars, layers and images;
    `walltime`: when it was logged (default now; an exported run's is reconstructed)."""
    arrays = self.remember(step, flat)
    for key, value in flat.items():
      if not isinstance(value, list):
        self._scalar(tb_tag(key), value, step, walltime)
    if "eval/loss" in flat:
      self._scalar("eval/min_loss", self.best_eval, step, walltime)  # best_eval_loss
      if self.no_context_loss is not None:
        self._scalar("eval/no_context_loss", self.no_context_loss, step, walltime)
    for name, values in arrays.items():
      width = _layer_width(len(values))
      for i in depth_profile.chosen_layers(len(values)):
        tag = f"train_layers/{name}/layer_{i:0{width}d}"
        self.tb.add_scalar(tag, values[i], step, walltime=walltime)
    if arrays and self.depth_images and self.profile_every and step % self.profile_every == 0:
      self.draw_depth(step, walltime)

  def draw_depth(self, step: int, walltime: float | None = None) -> None:
    """One image per per-layer statistic: its history by layer and step, up to `step`."""
    for name in self.history.columns:
      steps, values = self.history.matrix(name)
      image = depth_profile.render(name, steps, values)
      self.tb.add_image(f"train_depth/{name}", image, step, walltime, dataformats="HWC")
    self.drawn_step = step

  def close(self, walltime: float | None = None) -> None:
    """Draws the depth images of the last step (unless drawn already or `depth_images` is
    off), then closes the file."""
    latest = self.history.latest
    if self.depth_images and latest is not None and latest[0] != self.drawn_step:
      self.draw_depth(latest[0], walltime)
    try:
      self.tb.close()
    except (OSError, ValueError) as e:  # the last flush: set aside, then closed for good
      self._failed(e)
      self.tb.close()
