"""Figures agree with the escape rule and with each other: a periodic eval curve is drawn against
the no-context loss of its own eval tokens (outcome.curve_baseline), escape labels come from
the escape steps, every variant has one colour and no status shares it, no band is drawn
across lrs, and lrs are written one way (style.lr_label)."""

import colorsys
import glob
import itertools
import json
import math
import os

import pytest

from resnorm_jax.analysis import boundary, loss_curves, lr_figures, seed_plots, style
from resnorm_jax.probes import reproduction_plots
from resnorm_jax.runs import curves as run_records
from resnorm_jax.runs.outcome import STUCK_MARGIN

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESCUE = os.path.join(ROOT, "docs/xiong_rescue/runs")


def _rgb(colour: str) -> tuple[int, ...]:
  return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def _full_width_levels(ax) -> set[float]:
  """The y of every horizontal line drawn across the whole axes (axhline)."""
  return {
    round(float(line.get_ydata()[0]), 4)
    for line in ax.get_lines()
    if list(line.get_xdata()) == [0, 1] and len(set(line.get_ydata())) == 1
  }


def test_the_curve_baseline_is_the_periodic_eval_sets_own(tmp_path):
  (tmp_path / "summary.json").write_text(
    json.dumps({"heldout_unigram_entropy": 3.238, "periodic_eval_no_context_loss": 3.299})
  )
  assert run_records.eval_baseline(str(tmp_path)) == 3.299
  (tmp_path / "summary.json").write_text(json.dumps({"heldout_unigram_entropy": 3.238}))
  assert run_records.eval_baseline(str(tmp_path)) == 3.238  # runs that predate it: the split's
  run = os.path.join(RESCUE, "stdlib-L12-constant-lr0.001-w0-s0")
  with open(os.path.join(run, "summary.json")) as f:
    summary = json.load(f)
  record = run_records.run_record(run)
  assert record["baseline"] == summary["periodic_eval_no_context_loss"]  # 3.299, not 3.238
  assert record["final_baseline"] == summary["heldout_unigram_entropy"]


def test_the_rescue_figure_draws_the_rules_lines_and_escape_steps():
  runs = sorted(glob.glob(os.path.join(RESCUE, "stdlib-L12-constant-lr0.001-w*-s?")))
  runs = [r for r in runs if "-w0-" in r or "-w1000-" in r]
  assert len(runs) == 6
  fig = seed_plots.draw_seed_bands(runs)
  (ax,) = [a for a in fig.axes if a.get_visible()]
  periodic = run_records.run_record(runs[0])["baseline"]
  assert _full_width_levels(ax) == {round(periodic, 4), round(periodic - STUCK_MARGIN, 4)}
  # The escape steps in the legend are the rule's (seed 0 with warmup escaped at step 250).
  warm = [run_records.run_record(r) for r in runs if "-w1000-" in r]
  steps = sorted(r["escape_step"] for r in warm)
  assert steps[0] == 250
  label = seed_plots._arm_label(warm)
  assert f"escaped at step {steps[0]:,}/" in label and "lr 1e-3" in label
  texts = [t.get_text() for t in ax.get_legend().get_texts()]
  assert label in texts
  style.pyplot().close(fig)


def test_an_escape_label_follows_the_escape_step():
  base = {"variant": "postnorm", "lr": 1e-3, "warmup": 0, "steps": 1500, "seed": 0}
  group = [{**base, "escape_step": 250}, {**base, "seed": 1, "escape_step": None}]
  assert seed_plots._arm_label(group).endswith("escaped at step 250 on 1 of 2 seeds")
  group[1]["escape_step"] = 750
  assert seed_plots._arm_label(group).endswith("escaped at step 250/750 on 2 of 2 seeds")


def test_no_status_colour_is_or_looks_like_a_variant_colour():
  variants = [*style.palette().values(), *style._OTHER_COLORS]
  statuses = [*style.STATUS_COLORS.values(), style.SPLIT_COLOR, *boundary.CELL_COLORS.values()]
  for status in statuses:
    assert status not in variants
    # Every hue is some variant's (green DeepNorm, orange DyT, ...): a status has none.
    assert colorsys.rgb_to_hsv(*(c / 255 for c in _rgb(status)))[1] < 0.05, status
    nearest = min(math.dist(_rgb(status), _rgb(v)) for v in variants)
    assert nearest >= style.STATUS_DISTANCE, (status, nearest)
  assert set(boundary.CELL_COLORS.values()) <= {*style.STATUS_COLORS.values(), style.SPLIT_COLOR}


def test_every_named_variant_has_its_own_colour_told_apart_from_the_others():
  """Two variants in one figure never share a colour or one too close to tell apart; the
  palette holds the colours the named configs declare (COLOR) beside style.py's own."""
  colours = style.palette()
  assert (
    style.variant_color("mhc")
    == style.declared(os.path.join(ROOT, "configs", "mhc_96L.py"))["COLOR"]
  )
  configs = glob.glob(os.path.join(ROOT, "configs", "*_96L.py"))
  named = {os.path.basename(p)[: -len("_96L.py")] for p in configs}
  assert len(named) >= 20 and named <= set(colours), named - set(colours)
  for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
    assert math.dist(_rgb(ca), _rgb(cb)) >= style.VARIANT_DISTANCE, (
      f"{a} {ca} and {b} {cb} are too close to tell apart; a free colour: "
      f"{style.propose_color([c for n, c in colours.items() if n != b])}"
    )


def test_a_proposed_colour_is_free_far_from_every_taken_one_and_no_grey():
  taken = list(style.palette().values())
  proposal = style.propose_color()
  assert proposal not in taken
  assert min(math.dist(_rgb(proposal), _rgb(t)) for t in taken) >= style.VARIANT_DISTANCE
  r, g, b = _rgb(proposal)
  assert max(r, g, b) - min(r, g, b) >= 96  # saturated: no status grey
  # with the proposal taken, the next one is another colour, as free
  again = style.propose_color([*taken, proposal])
  assert again != proposal
  assert min(math.dist(_rgb(again), _rgb(t)) for t in [*taken, proposal]) >= 50


def _lr_rows():
  rows = []
  for lr, losses in ((1e-3, [2.0, 2.3]), (2e-3, [1.9, 2.4]), (4e-3, [3.2])):
    for seed, loss in enumerate(losses):
      rows.append(
        {
          "variant": "postnorm",
          "num_layers": 12,
          "opt.lr": lr,
          "seed": seed,
          "capped_loss": loss,
          "baseline": 3.238,
          "outcome": "trained" if loss < 3.1 else "stuck",
          "data": "stdlib bytes",
          "train.steps": 1000,
          "opt.warmup_steps": 0,
          "opt.schedule": "constant",
        }
      )
  return rows


def test_lr_curves_draw_no_band_and_no_line_through_losses_no_run_had():
  from matplotlib.collections import PolyCollection

  rows = _lr_rows()
  fig = lr_figures.draw_curves(rows)
  ax = fig.axes[0]
  assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
  runs = {(r["opt.lr"], r["capped_loss"]) for r in rows}
  means = {(1e-3, 2.15), (2e-3, 2.15)}
  for line in ax.get_lines():
    points = list(zip(line.get_xdata(), line.get_ydata(), strict=True))
    if len(points) > 1 and list(line.get_xdata()) != [0, 1]:  # a joined line: runs only
      assert all((x, y) in runs for x, y in points), points
    elif len(points) == 1 and line.get_marker() == "_":  # a mean: only where seeds are several
      assert any(math.isclose(points[0][1], m) and points[0][0] == x for x, m in means)
  _assert_only_runs_losses_drawn(fig, rows)
  labels = [t.get_text() for t in ax.get_xticklabels()]
  assert labels == ["1e-3", "2e-3", "4e-3"]
  style.pyplot().close(fig)


def _assert_only_runs_losses_drawn(fig, rows) -> None:
  """Every mark of an lr-curve figure is a loss some run had: no band; a line joining lrs runs
  through seed 0's losses only; a seed-mean bar only where the seeds at that lr agree (all
  trained or all not); anything else (markers, a bar spanning split seeds) at runs' losses."""
  from matplotlib.collections import PolyCollection

  def key(y):
    return round(float(y), 6)

  losses = {key(r["capped_loss"]) for r in rows if r["capped_loss"] is not None}
  seed0 = {key(r["capped_loss"]) for r in rows if r["capped_loss"] is not None and r["seed"] == 0}
  cells: dict[tuple, list] = {}
  for r in rows:
    if r["capped_loss"] is not None:
      cell = (r.get("panel_row"), r["variant"], r.get("d_model"), r.get("data"), float(r["opt.lr"]))
      cells.setdefault(cell, []).append(r)
  agreed = {
    key(sum(m["capped_loss"] for m in ms) / len(ms))
    for ms in cells.values()
    if len(ms) > 1 and style.seeds_agree([m["outcome"] == "trained" for m in ms])
  }
  for ax in fig.axes:
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
    for line in ax.get_lines():
      xs, ys = list(line.get_xdata()), [key(y) for y in line.get_ydata()]
      if not xs or xs == [0, 1]:  # a legend handle or a baseline across the axes
        continue
      if line.get_marker() == "_":
        assert all(y in agreed for y in ys), (ax.get_title(), ys)
      elif len(set(xs)) > 1:
        assert all(y in seed0 for y in ys), (ax.get_title(), ys)
      else:
        assert all(y in losses for y in ys), (ax.get_title(), ys)


def test_width_curves_draw_seed_0_as_the_line_and_no_mean_of_split_seeds():
  """docs/width's curves (sp, and muP beside sp) from the committed tables, whose cells at
  Post-LN's and DeepNorm's edges split between trained and stuck seeds: each seed drawn, the
  seed mean nowhere but where the seeds agree."""
  from resnorm_jax.analysis import lr_axis, width

  def table(path):
    return lr_axis.grid_rows(os.path.join(ROOT, "docs", "width", path), width.VARIANTS, 12)

  sp, mup = table("results.csv"), table(os.path.join("mup", "results.csv"))
  split = {(r["variant"], r["d_model"], r["opt.lr"]) for r in sp if r["outcome"] == "trained"}
  split &= {(r["variant"], r["d_model"], r["opt.lr"]) for r in sp if r["outcome"] == "stuck"}
  assert len(split) >= 3, split  # Post-LN at 64 and 128, DeepNorm at 128
  both = [*({**r, "panel_row": "mup"} for r in mup), *sp]  # the same cell in each is two cells
  for fig, rows in ((width.draw_curves(sp), sp), (width.draw_curves(mup, "mup", sp), both)):
    _assert_only_runs_losses_drawn(fig, rows)
    texts = " ".join(_legend_texts(fig)).replace("\n", " ")
    assert "seeds split trained / stuck: each seed, no mean" in texts
    style.pyplot().close(fig)
  # The rule bites: a mean of split seeds would fail it.
  fig, cell = width.draw_curves(sp), sorted(split)[0]
  at = [r["capped_loss"] for r in sp if (r["variant"], r["d_model"], r["opt.lr"]) == cell]
  fig.axes[0].plot(cell[2], sum(at) / len(at), "_")
  with pytest.raises(AssertionError):
    _assert_only_runs_losses_drawn(fig, sp)
  style.pyplot().close(fig)


def test_lrs_are_written_one_way():
  assert [style.lr_label(x) for x in (1.25e-4, 5e-4, 3.2e-2, 1e-3)] == [
    "1.25e-4",
    "5e-4",
    "3.2e-2",
    "1e-3",
  ]
  assert lr_figures.lr_label is style.lr_label


def test_boundary_figure_writes_lrs_as_lr_label(tmp_path, monkeypatch):
  rows = [
    {"variant": v, "num_layers": "6", "opt.lr": lr, "outcome": o, "final_eval_loss": "2.5"}
    for v in ("deepnorm", "dyt")
    for lr, o in (("0.00025", "trained"), ("0.008", "stuck"))
  ]
  drawn = []
  monkeypatch.setattr(boundary, "save_figure", lambda fig, out, tight=True: drawn.append(fig))
  boundary.plot_boundary(rows, str(tmp_path / "b.png"))
  (fig,) = drawn
  ax = fig.axes[0]
  assert [t.get_text() for t in ax.get_yticklabels()] == ["2.5e-4", "8e-3"]
  faces = {p.get_facecolor()[:3] for p in ax.patches}
  from matplotlib.colors import to_rgb

  assert faces == {to_rgb(style.STATUS_COLORS["trained"]), to_rgb(style.STATUS_COLORS["stuck"])}
  style.pyplot().close(fig)


@pytest.mark.parametrize(
  "csv_name",
  ["grad_norms_at_init/grad_norms_vs_depth.csv", "model_update_linear/lr1e-7/model_update.csv"],
)
def test_reproduction_figures_draw_each_config_in_its_variants_colour(csv_name):
  rows = reproduction_plots.read_csv(os.path.join(ROOT, "docs", csv_name))
  figure = {
    "grad_norms_vs_depth.csv": reproduction_plots.grad_norms_vs_depth_figure,
    "model_update.csv": reproduction_plots.model_update_figure,
  }[os.path.basename(csv_name)]
  fig = figure(rows)
  for line in fig.axes[0].get_lines():
    label = line.get_label()
    if label.startswith("_") or label == "1/sqrt(N)":
      continue
    variant = label.split()[0]
    assert line.get_color() == style.variant_color(variant), label
  style.pyplot().close(fig)
  assert reproduction_plots.config_color("postnorm-smoke") == style.VARIANT_COLORS["postnorm"]
  assert reproduction_plots.config_color("postnorm_deepinit") == "#ff9896"


def test_headline_curves_draw_each_run_in_its_variants_colour():
  runs = [os.path.join(ROOT, "docs/runs", f"{v}_96L") for v in ("postnorm", "prenorm", "deepnorm")]
  fig = loss_curves.draw_curves(runs)
  ax = fig.axes[0]
  colours = [h.get_color() for h in ax.get_legend().legend_handles[:3]]
  assert colours == [style.variant_color(v) for v in ("postnorm", "prenorm", "deepnorm")]
  assert "Post-LN: never escaped in 200 steps" in ax.get_legend().get_texts()[0].get_text()
  style.pyplot().close(fig)


def _legend_texts(fig) -> list[str]:
  return [t.get_text() for lg in [*fig.legends, *(a.get_legend() for a in fig.axes)] if lg
          for t in lg.get_texts()]  # fmt: skip


def test_lr_curves_draw_no_mean_of_trained_and_stuck_runs_and_list_only_what_is_drawn():
  rows = _lr_rows()
  split = {**rows[0], "seed": 1, "opt.lr": 4e-3, "capped_loss": 2.1, "outcome": "trained"}
  fig = lr_figures.draw_curves([*rows, split])  # 4e-3: seed 0 stuck (3.2), seed 1 trained
  ax = fig.axes[0]
  bars = [line for line in ax.get_lines() if line.get_marker() == "_"]
  assert sorted(round(line.get_xdata()[0], 6) for line in bars) == [1e-3, 2e-3]
  span = [line for line in ax.get_lines() if list(line.get_ydata()) == [2.1, 3.2]]
  assert len(span) == 1  # the split seeds, spanned, each drawn
  texts = _legend_texts(fig)
  assert lr_figures.MARK_LABELS["split"].split(":")[0] in " ".join(texts).replace("\n", " ")
  assert not any("diverged" in t for t in texts)  # no run diverged: not in the legend
  style.pyplot().close(fig)
  fig = lr_figures.draw_curves([r for r in rows if r["seed"] == 0])
  texts = " ".join(_legend_texts(fig)).replace("\n", " ")
  assert "other seeds" not in texts and "mean over seeds" not in texts
  assert "seeds split" not in texts
  assert "seed 0" in texts
  style.pyplot().close(fig)


def test_legend_variants_are_the_variants_drawn_each_in_its_colour_and_marker():
  base = _lr_rows()
  rows = [{**r, "variant": v} for v in ("postnorm", "hybridnorm", "mhc", "denseformer")
          for r in base if r["seed"] == 0]  # fmt: skip
  rows += [{**r, "variant": "prenorm"} for r in base if r["seed"] == 0]
  fig = lr_figures.draw_curves(rows, lr_figures.FAMILIES)
  drawn = {}
  for ax in fig.axes:
    for line in ax.get_lines():
      if not line.get_label().startswith("_"):
        drawn.setdefault(line.get_label(), set()).add((line.get_color(), ax))
  legend = {}
  for lg in fig.legends:
    for h, t in zip(lg.legend_handles, lg.get_texts(), strict=True):
      if t.get_text() in drawn:
        legend[t.get_text()] = (h.get_color(), h.get_marker())
  assert set(legend) == set(drawn)
  for v in ("postnorm", "prenorm", "hybridnorm", "mhc", "denseformer"):
    label = style.variant_label(v)
    assert legend[label] == (style.variant_color(v), style.variant_marker(v))
  # HybridNorm never shares a panel with Post-LN, and mHC and DenseFormer, sharing one, are
  # drawn side by side (not one over the other).
  panels = {label: {ax for _, ax in where} for label, where in drawn.items()}
  assert not panels["Post-LN"] & panels["HybridNorm"]
  (shared,) = panels["mHC"] & panels["DenseFormer"]
  xs = {line.get_label(): list(line.get_xdata()) for line in shared.get_lines()}
  assert all(a != b for a, b in zip(xs["mHC"], xs["DenseFormer"], strict=True))
  style.pyplot().close(fig)


def test_each_corpus_baseline_is_named_and_mup_is_drawn_beside_sp():
  from resnorm_jax.analysis import corpus, width

  rows = [r for r in _lr_rows() if r["seed"] == 0]
  other = [{**r, "data": "tinyshakespeare.txt", "baseline": 3.35} for r in rows]
  fig = corpus.lr_axis.draw_curves([*rows, *other], corpus.AXIS)
  ax = fig.axes[0]
  names = [t.get_text() for t in ax.texts]
  assert names == ["no-context loss, stdlib bytes", "no-context loss, tinyshakespeare.txt"]
  assert {c for c in [t.get_color() for t in ax.texts]} == {
    corpus.AXIS.color("stdlib bytes"),
    corpus.AXIS.color("tinyshakespeare.txt"),
  }
  style.pyplot().close(fig)
  mup = [{**r, "d_model": d} for r in rows for d in (64, 128)]
  sp = [{**r, "d_model": 64, "capped_loss": r["capped_loss"] + 0.1} for r in rows]
  fig = width.draw_curves(mup, "mup", reference=sp)
  titles = [a.get_title() for a in fig.axes]
  assert titles == ["Post-LN, muP", "Post-LN, standard (sp), the reference"]
  texts = " ".join(_legend_texts(fig))
  assert "d_model 64" in texts and "d_model 128" in texts
  assert "other seeds" not in texts and "diverged" not in texts  # none drawn
  style.pyplot().close(fig)


def test_each_stabilizer_has_one_colour_in_every_figure():
  """A stabilizer's cell (postnorm-<stabilizer>, prenorm-muon-sp) is drawn in its stabilizer's
  palette colour, in the survival figures and the curves alike; no two stabilizers share one."""
  from configs.sweeps import stabilizers

  names = [*stabilizers.STABILIZERS, *stabilizers.CONTROLS]
  colours = {n: style.variant_color(n) for n in names}
  assert set(names) <= set(style.palette()), set(names) - set(style.palette())
  assert len(set(colours.values())) == len(names), colours
  for n in names:
    assert style.variant_color(f"postnorm-{n}") == colours[n]
  assert style.variant_color("prenorm-muon-completep") == colours["muon"]
