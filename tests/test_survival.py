"""Escape as an event in time (resnorm_jax/analysis/survival.py): passages, relapses, exact
binomial intervals, Kaplan-Meier with Greenwood's interval, the late slope's standard error,
and a cell read from run folders. No JAX."""

import math
import os

import numpy as np
import pytest

from conftest import write_run_folder
from resnorm_jax.analysis import stats, style, survival, survival_figure


def test_passages_first_relapse_fraction_and_escape():
  evals = [(25, 3.3), (50, 3.19), (75, 3.25), (100, 3.1), (125, 3.0)]
  p = survival.passages(evals, baseline=3.3, margin=0.1)
  assert p["first_passage"] == 50
  assert p["relapse_steps"] == [75]
  assert p["fraction_below"] == pytest.approx(3 / 5)
  assert p["escape_step"] == 100  # below from 100 to the end


def test_passages_never_below_and_nonfinite_is_above():
  p = survival.passages([(25, 3.25), (50, float("nan")), (75, 3.21)], baseline=3.3)
  assert p["first_passage"] is None and p["escape_step"] is None and p["relapse_steps"] == []
  assert p["fraction_below"] == 0
  q = survival.passages([(25, 3.1), (50, float("nan")), (75, 3.1)], baseline=3.3)
  assert q["relapse_steps"] == [50] and q["escape_step"] == 75


def test_margin_moves_the_passage():
  evals = [(25, 3.24), (50, 3.19), (75, 3.05)]
  assert survival.passages(evals, 3.3, 0.05)["first_passage"] == 25
  assert survival.passages(evals, 3.3, 0.1)["first_passage"] == 50
  assert survival.passages(evals, 3.3, 0.2)["first_passage"] == 75


@pytest.mark.parametrize(
  "k,n,lo,hi",
  [
    (1, 3, 0.008403, 0.905700),  # the "1 of 3" of the issue: 0.008-0.91
    (0, 12, 0.0, 1 - 0.025 ** (1 / 12)),  # closed form at k = 0
    (12, 12, 0.025 ** (1 / 12), 1.0),
    (6, 12, 0.210945, 0.789055),
  ],
)
def test_clopper_pearson_known_values(k, n, lo, hi):
  got = stats.clopper_pearson(k, n)
  assert got == pytest.approx((lo, hi), abs=2e-5)


def test_clopper_pearson_tails_are_exact():
  lo, hi = stats.clopper_pearson(4, 15)
  # P(X >= 4 | lo) = 0.025 and P(X <= 4 | hi) = 0.025
  assert 1 - stats._binom_cdf(3, 15, lo) == pytest.approx(0.025, abs=1e-9)
  assert stats._binom_cdf(4, 15, hi) == pytest.approx(0.025, abs=1e-9)
  with pytest.raises(ValueError, match="k=5, n=3"):
    stats.clopper_pearson(5, 3)


def test_kaplan_meier_by_hand():
  km = stats.kaplan_meier([100, 200, 200, 300, 400], [True, True, False, False, True])
  assert [r["step"] for r in km] == [100, 200, 400]
  assert [r["at_risk"] for r in km] == [5, 4, 1]
  assert [r["survival"] for r in km] == pytest.approx([0.8, 0.6, 0.0])
  # Greenwood at the first event: 1 / (5 * 4); log(-log) interval around 0.8
  v = 1 / 20
  half = 1.959964 * math.sqrt(v) / abs(math.log(0.8))
  assert km[0]["lo"] == pytest.approx(0.8 ** math.exp(half), rel=1e-5)
  assert km[0]["hi"] == pytest.approx(0.8 ** math.exp(-half), rel=1e-5)
  assert km[0]["lo"] < 0.8 < km[0]["hi"]
  assert stats.survival_at(km, 250)["survival"] == pytest.approx(0.6)
  assert stats.survival_at(km, 50)["survival"] == 1.0


def test_kaplan_meier_without_censoring_is_the_empirical_fraction():
  times = [50, 75, 75, 1500, 1500]
  km = stats.kaplan_meier(times, [True, True, True, False, False])
  assert stats.survival_at(km, 1500)["survival"] == pytest.approx(2 / 5)


def test_slope_and_standard_error_match_numpy():
  rng = np.random.default_rng(0)
  xs = np.linspace(0.75, 1.5, 31)
  ys = 3.3 - 0.02 * xs + rng.normal(0, 0.01, xs.size)
  slope, se = stats.slope_with_se(list(xs), list(ys))
  coef, cov = np.polyfit(xs, ys, 1, cov=True)
  assert slope == pytest.approx(coef[0])
  assert se == pytest.approx(math.sqrt(cov[0, 0]))
  assert stats.slope_with_se([1, 2], [1, 2]) is None
  assert stats.trend(-0.03, 0.01) == "falling"
  assert stats.trend(0.015, 0.01) == "flat"
  assert stats.trend(0.05, 0.01) == "rising"


def _fake_run(root, name, seed, losses, base=3.3, steps=1500, every=25):
  d = os.path.join(root, name)
  config = {
    "name": "postnorm_96L",
    "seed": seed,
    "model": {"num_layers": 12},
    "opt": {"lr": 5e-4},
    "train": {"eval_every": every, "eval_batches": 4, "batch_size": 16, "seq_len": 128},
  }
  summary = {
    "status": "completed",
    "steps": steps,
    "final_eval_loss": losses[-1],
    "heldout_unigram_entropy": base - 0.06,
    "periodic_eval_no_context_loss": base,
  }
  point = {"config": "configs/postnorm_96L.py", "overrides": {"opt.lr": 5e-4, "seed": seed}}
  rows = [{"step": (i + 1) * every, "train/loss": v, "eval/loss": v} for i, v in enumerate(losses)]
  write_run_folder(d, rows, config=config, summary=summary, sweep_point=point)


def test_cell_from_run_folders(tmp_path):
  n = 60  # 60 evals of 25 steps: 1,500 steps
  plateau = [3.29] * n
  escaped = [3.29] * 19 + [3.1] * (n - 19)  # first below at step 500
  relapsed = [3.29] * 9 + [3.15] + [3.29] * 10 + [3.0] * (n - 20)
  for seed, curve in enumerate([plateau, escaped, relapsed, plateau]):
    _fake_run(tmp_path, f"postnorm-L12-lr0.0005-s{seed}", seed, curve)
  rows = survival.finished_runs(str(tmp_path))
  assert [r["first_passage"] for r in rows] == [None, 500, 250, None]
  assert [r["relapses"] for r in rows] == [0, 0, 1, 0]
  assert rows[0]["eval_tokens"] == 4 * 16 * 128
  assert rows[0]["late_trend"] == "flat"
  (cell,) = survival.cells(rows, horizon=1500)
  assert (cell["escaped"], cell["seeds"]) == (2, 4)
  assert (cell["ci_lo"], cell["ci_hi"]) == pytest.approx(stats.clopper_pearson(2, 4), abs=1e-4)
  assert cell["escaped_for_good"] == 2 and cell["relapsed_runs"] == 1
  assert cell["km_escape_by_longest"] == pytest.approx(0.5)
  assert cell["never_flat"] == 2
  out = survival_figure.plot_survival(str(tmp_path), rows, str(tmp_path / "s.png"))
  assert os.path.getsize(out) > 10_000


def test_survival_figure_draws_kept_and_fell_back_escapes_apart(tmp_path):
  n = 60
  kept = [3.29] * 19 + [3.1] * (n - 19)  # below from step 500 to the end
  fell_back = [3.29] * 9 + [3.1] * 20 + [3.29] * (n - 29)  # below at 250, above from 750
  for seed, curve in enumerate([kept, fell_back]):
    _fake_run(tmp_path, f"postnorm-L12-lr0.0005-s{seed}", seed, curve)
  rows = survival.finished_runs(str(tmp_path))
  assert [survival_figure.fate(r) for r in rows] == ["kept", "fell back"]
  fig = survival_figure.draw_survival(str(tmp_path), rows)
  top = fig.axes[0]
  curves = [line for line in top.get_lines() if len(line.get_xdata()) == n]
  styles = {(line.get_linestyle(), line.get_color()) for line in curves}
  red, black = style.variant_color("postnorm"), survival_figure.FATE_STYLES["fell back"]["color"]
  assert styles == {("-", red), ("-.", black)}
  # The legend names the fates plotted and no other ("never escaped" is not plotted here).
  texts = [t.get_text() for t in fig.legends[0].get_texts()]
  assert any(survival_figure.FATE_LABELS["kept"] in t for t in texts)
  assert any(survival_figure.FATE_LABELS["fell back"] in t for t in texts)
  assert not any(survival_figure.FATE_LABELS["never"] in t for t in texts)
  # Below: the first-passage curve reaches 0 (both passed), the kept-escape curve 0.5.
  bottom = fig.axes[1]
  kept_curve = [line for line in bottom.get_lines() if line.get_linestyle() == "--"]
  assert kept_curve[0].get_ydata()[-1] == pytest.approx(0.5)
  assert "kept to the end 1" in bottom.get_title()
  style.pyplot().close(fig)


def test_a_cell_is_named_by_its_point_names_variant_part_where_the_config_names_less():
  """The stabilizer grid runs configs/postnorm_96L.py with softcap, gates, ...: its cells are
  postnorm-softcap, postnorm-attngate, not one 'postnorm' cell of every stabilizer."""
  assert survival.cell_variant("postnorm-softcap-L12-lr0.001-s0", "postnorm") == "postnorm-softcap"
  assert survival.cell_variant("deepnorm-L24-lr0.004-s11", "deepnorm") == "deepnorm"
  assert survival.cell_variant("my-run", "postnorm") == "postnorm"  # not a point name


def test_a_baseline_cell_from_another_folder_joins_the_tables_and_the_figure(tmp_path):
  n = 60
  ours, theirs = tmp_path / "ours", tmp_path / "theirs"
  ours.mkdir(), theirs.mkdir()
  _fake_run(ours, "postnorm-attngate-L12-lr0.0005-s0", 0, [3.29] * 19 + [3.1] * (n - 19))
  _fake_run(theirs, "postnorm-L12-lr0.0005-s0", 0, [3.29] * n)
  _fake_run(theirs, "postnorm-L12-lr0.0005-s1", 1, [3.29] * n)
  _fake_run(theirs, "prenorm-L12-lr0.0005-s0", 0, [3.29] * n)  # the pattern leaves it out
  extra = survival.finished_runs(str(theirs), r"^postnorm-L12-lr0\.0005-s")
  assert [r["name"] for r in extra] == ["postnorm-L12-lr0.0005-s0", "postnorm-L12-lr0.0005-s1"]
  rows = sorted(survival.finished_runs(str(ours)) + extra, key=survival.cell_key_and_seed)
  assert [(c["variant"], c["seeds"]) for c in survival.cells(rows, horizon=1500)] == [
    ("postnorm", 2),
    ("postnorm-attngate", 1),
  ]
  # each curve is read from its own folder, not from the first folder's
  fig = survival_figure.draw_survival(str(ours), rows)
  assert len([a for a in fig.axes if a.get_title()]) >= 4


def test_compare_kept_tests_each_cell_against_the_baseline_of_its_depth_and_lr():
  cells = [
    {"variant": "postnorm", "num_layers": 12, "lr": "1e-3", "seeds": 12, "escaped_for_good": 0},
    {"variant": "postnorm-x", "num_layers": 12, "lr": "1e-3", "seeds": 4, "escaped_for_good": 4},
    {"variant": "postnorm-x", "num_layers": 12, "lr": "2e-3", "seeds": 4, "escaped_for_good": 4},
  ]
  survival.compare_kept(cells, {"postnorm"})
  assert "kept_p_vs_baseline" not in cells[0]
  assert cells[1]["kept_p_vs_baseline"] == pytest.approx(1 / 1820, abs=1e-4)
  assert cells[2]["kept_p_vs_baseline"] is None  # no baseline cell at 2e-3


def test_a_cell_title_names_its_base_and_stabilizer_whatever_the_base():
  cell_title = survival_figure.cell_title
  assert cell_title("postnorm", 12, 1e-3) == "Post-LN, 12 layers, lr 1e-3"
  assert (
    cell_title("postnorm-attngate", 12, 1e-3) == "Post-LN + gated attention, 12 layers, lr 1e-3"
  )
  assert cell_title("deepnorm-attngate", 24, 4e-3) == (
    "DeepNorm + gated attention, 24 layers, lr 4e-3"
  )
