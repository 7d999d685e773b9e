"""The mechanism table and figure (resnorm_jax/analysis/mechanism.py) from fake run folders: the
quantities are read from the right per-layer records, the lower-over-higher gradient ratio is
the first layers' mean over the last layers', and the figure draws every run."""

import os

import pytest

from conftest import write_run_folder
from resnorm_jax.analysis import mechanism


def _run(root, variant, grads, rms, steps=(5, 10, 20, 40)):
  run = os.path.join(root, f"{variant}-L4-lr0.001-s0")
  point = {"config": f"configs/{variant}_96L.py", "index": 0, "overrides": {"opt.lr": 1e-3}}
  config = {"seed": 0, "model": {"num_layers": 4}, "resolved_model": {"num_layers": 4}}
  config["opt"] = {"lr": 1e-3}
  summary = {"status": "completed", "steps": steps[-1], "final_eval_loss": 3.0}
  summary["heldout_unigram_entropy"] = 3.2
  records = [{"step": 5, "train/loss": 4.0, "update_norm": 0.3}]  # no per-layer record
  records += [
    {
      "step": s,
      "train/loss": 3.5,
      "update_norm": 0.1 * s,
      "grad_norm_layer": grads,
      "ffn_norm_in_rms": rms,
      "eval/loss": 3.3,
    }
    for s in steps
  ]
  return write_run_folder(run, records, sweep_point=point, config=config, summary=summary)


def test_the_lower_layers_gradient_over_the_higher():
  assert mechanism.low_over_high([1, 2, 3, 10, 20, 30, 40, 50], low=3) == (2.0, 40.0)
  assert mechanism.low_over_high([1.0, 4.0], low=3) == (1.0, 4.0)  # at most half each


def test_profile_steps_spread_over_the_run_on_a_log_scale():
  steps = list(range(5, 505, 5))
  chosen = mechanism.profile_steps(steps, 4)
  assert chosen[0] == 5 and chosen[-1] == 500 and len(chosen) == 4
  assert 20 <= chosen[1] <= 30 and 100 <= chosen[2] <= 120
  assert mechanism.profile_steps([5, 10], 4) == [5, 10]


def test_table_and_figure_from_run_folders(tmp_path):
  post = _run(tmp_path, "postnorm", [1e-4, 1e-4, 1e-2, 1e-2], [1.0, 2.0, 3.0, 4.0])
  _run(tmp_path, "prenorm", [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])
  runs = mechanism.finished_runs(str(tmp_path))
  assert [os.path.basename(r).split("-")[0] for r in runs] == ["postnorm", "prenorm"]
  rows = mechanism.table_rows(post)
  assert [r["step"] for r in rows] == [5, 10, 20, 40]  # only the records with per-layer stats
  first = rows[0]
  assert first["variant"] == "postnorm" and first["num_layers"] == 4
  assert first["grad_low_over_high"] == pytest.approx(0.01)
  assert (first["norm_in_rms_first"], first["norm_in_rms_mid"], first["norm_in_rms_last"]) == (
    1.0,
    3.0,
    4.0,
  )
  assert rows[-1]["update_norm"] == pytest.approx(4.0)
  out = mechanism.plot(runs, str(tmp_path / "m.png"))
  assert os.path.getsize(out) > 10_000
  csv_path = mechanism.write_csv(str(tmp_path / "m.csv"), rows)
  assert open(csv_path).readline().strip() == ",".join(mechanism.COLUMNS)
