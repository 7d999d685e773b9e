"""The depth-transfer analysis (resnorm_jax/analysis/depth_transfer.py): best lr from a parabola in
log2 lr, its slope against depth, and the base depth's sp runs standing for every
parametrization. No JAX, no run folders: synthetic curves with a known answer."""

import math

import pytest

from resnorm_jax.analysis import depth_contrast as dc
from resnorm_jax.analysis import depth_transfer as dt

LRS = [2.5e-4 * 2**k for k in range(7)]


def _curve(best_lr: float, lrs=LRS, curvature: float = 0.05, skew: float = 0.0):
  """Seed-mean points of a loss a (log2 lr - log2 best)^2 (+ skew x cube) + 1.7."""
  pts = []
  for lr in lrs:
    u = math.log2(lr / best_lr)
    pts.append({"lr": lr, "mean": 1.7 + curvature * u**2 + skew * u**3})
  return pts


@pytest.mark.parametrize("best", [1e-3, 3e-3, 5.5e-3])
def test_both_fits_find_the_vertex_of_a_parabola(best):
  for neighbours in dt.FITS.values():
    lr, se = dt.fit_best_lr(_curve(best), neighbours)
    assert lr == pytest.approx(best, rel=1e-6) and se >= 0


def test_a_lowest_point_at_the_grid_end_is_not_bracketed():
  assert dt.fit_best_lr(_curve(1e-4), 2) is None  # below the smallest lr
  assert dt.fit_best_lr(_curve(5e-2), 1) is None  # above the largest


def test_the_5_point_fit_reports_the_skew_the_3_point_fit_cannot_see():
  """An asymmetric curve: the 5-point fit has residuals, so a positive standard error, and
  its vertex moves away from the 3-point one."""
  curve = _curve(2e-3, skew=0.01)
  lr3, se3 = dt.fit_best_lr(curve, 1)
  lr5, se5 = dt.fit_best_lr(curve, 2)
  assert se3 == pytest.approx(0.5) and se5 > 0 and abs(math.log2(lr5 / lr3)) > 0.05


def _rows(param: str, depth: int, best: float):
  return [
    {"variant": "prenorm", "depth_param": param, "num_layers": depth, "opt.lr": p["lr"],
     "capped_loss": p["mean"], "seed": 0, "outcome": "trained"}
    for p in _curve(best)
  ]  # fmt: skip


def test_slope_of_best_lr_against_depth():
  """Best lr ~ L^-0.5 under sp and constant under completep: the slopes come out as such."""
  rows = []
  for depth in (6, 12, 24):
    rows += _rows("sp", depth, 4e-3 * (depth / 6) ** -0.5) + _rows("completep", depth, 2e-3)
  table = dt.best_lr_table(rows)
  slopes = {(s["depth_param"], s["fit"]): s for s in dt.depth_slopes(table)}
  for fit in dt.FITS:
    assert slopes["sp", fit]["slope"] == pytest.approx(-0.5, abs=1e-6)
    assert slopes["completep", fit]["slope"] == pytest.approx(0.0, abs=1e-6)
    assert slopes["sp", fit]["depths"] == "6 12 24"


def test_base_depth_sp_runs_stand_for_every_parametrization():
  rows = _rows("sp", 6, 4e-3) + _rows("sp", 12, 3e-3) + _rows("completep", 12, 4e-3)
  both = dt.with_base_depth(rows, base_depth=6)
  base = [r for r in both if r["depth_param"] == "completep" and r["num_layers"] == 6]
  assert len(base) == len(LRS) and all(r["opt.lr"] in LRS for r in base)
  assert not [r for r in both if r["depth_param"] == "completep" and r["num_layers"] == 24]


def _contrast_rows(noise: float, seeds=(0, 1, 2)) -> list[dict]:
  """Pre-LN curves (parabolas in log2 lr) whose best lr stays at 4e-3 under CompleteP and falls
  as L^-0.2 under sp (slope -0.2): CompleteP minus sp = +0.2. Seeds 1 and 2 at 2e-3, 4e-3
  and 8e-3 at 24 layers only, with +-noise."""
  rows = []
  lrs = [2.5e-4 * 2**k for k in range(7)]
  for param in ("sp", "completep"):
    for depth in (6, 12, 24, 48):
      best = 4e-3 if param == "completep" else 4e-3 * (6 / depth) ** 0.2
      for lr in lrs:
        for seed in seeds if depth == 24 and lr in (2e-3, 4e-3, 8e-3) else (0,):
          bump = noise * (seed - 1)
          loss = 1.7 + 0.05 * (math.log2(lr) - math.log2(best)) ** 2 + bump
          row = {"variant": "prenorm", "depth_param": param, "num_layers": depth, "opt.lr": lr}
          rows.append({**row, "seed": seed, "capped_loss": loss, "outcome": "trained"})
  return rows


def test_slope_contrast_finds_a_known_difference_and_its_interval_holds_it():
  c = dc.slope_contrast(_contrast_rows(noise=0.002), replicates=200)
  assert c["completep"] == pytest.approx(0.0, abs=1e-6)
  assert c["sp"] == pytest.approx(-0.2, abs=0.02)
  assert c["difference"] == pytest.approx(0.2, abs=0.02)
  assert c["ci_lo"] <= c["difference"] <= c["ci_hi"] and c["boot_failed"] == 0
  assert c["depths"] == "6 12 24 48" and c["seeds"] == "0 1 2"


def test_seeded_contrast_uses_only_the_lrs_every_seed_ran():
  rows = _contrast_rows(noise=0.01)
  lr_row, loss_row = dc.seeded_contrast(rows, 24, replicates=200)
  # 2e-3, 4e-3, 8e-3 (every seed ran there): CompleteP's best 4e-3, sp's 4e-3 * 4^-0.2
  assert lr_row["difference"] == pytest.approx(0.4, abs=0.01)
  assert loss_row["ci_lo"] <= loss_row["difference"] <= loss_row["ci_hi"]
  assert lr_row["seeds"] == "0 1 2"
  # 3 seeds: a t interval on the per-seed differences, not a bootstrap of 3 values
  assert lr_row["interval"] == "95% t over 3 seeds, paired by seed" and lr_row["replicates"] == 0
  assert dc.seeded_contrast(_contrast_rows(0.0, seeds=(0,)), 24) == []  # no seeds: no contrast
  # a seed run at one lr only is left out: seeds at every lr of the curve or at none
  extra = [{**r, "seed": 3, "capped_loss": r["capped_loss"] - 0.5} for r in rows
           if r["num_layers"] == 24 and r["opt.lr"] == 4e-3 and r["seed"] == 0]  # fmt: skip
  again, _ = dc.seeded_contrast(rows + extra, 24, replicates=50)
  assert again["seeds"] == "0 1 2" and again["difference"] == pytest.approx(lr_row["difference"])


def test_a_few_seeds_get_a_t_interval_on_their_paired_differences():
  """Seeds 0-2: per seed, CompleteP's best loss minus sp's is 0.1, 0.2, 0.3: the mean 0.2,
  its standard error 0.1/sqrt(3), and t(2)'s 4.303 of them each side; with 4 seeds it is the
  bootstrap again."""
  rows = []
  for seed, shift in ((0, 0.1), (1, 0.2), (2, 0.3), (3, 0.2)):
    for param, base in (("completep", 1.6 + shift), ("sp", 1.6)):
      for lr in (2e-3, 4e-3, 8e-3):
        loss = base + 0.05 * (math.log2(lr) - math.log2(4e-3)) ** 2
        row = {"variant": "prenorm", "depth_param": param, "num_layers": 24, "opt.lr": lr}
        rows.append({**row, "seed": seed, "capped_loss": loss, "outcome": "trained"})
  three = [r for r in rows if r["seed"] < 3]
  lr_row, loss_row = dc.seeded_contrast(three, 24)
  se = 0.1 / math.sqrt(3)
  assert loss_row["difference"] == pytest.approx(0.2) and loss_row[
    "difference_se"
  ] == pytest.approx(se)
  assert loss_row["ci_lo"] == pytest.approx(0.2 - 4.303 * se, abs=1e-3)
  assert loss_row["ci_hi"] == pytest.approx(0.2 + 4.303 * se, abs=1e-3)
  assert lr_row["difference"] == pytest.approx(0.0, abs=1e-9)  # the same vertex per seed
  assert lr_row["seeds"] == "0 1 2" and "t over 3 seeds" in loss_row["interval"]
  _, four = dc.seeded_contrast(rows, 24, replicates=50)
  assert four["interval"] == "95% seed bootstrap (4 seeds)" and four["replicates"] == 50


def test_the_3_point_best_lr_is_drawn_on_its_grid_resolution_not_an_error_bar():
  """The 3-point vertex has no estimated error: its figure draws the grid's best lr +- half a
  grid step (where the vertex lies) as a shaded box; only the 5-point fit, whose standard error
  is estimated from its residuals, gets an error bar."""
  import math

  from resnorm_jax.analysis import depth_transfer_figure as fig_mod
  from resnorm_jax.analysis.style import pyplot

  low, high = fig_mod.grid_half_step([1e-3, 2e-3, 4e-3], 2e-3)
  assert math.isclose(low, 2**0.5 * 1e-3) and math.isclose(high, 2**1.5 * 1e-3)
  low, high = fig_mod.grid_half_step([1e-3, 2e-3], 1e-3)  # no lower lr: the best itself
  assert low == 1e-3 and math.isclose(high, 2**0.5 * 1e-3)
  rows = [{"depth_param": "sp", "num_layers": d, "opt.lr": lr}
          for d in (6, 12) for lr in (1e-3, 2e-3, 4e-3, 8e-3)]  # fmt: skip
  table = [{"depth_param": "sp", "num_layers": d, "grid_best_lr": 2e-3, "best_lr_3pt": 2.4e-3,
            "best_lr_3pt_se_log2": 0.5, "best_lr_5pt": b5, "best_lr_5pt_se_log2": 0.2}
           for d, b5 in ((6, 2.2e-3), (12, None))]  # fmt: skip
  fig, ax = pyplot().subplots()
  fig_mod.draw_best_lrs(ax, rows, table, ["sp"])
  assert len(ax.containers) == 1  # one error bar series: the 5-point fit's
  boxes = [p for p in ax.patches if p.get_height() > 0]
  assert len(boxes) == 2
  for box in boxes:
    assert math.isclose(box.get_y(), 2**0.5 * 1e-3)
    assert math.isclose(box.get_y() + box.get_height(), 2**1.5 * 1e-3)
  texts = " ".join(t.get_text() for t in ax.get_legend().get_texts()).replace("\n", " ")
  assert "no error estimated" in texts and "estimated from the fit's residuals" in texts
  pyplot().close(fig)
