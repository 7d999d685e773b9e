"""What lands in the TensorBoard event files (resnorm_jax.train.writers and depth_profile):
tags at 1000 layers, depth images as diag.depth_images says, the custom-scalars layout, eval
tags, the HParams session across resumes, and write errors that warn once and keep the run."""

import glob
import os
import re

import numpy as np
import pytest

from resnorm_jax.runs import metrics_file
from resnorm_jax.train import depth_profile, writers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _events(logdir) -> dict:
  """{'scalars': {tag: [(step, value)]}, 'images': {tag: [(step, (h, w))]}} of a run folder."""
  from tensorboard.backend.event_processing import event_accumulator

  acc = event_accumulator.EventAccumulator(
    str(logdir), size_guidance={event_accumulator.IMAGES: 0, event_accumulator.SCALARS: 0}
  )
  acc.Reload()
  tags = acc.Tags()
  return {
    "scalars": {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in tags["scalars"]},
    "images": {t: [(e.step, (e.height, e.width)) for e in acc.Images(t)] for t in tags["images"]},
  }


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_tensorboard_tags_at_1000_layers(tmp_path):
  """A few dozen scalar tags at any depth: per-layer arrays become images and 4 layers."""
  rng = np.random.default_rng(0)
  w = writers.MetricWriter(str(tmp_path), profile_every=20, no_context_loss=3.25)
  for step in (10, 20, 30):
    row = {"train/loss": 3.0, "lr": 1e-3, "grad_norm": 1.0}
    row.update({f"stat{i}": rng.random(1000).astype(np.float32) + 0.1 for i in range(4)})
    if step != 10:
      row["eval/loss"] = 4.0 - step / 100
    w.write(step, row)
  w.close()
  assert glob.glob(str(tmp_path / "events.out.tfevents.*"))  # straight in the workdir
  ev = _events(tmp_path)
  scalars, images = ev["scalars"], ev["images"]
  layer_tags = sorted(t for t in scalars if t.startswith("train_layers/stat0/"))
  assert layer_tags == [f"train_layers/stat0/layer_{i:03d}" for i in (0, 250, 500, 999)]
  assert len(scalars) == 3 + 3 + 4 * 4  # train/*, eval/*, 4 layers of each statistic
  assert scalars["train/lr"][0] == (10, pytest.approx(1e-3))
  assert [v for _, v in scalars["eval/min_loss"]] == pytest.approx([3.8, 3.7])
  assert [s for s, _ in scalars["eval/no_context_loss"]] == [20, 30]
  # Drawn at step 20 (profile_every) and by close() at 30; one image per statistic.
  assert sorted(images) == [f"train_depth/stat{i}" for i in range(4)]
  assert [s for s, _ in images["train_depth/stat0"]] == [20, 30]


@pytest.mark.parametrize("mode, steps", [("eval", [20, 30]), ("end", [30]), ("none", [])])
def test_depth_images_are_drawn_as_diag_depth_images_says(tmp_path, mode, steps):
  """eval: at each evaluation (every eval_every steps) and at the end; end: at the end only;
  none: never, the chosen layers' scalars still written."""
  from resnorm_jax.train import depth_profile

  draw, every = depth_profile.drawing(mode, 20)
  w = writers.MetricWriter(str(tmp_path), profile_every=every, depth_images=draw)
  for step in (10, 20, 30):
    w.write(step, {"train/loss": 3.0, "stat": np.full(4, 0.5, np.float32)})
  w.close()
  ev = _events(tmp_path)
  assert [s for s, _ in ev["images"].get("train_depth/stat", [])] == steps
  assert [s for s, _ in ev["scalars"]["train_layers/stat/layer_003"]] == [10, 20, 30]


def test_an_unknown_depth_images_mode_is_refused_naming_the_choices():
  from configs import base
  from resnorm_jax.train import run_setup

  config = base.get_config()
  config.diag.depth_images = "sometimes"
  with pytest.raises(
    ValueError, match="diag.depth_images='sometimes' is not one of eval, end, none"
  ):
    run_setup.validate(config)  # before anything is built or compiled


def test_old_tb_folder_keeps_its_events(tmp_path):
  (tmp_path / "tb").mkdir()
  w = writers.MetricWriter(str(tmp_path))
  w.write(1, {"train/loss": 1.0})
  w.close()
  assert glob.glob(str(tmp_path / "tb" / "events.out.tfevents.*"))
  assert not glob.glob(str(tmp_path / "events.out.tfevents.*"))


def test_resumed_writer_draws_from_the_kept_history(tmp_path):
  w = writers.MetricWriter(str(tmp_path))
  for step in (1, 2, 3):
    w.write(step, {"rms": np.array([1.0, float(step)])})
  w.close()
  (tmp_path / "events.out.tfevents.1.host.hparams").write_bytes(b"")  # an earlier segment's
  w = writers.MetricWriter(str(tmp_path), truncate_after=2)
  assert w.history.steps == [1, 2]  # step 3 was after the checkpoint
  assert glob.glob(str(tmp_path / "*.hparams"))  # kept until this segment writes its own
  w.write(3, {"rms": np.array([1.0, 9.0])})
  steps, values = w.history.matrix("rms")
  w.close()
  assert steps == [1, 2, 3] and values[1].tolist() == [1.0, 2.0, 9.0]


def test_chosen_layers():
  assert depth_profile.chosen_layers(1) == [0]
  assert depth_profile.chosen_layers(2) == [0, 1]
  assert depth_profile.chosen_layers(12) == [0, 3, 6, 11]
  assert depth_profile.chosen_layers(96) == [0, 24, 48, 95]


def test_depth_history_thins_evenly_and_keeps_the_latest():
  h = depth_profile.DepthHistory(max_columns=4)
  for step in range(1, 12):
    h.add(step * 10, {"rms": np.full(3, step, np.float32)})
  assert h.steps == [10, 50, 90]  # every 4th log step once thinned twice
  steps, values = h.matrix("rms")
  assert steps == [10, 50, 90, 110] and values.shape == (3, 4)
  assert values[0].tolist() == [1.0, 5.0, 9.0, 11.0]


def test_render_marks_non_positive_values_and_has_the_size():
  values = np.array([[1e-6, 1e-3], [0.0, np.nan], [1.0, 10.0]], np.float32)
  image = depth_profile.render("g", [5, 10], values, size=(4.0, 2.0), dpi=50)
  assert image.shape == (100, 200, 3) and image.dtype == np.uint8
  assert image.std() > 10  # something was drawn


def test_custom_scalars_layout_puts_the_baseline_on_the_loss_chart(tmp_path):
  """Each run writes the Custom Scalars layout: its first category's first chart is the
  periodic eval loss with its no-context baseline; every chart's tags exist in a run."""
  from tensorboard.backend.event_processing import event_accumulator
  from tensorboard.plugins.custom_scalar import layout_pb2, metadata

  w = writers.MetricWriter(str(tmp_path), no_context_loss=3.3)
  w.write(10, {"train/loss": 4.0, "lr": 1e-3, "grad_norm": 1.0, "update_norm": 0.1})
  w.write(20, {"train/loss": 3.5, "eval/loss": 3.6, "eval/final_loss": 3.55})
  w.close()
  acc = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
  acc.Reload()
  (event,) = acc.Tensors(metadata.CONFIG_SUMMARY_TAG)
  layout = layout_pb2.Layout()
  layout.ParseFromString(event.tensor_proto.string_val[0])
  first = layout.category[0]
  assert first.title == "loss"
  assert list(first.chart[0].multiline.tag) == [r"^eval/loss$", r"^eval/no_context_loss$"]
  tags = acc.Tags()["scalars"]
  for category in layout.category:
    for chart in category.chart:
      for regex in chart.multiline.tag:
        assert any(re.match(regex, t) for t in tags), regex


def test_eval_tags_say_which_eval_they_are(tmp_path):
  """Each eval card's info icon names its eval set (read as TensorBoard reads it)."""
  from tensorboard.backend.event_processing import plugin_event_accumulator as event_accumulator

  w = writers.MetricWriter(
    str(tmp_path), no_context_loss=3.3, eval_tokens={"periodic": 8192, "final": 16384}
  )
  w.write(20, {"train/loss": 3.5, "eval/loss": 3.6, "eval/final_loss": 3.55})
  w.close()
  acc = event_accumulator.EventAccumulator(str(tmp_path))
  acc.Reload()
  tags = acc.Tags()["tensors"]  # old-style scalars migrated, as the server does
  text = {t: acc.SummaryMetadata(t).summary_description for t in tags}
  assert "Periodic eval" in text["eval/loss"] and "8,192 tokens" in text["eval/loss"]
  assert "End-of-run eval" in text["eval/final_loss"] and "16,384" in text["eval/final_loss"]
  assert "periodic" in text["eval/min_loss"] and "plateau" in text["eval/no_context_loss"]
  assert text["train/loss"] == ""


def test_hparams_file_carries_the_compare_scalars(tmp_path):
  """The five numbers runs are compared by sort first among the run's scalar tags (the
  HParams table shows the first five metrics); a run that never escaped has no escape step."""
  from tensorboard.backend.event_processing import event_accumulator

  from resnorm_jax.train import hparams

  summary = {
    "status": "completed",
    "steps": 40,
    "final_eval_loss": 2.5,
    "best_eval_loss": 2.4,
    "heldout_unigram_entropy": 3.2,
    "tokens_per_second": 1000.0,
    "escape_step": None,
  }
  w = writers.MetricWriter(str(tmp_path), no_context_loss=3.3)
  w.write(40, {"train/loss": 2.0, "eval/loss": 2.4, "eval/final_loss": 2.5})
  w.close()
  hparams.write(str(tmp_path), {"norm": "layernorm"}, "completed", 40, summary)
  acc = event_accumulator.EventAccumulator(str(tmp_path))
  acc.Reload()
  tags = sorted(acc.Tags()["scalars"])
  assert tags[:4] == [
    "compare/best_periodic_eval_loss",
    "compare/final_eval_loss",
    "compare/no_context_loss",
    "compare/tokens_per_second",
  ]
  assert acc.Scalars("compare/final_eval_loss")[0].step == 40
  assert acc.Scalars("compare/no_context_loss")[0].value == pytest.approx(3.2)
  hparams.write(
    str(tmp_path), {"norm": "layernorm"}, "completed", 40, {**summary, "escape_step": 7}
  )
  acc = event_accumulator.EventAccumulator(str(tmp_path))
  acc.Reload()
  assert sorted(acc.Tags()["scalars"])[1] == "compare/escape_step"
  # A summary from before the held-out baseline: the verdict's, the train split's entropy.
  old = {k: v for k, v in summary.items() if k != "heldout_unigram_entropy"}
  hparams.write(
    str(tmp_path), {"norm": "layernorm"}, "completed", 40, {**old, "unigram_entropy": 3.1}
  )
  acc = event_accumulator.EventAccumulator(str(tmp_path))
  acc.Reload()
  assert acc.Scalars("compare/no_context_loss")[0].value == pytest.approx(3.1)


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_a_tensorboard_write_error_is_one_warning_and_the_metrics_go_on(
  tmp_path, monkeypatch, capsys
):
  """The event file's disk is full (/dev/full: every flush fails with ENOSPC). The writer
  thread died without a word, and once its queue was full the next add_scalar hung the run;
  now one warning line names the error and the file, the error is kept (summary.json's
  tensorboard_error), metrics.jsonl gets every row and flush/close raise nothing."""
  import threading

  from tensorboardX import record_writer

  if not os.path.exists("/dev/full"):
    pytest.skip("needs /dev/full (Linux)")
  monkeypatch.setattr(record_writer, "open_file", lambda path: open("/dev/full", "wb"))
  w = writers.MetricWriter(str(tmp_path), profile_every=10)
  path = w._events.path
  assert path.startswith(str(tmp_path / "events.out.tfevents."))

  def rows():
    for step in range(1, 101):
      w.write(step, {"train/loss": 1.0 / step, "lr": 1e-3, "rms": np.ones(4, np.float32)})
      if step % 25 == 0:
        w.flush()  # a checkpoint's flush: the error again, not raised

  writing = threading.Thread(target=rows, daemon=True)
  writing.start()
  writing.join(timeout=120)
  assert not writing.is_alive(), "the run hung on the TensorBoard queue"
  w.close()
  assert len(metrics_file.read_metrics(str(tmp_path / "metrics.jsonl"))) == 100
  assert w.tb_error == f"No space left on device [ENOSPC] (writing {path})"
  warnings = [ln for ln in capsys.readouterr().out.splitlines() if "TensorBoard" in ln]
  assert warnings == [
    f"WARNING: TensorBoard events stopped: {w.tb_error}; later events are dropped, "
    "metrics.jsonl keeps every row"
  ]


def test_a_read_only_events_folder_mid_run_is_reported(tmp_path, capsys):
  """A write error met by the flush in the run's own thread (a folder remounted read-only):
  the same one line, nothing raised."""
  w = writers.MetricWriter(str(tmp_path))
  w.write(1, {"train/loss": 1.0})
  w.flush()  # nothing left queued for the writer's background thread to put in the old file
  events = w._events._writer._ev_writer._py_recordio_writer

  class ReadOnly:
    def write(self, data):
      raise OSError(30, "Read-only file system")

    flush = close = lambda self: None

  real, events._writer = events._writer, ReadOnly()  # the real file closes only at the end:
  w.write(2, {"train/loss": 0.5})  # the writer's thread never meets it closed
  w.flush()
  w.write(3, {"train/loss": 0.25})
  w.close()
  real.close()
  assert w.tb_error == f"Read-only file system [EROFS] (writing {w._events.path})"
  out = capsys.readouterr().out
  assert out.count("WARNING: TensorBoard events stopped") == 1
  assert [r["step"] for r in metrics_file.read_metrics(str(tmp_path / "metrics.jsonl"))] == [
    1,
    2,
    3,
  ]


def _hparams_sessions(logdir) -> dict:
  """The HParams sessions of a run folder as TensorBoard reads them: their count, the first
  one's hparams and status, the compare/ scalars' last values, the hparams files."""
  from tensorboard.backend.event_processing import plugin_event_accumulator
  from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

  acc = plugin_event_accumulator.EventAccumulator(str(logdir), size_guidance={"tensors": 0})
  acc.Reload()
  tags = acc.Tags()["tensors"]
  out = {
    "files": sorted(os.path.basename(f) for f in glob.glob(str(logdir / "*.hparams"))),
    "sessions": 0,
    "compare": {t: acc.Tensors(t)[-1].tensor_proto.float_val[0] for t in tags if "compare/" in t},
  }
  start, end = "_hparams_/session_start_info", "_hparams_/session_end_info"
  if start not in tags:
    return out
  out["sessions"] = len(acc.Tensors(start))
  content = plugin_data_pb2.HParamsPluginData.FromString
  hp = content(acc.SummaryMetadata(start).plugin_data.content).session_start_info.hparams
  out["hparams"] = {k: getattr(v, v.WhichOneof("kind")) for k, v in hp.items()}
  status = content(acc.SummaryMetadata(end).plugin_data.content).session_end_info.status
  out["status"] = api_pb2.Status.Name(status)
  out["steps"] = [e.step for e in acc.Tensors(start)]
  return out


def _segment(workdir, start, stop, *, resume):
  """A run segment's curves: steps start+10 .. stop, from a checkpoint at `start`."""
  w = writers.MetricWriter(str(workdir), truncate_after=start if resume else None)
  for step in range(start + 10, stop + 1, 10):
    w.write(step, {"train/loss": 3.0 - step / 100, "eval/loss": 3.1 - step / 100})
  w.close()


def test_hparams_survive_resumes(tmp_path):
  """A resumed run deleted its earlier hparams file when its writer opened: killed again, or
  unable to write its own, it left the HParams dashboard without the run. Now every state of
  the run folder holds exactly one valid session, the latest segment's."""
  from resnorm_jax.train import hparams

  hp = {"norm": "layernorm", "num_layers": 12, "lr": 1e-3, "outcome": "interrupted"}
  summary = {"status": "interrupted", "steps": 40, "final_eval_loss": 2.7, "best_eval_loss": 2.7}
  _segment(tmp_path, 0, 40, resume=False)  # SIGTERM at step 40: saved, hparams written
  hparams.write(str(tmp_path), hp, "interrupted", 40, summary)
  first = _hparams_sessions(tmp_path)
  assert first["sessions"] == 1 and first["hparams"]["outcome"] == "interrupted"

  _segment(tmp_path, 40, 70, resume=True)  # resumed, then kill -9 at step 70: no hparams
  killed = _hparams_sessions(tmp_path)
  assert killed["files"] == first["files"] and killed["sessions"] == 1
  assert killed["hparams"] == first["hparams"] and killed["status"] == "STATUS_UNKNOWN"
  assert killed["compare"]["compare/final_eval_loss"] == pytest.approx(2.7)

  _segment(tmp_path, 40, 100, resume=True)  # resumed from 40 again, completed
  done = {**summary, "status": "completed", "steps": 100, "final_eval_loss": 2.1}
  hparams.write(str(tmp_path), {**hp, "outcome": "trained"}, "completed", 100, done)
  completed = _hparams_sessions(tmp_path)
  assert len(completed["files"]) == 1 and completed["sessions"] == 1
  assert completed["hparams"] == {**hp, "outcome": "trained"}
  assert completed["status"] == "STATUS_SUCCESS" and completed["steps"] == [100]
  assert completed["compare"]["compare/final_eval_loss"] == pytest.approx(2.1)

  # Resumed from an earlier checkpoint (the newest was damaged): its restart marker hides
  # every event after step 80, the hparams too unless they move back to 80.
  _segment(tmp_path, 80, 90, resume=True)
  fallback = _hparams_sessions(tmp_path)
  assert fallback["files"] == completed["files"] and fallback["sessions"] == 1
  assert fallback["steps"] == [80] and fallback["hparams"] == completed["hparams"]
  assert fallback["compare"]["compare/final_eval_loss"] == pytest.approx(2.1)


def test_an_hparams_write_error_keeps_the_earlier_session(tmp_path, monkeypatch, capsys):
  """A full disk at a segment's end: one warning line, the earlier hparams file intact, no
  temporary file left, nothing raised (summary.json is already written)."""
  from ml_collections import ConfigDict

  from configs import smoke
  from resnorm_jax.train import hparams

  config = ConfigDict(smoke.get_config().to_dict())
  _segment(tmp_path, 0, 20, resume=False)
  assert hparams.write_run(str(tmp_path), config, {"status": "interrupted", "steps": 20})
  before = _hparams_sessions(tmp_path)

  real_open = open

  def full_disk_open(file, mode="r", *args, **kwargs):
    if "w" in mode and ".hparams." in os.path.basename(str(file)):
      raise OSError(28, "No space left on device", str(file))
    return real_open(file, mode, *args, **kwargs)

  real_os_open = os.open

  def full_disk_os_open(path, flags, *args, **kwargs):  # the writer's open_nofollow
    if flags & os.O_WRONLY and ".hparams." in os.path.basename(str(path)):
      raise OSError(28, "No space left on device", str(path))
    return real_os_open(path, flags, *args, **kwargs)

  monkeypatch.setattr("builtins.open", full_disk_open)
  monkeypatch.setattr(os, "open", full_disk_os_open)
  _segment(tmp_path, 20, 40, resume=True)
  assert hparams.write_run(str(tmp_path), config, {"status": "completed", "steps": 40}) is None
  monkeypatch.undo()
  out = capsys.readouterr().out
  (line,) = [ln for ln in out.splitlines() if "HParams" in ln]
  assert line.startswith("WARNING: TensorBoard HParams not updated: No space left on device")
  after = _hparams_sessions(tmp_path)
  assert after["files"] == before["files"] and after["sessions"] == 1
  assert after["hparams"]["outcome"] == "interrupted"
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
