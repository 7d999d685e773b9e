"""Tests for resnorm_jax.writers: flattening, resume truncation, disabled writers, TB files."""

import json
import math
import os

import numpy as np
import pytest

from resnorm_jax import writers


def test_flatten_per_layer_names():
  flat = writers.flatten_metrics(
    {"train/loss": np.float32(2.5), "lr": 1e-3, "step_ok": True, "grad_norm": np.arange(12.0)}
  )
  assert flat["train/loss"] == 2.5
  assert flat["lr"] == 1e-3
  assert flat["step_ok"] == 1.0
  assert "grad_norm" not in flat
  assert [k for k in flat if k.startswith("grad_norm/")] == [
    f"grad_norm/layer_{i:03d}" for i in range(12)
  ]
  assert flat["grad_norm/layer_011"] == 11.0
  assert all(type(v) is float for v in flat.values())


def test_flatten_widens_past_999_layers_and_nests():
  flat = writers.flatten_metrics({"rms": np.ones(1001), "eval": {"loss": 3.0}})
  assert "rms/layer_0000" in flat and "rms/layer_1000" in flat
  assert flat["eval/loss"] == 3.0


def test_flatten_rejects_matrices():
  with pytest.raises(ValueError, match=r"'w'.*\(2, 2\)"):
    writers.flatten_metrics({"w": np.ones((2, 2))})


def test_write_appends_json_lines_with_nan(tmp_path):
  w = writers.MetricWriter(str(tmp_path))
  w.write(0, {"train/loss": 5.0})
  w.write(10, {"train/loss": float("nan"), "act": np.array([1.0, 2.0])})
  w.close()
  records = writers.read_metrics(str(tmp_path / "metrics.jsonl"))
  assert records[0] == {"step": 0, "train/loss": 5.0}
  assert records[1]["step"] == 10 and math.isnan(records[1]["train/loss"])
  assert records[1]["act/layer_001"] == 2.0
  w.write(20, {"x": 1.0})  # after close: a no-op, not a crash
  assert len(writers.read_metrics(str(tmp_path / "metrics.jsonl"))) == 2


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
  records = writers.read_metrics(str(tmp_path / "metrics.jsonl"))
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
  assert [r["step"] for r in writers.read_metrics(str(tmp_path / "new" / "metrics.jsonl"))] == [6]


def test_disabled_writer_writes_nothing(tmp_path):
  workdir = tmp_path / "run"
  w = writers.MetricWriter(str(workdir), enabled=False, truncate_after=0)
  w.write(0, {"loss": 1.0})
  w.flush()
  w.close()
  assert not workdir.exists()


def test_tensorboard_event_file(tmp_path):
  w = writers.MetricWriter(str(tmp_path))
  w.write(3, {"loss": 1.5, "rms": np.array([1.0, 2.0])})
  w.flush()
  events = [f for f in os.listdir(tmp_path / "tb") if f.startswith("events.out.tfevents")]
  assert len(events) == 1
  # tensorboardX writes from a queue on a thread: only close() waits for it to drain.
  w.close()
  data = (tmp_path / "tb" / events[0]).read_bytes()
  assert b"loss" in data and b"rms/layer_001" in data
