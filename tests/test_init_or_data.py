"""The init-or-data factorial's analysis (resnorm_jax/analysis/init_or_data.py): shares of
variance, permutation tests and within-cell AUCs that would catch a wrong formula, on planted
outcomes."""

import math
import os
import subprocess
import sys

import numpy as np

from conftest import ROOT, write_run_folder
from resnorm_jax.analysis import init_or_data as iod


def test_a_factor_that_sets_the_fate_takes_the_whole_variance_and_a_small_p():
  y = np.array([[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], float)  # init decides
  share = iod.anova(y)
  assert share["init"] == 1.0 and share["data"] == 0.0 and abs(share["residual"]) < 1e-12
  p_init = iod.permutation_p(y, 0, draws=4000)
  # The columns all put their two 1s in the same rows: (1/6)^3 of the within-column shuffles.
  assert abs(p_init - (1 / 6) ** 3) < 0.004
  assert iod.permutation_p(y, 1, draws=2000) == 1.0  # the data seed: nothing to explain
  assert iod.anova(y.T)["data"] == 1.0


def test_a_checkerboard_is_all_interaction():
  y = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]], float)
  share = iod.anova(y)
  assert share["init"] == 0.0 and share["data"] == 0.0 and math.isclose(share["residual"], 1.0)
  assert math.isnan(iod.anova(np.ones((4, 4)))["init"])


def test_loo_auc_reads_a_score_that_separates_and_not_one_that_does_not():
  labels = [0] * 8 + [1] * 8
  assert iod.loo_auc(list(range(16)), labels) == 1.0
  assert iod.loo_auc(list(range(16))[::-1], labels) == 1.0  # a falling score: its direction
  rng = np.random.default_rng(0)
  assert iod.loo_auc(rng.normal(size=16), [0, 1] * 8) < 0.8
  assert math.isnan(iod.loo_auc(list(range(16)), [1] * 16))


def test_deviance_falls_with_the_factor_that_decides():
  runs = [{"init": i, "data": d, "kept": int(i % 2 == 0)} for i in range(4) for d in range(4)]
  dev = iod.logistic_deviance(runs, [0, 1, 2, 3], [0, 1, 2, 3])
  assert dev["init_beside_data"] > 10 * max(dev["data_beside_init"], 1e-6)
  assert dev["both"] < dev["null"]


def test_the_page_from_a_planted_factorial(tmp_path):
  for i in range(4):
    for d in range(4):
      kept = i in (0, 2)
      rows = [{"step": s, "train/loss": 3.0, "grad_norm": 1.0, "update_norm": 0.1,
               "param_norm": 80.0, **({"eval/loss": 2.0 if kept and s >= 50 else 3.3}
                                      if s % 25 == 0 else {})}
              for s in range(10, 1501, 5)]  # fmt: skip
      write_run_folder(
        tmp_path / "runs" / f"postnorm-L12-lr0.0007-i{i}-d{d}",
        rows,
        summary={
          "status": "completed",
          "steps": 1500,
          "escape_step": 50 if kept else None,
          "final_eval_loss": 2.0 if kept else 3.3,
          "unigram_entropy": 3.3,
          "periodic_eval_no_context_loss": 3.3,
        },  # fmt: skip
      )
  out = tmp_path / "out"
  proc = subprocess.run(
    [sys.executable, "scripts/init_or_data.py", f"--runs={tmp_path / 'runs'}",
     f"--init_scores={tmp_path / 'none.csv'}", f"--out_dir={out}"],
    cwd=ROOT, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  text = (out / "init_or_data.md").read_text()
  assert "**The initialization decides.**" in text
  assert "the init seed explains 1.00" in text and "kept (50)" in text
  assert os.path.isfile(out / "init_or_data_predictors.csv")


def test_the_auc_interval_is_hanley_mcneils():
  # Hanley and McNeil 1982's worked case: AUC 0.8 with 10 of each class, SE ~0.1000
  lo, hi = iod.auc_interval(0.8, 10, 10)
  q1, q2 = 0.8 / 1.2, 2 * 0.64 / 1.8
  se = math.sqrt((0.8 * 0.2 + 9 * (q1 - 0.64) + 9 * (q2 - 0.64)) / 100)
  assert math.isclose(lo, 0.8 - 1.96 * se) and math.isclose(hi, min(1.0, 0.8 + 1.96 * se))
  assert 0.09 < se < 0.11
  assert iod.auc_interval(0.99, 3, 3)[1] == 1.0  # clipped
  assert all(math.isnan(x) for x in iod.auc_interval(math.nan, 5, 5))


def test_the_best_of_several_scores_pays_for_being_picked():
  rng = np.random.default_rng(1)
  labels = [1] * 7 + [0] * 9
  perfect = [float(y) + 0.01 * i for i, y in enumerate(labels)]
  assert iod.best_of_p([perfect], labels, draws=200) < 0.02
  noise = [rng.normal(size=16).tolist() for _ in range(6)]
  p = iod.best_of_p(noise, labels, draws=200)
  assert p > 0.05  # the best of 6 noise scores is what chance gives


def test_seed_odds_count_each_seeds_runs():
  runs = [{"init": i, "data": d, "kept": int(i == 2 or (i, d) == (0, 3))}
          for i in range(4) for d in range(4)]  # fmt: skip
  assert iod.seed_odds(runs, "init") == [(0, 1, 4), (1, 0, 4), (2, 4, 4), (3, 0, 4)]
  assert iod.seed_odds(runs, "data")[3] == (3, 2, 4)
