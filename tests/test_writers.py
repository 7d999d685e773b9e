"""resnorm_jax.train.writers' metrics.jsonl: lists per layer, old files, resume truncation,
disabled writers. What lands in the TensorBoard event files: test_tb_writer.py."""

import json
import math
import os

import numpy as np
import pytest

from resnorm_jax.runs import metrics_file
from resnorm_jax.train import writers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_flatten_per_layer_lists():
  flat = writers.flatten_metrics(
    {"train/loss": np.float32(2.5), "lr": 1e-3, "step_ok": True, "grad_norm": np.arange(12.0)}
  )
  assert flat == {
    "train/loss": 2.5,
    "lr": 1e-3,
    "step_ok": 1.0,
    "grad_norm": [float(i) for i in range(12)],
  }
  assert all(type(v) is float for v in flat["grad_norm"])


def test_flatten_float32_lists_by_shortest_repr_and_nests():
  flat = writers.flatten_metrics({"rms": np.full(1001, 0.1, np.float32), "eval": {"loss": 3.0}})
  assert len(flat["rms"]) == 1001 and flat["rms"][0] == 0.1  # not 0.10000000149011612
  assert np.float32(flat["rms"][0]) == np.float32(0.1)  # the same float32
  assert flat["eval/loss"] == 3.0


def test_flatten_rejects_matrices():
  with pytest.raises(ValueError, match=r"'w'.*\(2, 2\)"):
    writers.flatten_metrics({"w": np.ones((2, 2))})


def test_write_appends_json_lines_with_nan(tmp_path):
  w = writers.MetricWriter(str(tmp_path))
  w.write(0, {"train/loss": 5.0})
  w.write(10, {"train/loss": float("nan"), "act": np.array([1.0, 2.0])})
  w.close()
  lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
  assert '"act": [1.0, 2.0]' in lines[1]  # one list per statistic, not one key per layer
  records = metrics_file.read_metrics(str(tmp_path / "metrics.jsonl"))
  assert records[0] == {"step": 0, "train/loss": 5.0}
  assert records[1]["step"] == 10 and math.isnan(records[1]["train/loss"])
  assert records[1]["act"] == [1.0, 2.0]
  w.write(20, {"x": 1.0})  # after close: a no-op, not a crash
  assert len(metrics_file.read_metrics(str(tmp_path / "metrics.jsonl"))) == 2


def test_read_metrics_folds_old_per_layer_keys(tmp_path):
  old = {"step": 5, "train/loss": 2.0, "rms/layer_001": 1.5, "rms/layer_000": 0.5, "lr": 1e-3}
  partial = {"step": 10, "g/layer_000": 1.0, "g/layer_999": 2.0}  # an excerpt: kept as is
  path = tmp_path / "metrics.jsonl"
  path.write_text(json.dumps(old) + "\n" + json.dumps(partial) + "\n")
  first, second = metrics_file.read_metrics(str(path))
  assert first == {"step": 5, "train/loss": 2.0, "rms": [0.5, 1.5], "lr": 1e-3}
  assert second == partial


def test_committed_docs_curves_stay_readable():
  """docs/runs/*/curve.jsonl: written with per-layer keys before lists, read the same."""
  path = os.path.join(ROOT, "docs", "runs", "deepnorm_1000L", "curve.jsonl")
  records = metrics_file.read_metrics(path)
  assert records and all("train/loss" in r for r in records)
  assert all("grad_norm_layer/layer_999" in r for r in records)


def test_truncate_after_drops_later_steps(tmp_path):
  w = writers.MetricWriter(str(tmp_path))
  for step in (0, 10, 20, 30):
    w.write(step, {"loss": float(step)})
  w.close()
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"step": 40, "lo')  # a line torn by a kill mid-write
  w = writers.MetricWriter(str(tmp_path), truncate_after=20)
  w.write(30, {"loss": -1.0})
  w.close()
  records = metrics_file.read_metrics(str(tmp_path / "metrics.jsonl"))
  assert [r["step"] for r in records] == [0, 10, 20, 30]
  assert records[-1]["loss"] == -1.0 and records[1]["loss"] == 10.0
  # Every line parses: no torn line survives in the middle of the file.
  lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
  assert [json.loads(line)["step"] for line in lines] == [0, 10, 20, 30]
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_truncate_without_existing_file(tmp_path):
  w = writers.MetricWriter(str(tmp_path / "new"), truncate_after=5)
  w.write(6, {"loss": 1.0})
  w.close()
  assert [
    r["step"] for r in metrics_file.read_metrics(str(tmp_path / "new" / "metrics.jsonl"))
  ] == [6]


def test_disabled_writer_writes_nothing(tmp_path):
  workdir = tmp_path / "run"
  w = writers.MetricWriter(str(workdir), enabled=False, truncate_after=0)
  w.write(0, {"loss": 1.0})
  w.flush()
  w.close()
  assert not workdir.exists()
