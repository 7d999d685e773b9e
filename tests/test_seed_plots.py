"""Figures over seeds (resnorm_jax/runs/curves.py: run_record; seed_plots.py:
plot_seed_bands, plot_seed_lines; scripts/plot_curves.py --seeds): the periodic eval is told
from the end-of-run eval, runs that differ only in their seed are one arm, every run gets its
variant's colour."""

import os
import subprocess
import sys

import pytest

from conftest import write_run_folder
from resnorm_jax.analysis import seed_plots
from resnorm_jax.runs import curves as run_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(
  folder,
  *,
  variant="postnorm",
  layers=12,
  seed=0,
  warmup=0,
  final=3.3,
  evals=(),
  final_key="eval/final_loss",
  data=None,
):
  """A run folder: sweep_point.json, config.json, summary.json, metrics.jsonl."""
  os.makedirs(folder)
  steps = 100
  config = {
    "name": variant,
    "seed": seed,
    "model": {"num_layers": layers},
    "resolved_model": {"num_layers": layers},
    "opt": {"lr": 1e-3, "warmup_steps": warmup},
    "data": data or {"source": "stdlib"},
  }
  summary = {
    "status": "completed",
    "steps": steps,
    "final_eval_loss": final,
    "heldout_unigram_entropy": 3.2,
    "unigram_entropy": 3.25,
    "escape_step": 50 if final < 3.1 else None,
    "diverged_step": None,
  }
  rows = [{"step": s, "train/loss": 3.5 - s / 1000} for s in range(10, steps + 1, 10)]
  for step, loss in evals:
    rows[step // 10 - 1]["eval/loss"] = loss
  rows[-1][final_key] = final
  point = {"config": f"configs/{variant}_96L.py", "name": os.path.basename(folder)}
  return write_run_folder(folder, rows, config=config, summary=summary, sweep_point=point)


def test_run_record_tells_the_end_of_run_eval_from_the_periodic_one(tmp_path):
  # Newer loops: the end-of-run eval is eval/final_loss; the periodic eval at the last step
  # is kept.
  new = run_records.run_record(
    _run(tmp_path / "a-s1", seed=1, final=2.9, evals=[(50, 3.0), (100, 2.95)])
  )
  assert new["eval"] == ([50, 100], [3.0, 2.95]) and new["final"] == (100, 2.9)
  assert (new["variant"], new["num_layers"], new["seed"], new["corpus"]) == (
    "postnorm",
    12,
    1,
    "stdlib",
  )
  assert new["baseline"] == 3.2 and new["escape_step"] == 50 and new["steps"] == 100
  # Older loops logged the end-of-run eval as the last eval/loss: not a periodic point.
  old = run_records.run_record(
    _run(
      tmp_path / "b",
      final=3.25,
      evals=[(50, 3.3), (100, 3.25)],
      final_key="unused",
      data={"source": "text", "path": "data/tinyshakespeare.txt"},
    )
  )
  assert old["eval"] == ([50], [3.3]) and old["final"] == (100, 3.25)
  assert old["corpus"] == "tiny Shakespeare"


def test_a_committed_run_of_each_loop():
  xiong = run_records.run_record(
    os.path.join(ROOT, "docs/xiong_rescue/runs/stdlib-L12-constant-lr0.001-w0-s0")
  )
  assert xiong["variant"] == "postnorm"  # configs/xiong_rescue.py, drawn as Post-LN
  assert xiong["eval"][0] == [250, 500, 750, 1000, 1250] and xiong["final"][0] == 1500
  deepnet = run_records.run_record(
    os.path.join(ROOT, "docs/deepnet_panel/runs_seed1/postnorm-L18-invsqrt-w200")
  )
  assert deepnet["eval"][0][-1] == 1000 and deepnet["seed"] == 1
  assert abs(deepnet["final"][1] - deepnet["eval"][1][-1]) > 0.01


@pytest.mark.slow  # runs scripts/plot_curves.py
def test_seed_figures_and_their_command_line(tmp_path):
  runs = [
    _run(
      tmp_path / f"postnorm-L12-w{w}-s{s}",
      seed=s,
      warmup=w,
      final=f,
      evals=[(50, f + 0.1), (100, f + 0.05)],
    )
    for w, f in ((0, 3.25), (100, 2.5))
    for s in (0, 1, 2)
  ]
  runs.append(
    _run(
      tmp_path / "prenorm-L24-s0",
      variant="prenorm",
      layers=24,
      final=2.4,
      evals=[(50, 2.6), (100, 2.5)],
    )
  )
  band = seed_plots.plot_seed_bands(runs[:6], str(tmp_path / "band.png"))
  lines = seed_plots.plot_seed_lines(runs, str(tmp_path / "lines.png"), panels="layers")
  assert os.path.getsize(band) > 1000 and os.path.getsize(lines) > 1000
  arm = [run_records.run_record(r) for r in runs[3:6]]
  assert seed_plots._arm_label(arm) == (
    "Post-LN, lr 1e-3, 100 warmup steps: escaped at step 50 on 3 of 3 seeds"
  )
  assert "never escaped in 100 steps (seeds 0, 1, 2)" in seed_plots._arm_label(
    [run_records.run_record(r) for r in runs[:3]]
  )
  with pytest.raises(ValueError, match="panels"):
    seed_plots.plot_seed_lines(runs, str(tmp_path / "x.png"), panels="width")
  cli = subprocess.run(
    [
      sys.executable,
      "scripts/plot_curves.py",
      "--seeds=band",
      str(tmp_path / "postnorm-*"),
      f"--out={tmp_path / 'cli.png'}",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert cli.returncode == 0 and os.path.getsize(tmp_path / "cli.png") > 1000, cli.stderr
  refused = subprocess.run(
    [sys.executable, "scripts/plot_curves.py", "--panels=corpus", str(tmp_path / "postnorm-*")],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert refused.returncode != 0 and "--seeds" in refused.stderr + refused.stdout
