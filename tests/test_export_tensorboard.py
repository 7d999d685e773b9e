"""resnorm_jax/train/tb_export.py (scripts/export_tensorboard.py's export): committed runs
(metrics.jsonl, config.json, summary.json) into TensorBoard events, HParams and the Custom
Scalars layout, read back as TensorBoard reads them; a second export replaces the first; a
live run's own events are left alone."""

import glob
import json
import os
import shutil

import pytest

from resnorm_jax.train import tb_export

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PANEL = os.path.join(ROOT, "docs", "deepnet_panel", "runs")
RUN = "postnorm-L96-invsqrt-w200"  # stuck on the plateau: its curve sits on the baseline


def _board(folder) -> dict:
  """{'scalars': {tag: [(step, value)]}, 'hparams': session start, 'layout': bytes}."""
  from tensorboard.backend.event_processing import plugin_event_accumulator as pea

  acc = pea.EventAccumulator(str(folder), size_guidance={"tensors": 0})
  acc.Reload()
  out = {"scalars": {}, "plugins": {}}
  for tag in acc.Tags()["tensors"]:
    plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
    out["plugins"][tag] = plugin
    if plugin == "scalars":
      out["scalars"][tag] = [(e.step, float(e.tensor_proto.float_val[0])) for e in acc.Tensors(tag)]
  return out


def _files(folder) -> list[str]:
  return sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "events.out.*")))


def test_export_a_committed_run_into_a_logdir(tmp_path):
  logdir = tmp_path / "tb"
  assert tb_export.export([os.path.join(PANEL, RUN)], str(logdir)) == 0
  target = logdir / RUN
  files = _files(target)
  assert len(files) == 2 and files[0].endswith(".export") and files[1].endswith(".hparams")
  board = _board(target)
  rows = [json.loads(line) for line in open(os.path.join(PANEL, RUN, "metrics.jsonl"))]
  summary = json.load(open(os.path.join(PANEL, RUN, "summary.json")))
  evals = [(r["step"], r["eval/loss"]) for r in rows if "eval/loss" in r]
  got = board["scalars"]["eval/loss"]
  assert [s for s, _ in got] == [s for s, _ in evals]
  assert [v for _, v in got] == pytest.approx([v for _, v in evals], rel=1e-6)
  assert board["scalars"]["train/loss"][-1][1] == pytest.approx(rows[-1]["train/loss"], rel=1e-6)
  # The baseline beside the periodic curve is that eval set's own no-context loss.
  base = board["scalars"]["eval/no_context_loss"]
  assert base[-1][1] == pytest.approx(summary["periodic_eval_no_context_loss"], rel=1e-6)
  assert board["scalars"]["eval/final_loss"] == [(1000, pytest.approx(summary["final_eval_loss"]))]
  final = board["scalars"]["compare/final_eval_loss"]
  assert final == [(1000, pytest.approx(summary["final_eval_loss"]))]
  assert "compare/escape_step" not in board["scalars"]  # stuck: it never escaped
  assert board["plugins"]["custom_scalars__config__"] == "custom_scalars"
  assert board["plugins"]["_hparams_/session_start_info"] == "hparams"
  # Again: the first export's files are replaced, the values the same.
  assert tb_export.export([os.path.join(PANEL, RUN)], str(logdir)) == 0
  assert len(_files(target)) == 2
  assert _board(target)["scalars"]["eval/loss"] == got


def test_export_a_sweep_folder_in_place_and_skip_a_live_run(tmp_path, capsys):
  """In place: events beside each metrics.jsonl of a copied sweep folder; a run folder
  that holds its own (training) events is skipped, untouched."""
  sweep = tmp_path / "panel"
  for name in (RUN, "prenorm-L96-invsqrt-w200"):
    shutil.copytree(os.path.join(PANEL, name), sweep / name)
  live = sweep / "prenorm-L96-invsqrt-w200"
  (live / "events.out.tfevents.1.host").write_bytes(b"")
  assert tb_export.export([str(sweep)]) == 0
  out = capsys.readouterr().out
  assert "skipped, it has its own TensorBoard events" in out and "1 runs exported" in out
  assert len(_files(sweep / RUN)) == 2
  assert _files(live) == ["events.out.tfevents.1.host"]


def test_a_folder_without_runs_is_an_error(tmp_path, capsys):
  assert tb_export.export([str(tmp_path)]) == 2
  assert "no run folder" in capsys.readouterr().err


def test_walltimes_follow_step_seconds():
  rows = [{"step": 10, "step_seconds": 0.5}, {"step": 20, "step_seconds": 1.0}, {"step": 25}]
  # 10 steps of 0.5 s, 10 of 1 s, then a row without a time: 15 s before the end
  assert tb_export.walltimes(rows, 100.0) == [90.0, 100.0, 100.0]
