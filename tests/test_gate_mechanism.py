"""The gate's mechanism table and figure (resnorm_jax/analysis/gate_mechanism.py) from fake
run folders: per-layer lists reduced as declared, the first passage from the eval curve."""

import csv

from conftest import write_run_folder
from resnorm_jax.analysis import gate_mechanism


def _run(root, name, escape_at=None, gate=False):
  rows = []
  for step in range(1, 301):
    row = {"step": step, "train/loss": 3.3, "attn_branch_rms": [1.0, 3.0],
           "stream_max": [2.0, float(step)], "grad_norm_layer": [0.5, 2.0],
           "update_ratio_layer": [1e-3, 3e-3], "attn_entropy": [3.0, 3.5],
           "attn_sink_mass": [0.1, 0.3], "attn_norm_in_rms": [1.0, 1.0]}  # fmt: skip
    if gate:
      row |= {"attn_gate_mean": [0.4, 0.6], "attn_gate_std": [0.1, 0.3]}
    if step % 25 == 0:
      row["eval/loss"] = 2.5 if escape_at and step >= escape_at else 3.3
    rows.append(row)
  summary = {"status": "completed", "steps": 300, "periodic_eval_no_context_loss": 3.3}
  return write_run_folder(root / name, rows, summary=summary, config={"seed": 0})


def test_table_reduces_layers_and_finds_the_first_passage(tmp_path):
  _run(tmp_path, "postnorm-L12-lr0.001-s0")
  _run(tmp_path, "postnorm-attngate-L12-lr0.001-s1", escape_at=50, gate=True)
  (tmp_path / "not-a-point").mkdir()
  runs = gate_mechanism.collect(str(tmp_path))
  assert [(r["arm"], r["seed"]) for r in runs] == [("postnorm", 0), ("postnorm-attngate", 1)]
  assert [gate_mechanism.escape_step(r) for r in runs] == [None, 50]
  rows = gate_mechanism.table(runs)
  first = next(r for r in rows if r["arm"] == "postnorm" and r["step"] == 100)
  assert first["attn_branch_rms"] == "2" and first["stream_max"] == "100"
  assert first["grad_norm_layer"] == "0.25" and first["attn_gate_mean"] == ""
  gated = next(r for r in rows if r["arm"] == "postnorm-attngate" and r["step"] == 100)
  assert (gated["attn_gate_mean"], gated["attn_gate_std"]) == ("0.5", "0.2")
  out = gate_mechanism.write_table(str(tmp_path / "m.csv"), rows)
  with open(out) as f:
    assert len(list(csv.DictReader(f))) == 2 * len(gate_mechanism.TABLE_STEPS)
  png = gate_mechanism.plot(runs, str(tmp_path / "m.png"))
  assert (tmp_path / "m.png").stat().st_size > 10_000 and png.endswith("m.png")
