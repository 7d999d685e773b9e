"""Early warning from a run's first steps (resnorm_jax/analysis/early_warning.py): the AUC, the
features, the logistic fit, and cross-validation that never trains on the held-out cell."""

import json
import math

import numpy as np
import pytest

from resnorm_jax.analysis import early_warning as ew
from resnorm_jax.runs import stop_features


def test_auc_is_the_mann_whitney_statistic():
  assert ew.auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
  assert ew.auc([1, 1], [0, 1]) == 0.5  # a tie counts half
  assert math.isnan(ew.auc([1, 2], [1, 1]))


def test_features_read_the_logged_signals_up_to_k(tmp_path):
  rows = [
    {"step": s, "train/loss": 3.3 - 0.001 * s, "grad_norm": 1.0 + 0.01 * s, "update_norm": 0.1,
     "param_norm": 85.0}
    for s in range(10, 210, 10)
  ]  # fmt: skip
  (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
  got = ew.read_metrics(str(tmp_path))
  f = stop_features.features(got, 100, entropy=3.25)
  # the loss as a gap to the corpus's no-context loss: mean of steps 80, 90, 100
  assert f["train/loss:level"] == pytest.approx(3.3 - 0.09 - 3.25)
  assert f["train/loss:slope"] == pytest.approx(-1.0)  # per 1,000 steps, over steps 50-100
  assert f["grad_norm:ratio"] == pytest.approx(math.log(1.9 / 1.1))
  assert math.isnan(f["attn_logit_max:level"])  # not logged by this run
  assert stop_features.features(got, 400, entropy=3.25) is None  # the run ended at step 200


def test_logistic_fit_matches_a_separable_direction():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 2))
  y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=200) > 0).astype(int)
  w = ew.fit_logistic(x, y, l2=0.1)
  assert w[0] > 0 > w[1] and abs(w[0] / w[1] + 2) < 0.6  # the direction of (1, -0.5)
  assert ew.auc(ew.Standardised(x, y).score(x), y) > 0.95


def test_grouped_scores_never_train_on_the_held_out_cell():
  """A model that memorises its training cells' labels scores a held-out cell with nothing
  it learned from that cell: with labels set by cell, held-out scores carry no signal."""

  class Memory:
    def __init__(self, x, y):
      self.seen = {float(v): int(lab) for v, lab in zip(x[:, 0], y, strict=True)}

    def score(self, x):
      return np.asarray([self.seen.get(float(v), -1) for v in x[:, 0]], float)

  x = np.arange(12, dtype=float)[:, None]
  groups = [f"cell{i // 3}" for i in range(12)]
  y = np.asarray([1 if i // 3 in (0, 2) else 0 for i in range(12)])
  scores = ew.grouped_scores(x, y, groups, Memory)
  assert np.all(scores == -1)  # every run's own cell was held out when it was scored


def test_one_signal_chooses_its_feature_and_direction_on_training_runs():
  x = np.asarray([[5.0, 0.1], [4.0, 0.9], [1.0, 0.2], [0.5, 0.8]])
  y = np.asarray([0, 0, 1, 1])  # the first feature, reversed, separates them
  m = ew.OneSignal(x, y)
  assert m.column == 0 and m.sign == -1.0
  assert ew.auc(m.score(x), y) == 1.0


def test_within_cell_auc_and_the_plateau_filter():
  scores = np.asarray([0.1, 0.9, 0.2, 0.8, 0.5])
  y = np.asarray([0, 1, 1, 0, 1])
  groups = ["a", "a", "b", "b", "c"]
  assert ew.within_cell_auc(scores, y, groups) == pytest.approx(0.5)  # a: 1, b: 0, c: none
  runs = [{"escape_at": None}, {"escape_at": 50}, {"escape_at": 300}]
  assert ew.still_on_plateau(runs, 100) == [runs[0], runs[2]]


def _run(label: int, slope: float, group: str) -> dict:
  rows = [
    {"step": s, "train/loss": 3.3 + slope * s / 1000, "grad_norm": 1.0, "update_norm": 0.1,
     "param_norm": 85.0 + s / 100}
    for s in range(10, 210, 10)
  ]  # fmt: skip
  return {"label": label, "group": group, "rows": rows,
          "features": {100: stop_features.features(rows, 100, entropy=3.25)}}  # fmt: skip


def test_a_stop_rule_is_data_that_scores_a_run_as_the_fitted_model_does(tmp_path):
  runs = [_run(1, -1.0 - 0.1 * i, f"a{i}") for i in range(6)]
  runs += [_run(0, 0.01 * i, f"b{i}") for i in range(6)]
  rule = ew.fit_rule(runs, 100, {"fitted_by": "test"})
  path = tmp_path / "rule.json"
  path.write_text(json.dumps(rule))
  loaded = stop_features.load_rule(str(path))
  assert loaded["provenance"]["runs"] == 12 and loaded["provenance"]["escaped"] == 6
  stops = [stop_features.rule_says_stop(loaded, r["rows"], 3.25) for r in runs]
  # no run that escaped is stopped (the threshold's rule); the flat ones score below them
  assert not any(stop for (stop, _), r in zip(stops, runs, strict=True) if r["label"] == 1)
  assert all(stop for (stop, _), r in zip(stops, runs, strict=True) if r["label"] == 0)
  early = stop_features.rule_says_stop(loaded, runs[0]["rows"][:5], 3.25)
  assert early is None  # not yet at step 100
  (tmp_path / "bad.json").write_text('{"k": 100}')
  with pytest.raises(ValueError, match="not a stop rule of version 1"):
    stop_features.load_rule(str(tmp_path / "bad.json"))


def test_the_within_cell_interval_is_a_seeded_bootstrap_over_seeds_in_each_cell():
  rng = np.random.default_rng(1)
  groups = [f"cell{i // 12}" for i in range(36)]
  y = np.asarray([i % 3 == 0 for i in range(36)], int)
  scores = y + rng.normal(scale=0.8, size=36)
  lo, hi = ew.within_cell_bootstrap(scores, y, groups, replicates=300)
  assert lo < ew.within_cell_auc(scores, y, groups) < hi
  assert (lo, hi) == ew.within_cell_bootstrap(scores, y, groups, replicates=300)  # seeded
  assert all(math.isnan(v) for v in ew.within_cell_bootstrap(scores, np.ones(36, int), groups))


def test_the_figure_draws_the_numbers_the_readme_quotes_with_their_intervals():
  """auc_vs_k.png's top row: the Results row's AUCs, each written beside its point, each point
  with a 95% interval from results.csv's bounds; the quoted stop written in the grid's panel."""
  import csv
  import os

  from resnorm_jax.analysis import early_warning_figure as figure
  from resnorm_jax.analysis.claims import early_warning as claim
  from resnorm_jax.analysis.style import pyplot

  root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
  tables = {}
  for name in ("results", "savings"):
    with open(os.path.join(root, "early_warning", f"{name}.csv"), newline="") as f:
      tables[name] = list(csv.DictReader(f))
  rows = tables["results"]
  assert {"auc_lo", "auc_hi", "within_cell_auc_lo", "within_cell_auc_hi"} <= set(rows[0])
  fig = figure.draw(rows, tables["savings"])
  quoted = claim.row_early_warning().result
  for ax, (key, name, column) in zip(fig.axes, claim.QUOTED, strict=False):
    pts = figure.points(rows, key, claim.QUOTED_PREDICTOR, column)
    assert pts and all(lo <= v <= hi for _, v, lo, hi in pts), (name, pts)
    values = [f"{v:.2f}" for _, v, _, _ in pts]
    assert [t.get_text() for t in ax.texts if t.get_text()[:2] == "0."] == values
    assert f"{name} {'/'.join(values)}" in quoted  # the README's numbers, drawn
    assert len(ax.collections) >= 1  # the interval bars
  stop = claim.quoted_stop(tables["savings"])
  grid = fig.axes[[n for _, n, _ in claim.QUOTED].index("grid")]
  assert any(f"stop at k = {stop['k']}" in t.get_text() for t in grid.texts)
  pyplot().close(fig)
