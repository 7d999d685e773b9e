"""The named facts of docs/results.md's prose: each function's text from small planted data (a
wrong formula changes the text), and every one stated in the page."""

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims import (
  budget,
  corpus,
  docs_data,
  readme,
  reproductions_facts,
  results_md,
)
from resnorm_jax.analysis.claims import lr_sensitivity_facts as lrs_facts


def _reader(tables):
  """A stand-in for docs_data.read: each path's planted rows."""
  return lambda path: tables[path]


def _curves(curves):
  """A stand-in for an eval-curve reader: {run: (steps, losses)}."""
  return lambda run: curves[run]


def _evals_between(curves):
  def evals(run, start, end=None):
    steps, losses = curves[run]
    return [
      v for s, v in zip(steps, losses, strict=True) if s >= start and (end is None or s <= end)
    ]

  return evals


def test_every_results_md_fact_is_stated_in_the_page():
  mine = {
    n: f
    for n, f in readme.FACTS.items()
    if f[0].endswith(docs_data.RESULTS_MD_NAME) and "README" not in f[0]
  }
  problems = doc_sections.check_facts(readme.RESULTS_MD, mine, docs_data.run_fact)
  assert not [p for p in problems if "not stated" in p], problems
  assert len(mine) > 100


# corpus.py


def test_train_entropy_is_the_runs_unigram_entropy(monkeypatch):
  rows = [{"unigram_entropy": "3.25164"}, {"unigram_entropy": "3.2516"}]
  monkeypatch.setattr(corpus, "read", _reader({"docs/runs/results.csv": rows}))
  assert corpus.train_entropy() == "3.252"
  rows.append({"unigram_entropy": "3.3"})
  assert corpus.train_entropy() == "3.252 / 3.300"


# reproductions_facts.py


def test_csv_loss_reads_the_named_rows_column(monkeypatch):
  rows = [
    {"name": "a", "final_eval_loss": "2.5458", "gap": "0.1649"},
    {"name": "b", "final_eval_loss": "3.3186", "gap": "0.0"},
  ]
  monkeypatch.setattr(reproductions_facts, "read", _reader({"x.csv": rows}))
  assert reproductions_facts.csv_loss("x.csv", "b") == "3.319"
  assert reproductions_facts.csv_loss("x.csv", "a", "gap", 2) == "0.16"


def test_seeds_mean_std_and_range_of_the_24_layer_seeds(monkeypatch):
  rows = [
    {
      "variant": "postnorm",
      "num_layers": "24",
      "final_eval_mean": "3.3151",
      "final_eval_std": "0.00346",
      "final_eval_min": "3.3127",
      "final_eval_max": "3.3191",
    },
    {"variant": "postnorm", "num_layers": "12", "final_eval_mean": "9", "final_eval_std": "9"},
  ]
  monkeypatch.setattr(reproductions_facts, "read", _reader({reproductions_facts.SEEDS: rows}))
  assert reproductions_facts.seeds_mean_std("postnorm") == "3.315 +- 0.003"
  assert reproductions_facts.seeds_range("postnorm") == "3.313-3.319"


def test_below_no_context_reads_the_rederived_row_of_the_csvs_run(monkeypatch):
  rows = [
    {"file": "a.csv", "name": "r", "below_baseline": "0.1603"},
    {"file": "b.csv", "name": "r", "below_baseline": "0.9"},
  ]
  monkeypatch.setattr(reproductions_facts, "read", _reader({reproductions_facts.REDERIVED: rows}))
  assert reproductions_facts.below_no_context("a.csv", "r") == "0.16"


def test_eval_range_between_steps(monkeypatch):
  curve = ([50, 100, 350, 400, 600], [4.1, 3.8, 3.391, 3.373, 3.375])
  monkeypatch.setattr(reproductions_facts, "_eval_curve", _curves({"r": curve}))
  assert reproductions_facts.eval_range("r", 350) == "3.37-3.39"
  assert reproductions_facts.eval_range("r", 100, 100, 3) == "3.800"
  assert reproductions_facts.eval_range("r", 400, None, 2) == "3.37-3.38"
  assert reproductions_facts.evals_between("r", 50, 100) == [4.1, 3.8]


def test_eval_no_context_is_the_periodic_eval_sets(monkeypatch):
  monkeypatch.setattr(
    reproductions_facts, "run_summary", lambda run: {"periodic_eval_no_context_loss": 3.29855}
  )
  assert reproductions_facts.eval_no_context("r") == "3.299"


def test_update_growth_and_ratio(monkeypatch):
  rows = [
    {"config": "postnorm", "depth": "6", "early_update_per_lr": "10"},
    {"config": "postnorm", "depth": "192", "early_update_per_lr": "1080"},
    {"config": "postnorm", "depth": "96", "early_update_per_lr": "500"},
    {"config": "deepnorm", "depth": "6", "early_update_per_lr": "2"},
    {"config": "deepnorm", "depth": "96", "early_update_per_lr": "5"},
    {"config": "deepnorm", "depth": "192", "early_update_per_lr": "19.4"},
  ]
  monkeypatch.setattr(reproductions_facts, "read", _reader({reproductions_facts.UPDATES: rows}))
  assert reproductions_facts.update_growth("postnorm", 0) == "108"
  assert reproductions_facts.update_growth("deepnorm", 1) == "9.7"
  assert reproductions_facts.update_ratio((96, 192)) == "56-100"


# budget.py


def test_budget_below_range_and_eval_min(monkeypatch):
  rows = [
    {"name": "a", "baseline": "3.2383", "final_eval_loss": "3.2011"},
    {"name": "b", "baseline": "3.2383", "final_eval_loss": "3.2052"},
    {"name": "c", "baseline": "3.2383", "final_eval_loss": "2.0"},
  ]
  monkeypatch.setattr(budget, "read", _reader({budget.BUDGET: rows}))
  assert budget.below_range(("a", "b")) == "0.03-0.04"
  assert budget.below_range(("a",)) == "0.04"
  curves = {"r": ([25, 50, 75], [3.5, 3.2971, 3.31])}
  monkeypatch.setattr(budget, "evals_between", _evals_between(curves))
  assert budget.eval_min("r") == "3.297"


# results_md.py


def test_verdicts_changed_counts_the_changed_rows(monkeypatch):
  rows = [{"changed": ""}, {"changed": " "}, {"changed": ""}]
  monkeypatch.setattr(results_md, "read", _reader({results_md.REDERIVED: rows}))
  assert results_md.verdicts_changed() == "none of their 3 verdicts changes"
  rows[1]["changed"] = "yes"
  assert results_md.verdicts_changed() == "1 of their 3 verdicts changes"
  rows[2]["changed"] = "yes"
  assert results_md.verdicts_changed() == "2 of their 3 verdicts change"


def test_run_count_and_outcome_count(monkeypatch):
  monkeypatch.setattr(results_md, "read", _reader({"x.csv": [{}, {}, {}]}))
  assert results_md.run_count("x.csv") == "3"
  outcomes = {"a": "trained", "b": "stuck", "c": "trained"}
  monkeypatch.setattr(results_md, "run_summary", lambda run: {"outcome": outcomes[run]})
  assert results_md.outcome_count(("a", "b", "c")) == "2 of 3"
  assert results_md.outcome_count(("a", "b"), "stuck") == "1 of 2"


def test_plateau_noise_facts(monkeypatch):
  rows = [
    {
      "corpus": "stdlib",
      "unigram_model_eval_std": "0.0379",
      "heldout_unigram_entropy": "3.2383",
      "unigram_entropy": "3.2516",
      "unigram_model_on_loop_eval_set": "3.2436",
    },
    {
      "corpus": "tinyshakespeare",
      "unigram_model_eval_std": "0.0172",
      "heldout_unigram_entropy": "3.3475",
      "unigram_entropy": "3.3091",
      "unigram_model_on_loop_eval_set": "3.3625",
    },
  ]
  monkeypatch.setattr(results_md, "read", _reader({results_md.NOISE: rows}))
  assert results_md.noise("stdlib", "unigram_model_eval_std", 3) == "0.038"
  assert results_md.noise("tinyshakespeare", "heldout_unigram_entropy", 4) == "3.3475"
  assert results_md.loop_offset() == "0.015"
  assert results_md.margin_over_std() == "2.6"


def test_stuck_and_trained_margins(monkeypatch):
  rows = [
    {"outcome": "stuck", "baseline": "3.2383", "final_eval_loss": "3.1928"},
    {"outcome": "stuck", "baseline": "3.2383", "final_eval_loss": "3.30"},
    {"outcome": "trained", "baseline": "3.2383", "final_eval_loss": "3.0917"},
    {"outcome": "trained", "baseline": "3.2383", "final_eval_loss": "2.0"},
    {"outcome": "interrupted", "baseline": "3.2383", "final_eval_loss": "3.2"},
  ]
  monkeypatch.setattr(results_md, "read", _reader({results_md.ESCAPES: rows}))
  assert results_md.stuck_deepest() == "0.046"
  assert results_md.trained_shallowest() == "0.147"
  assert results_md.trained_within(0.6) == "1 of the 2"


def test_mechanism_values_and_ranges(monkeypatch):
  rows = [
    {
      "variant": "postnorm",
      "step": "5",
      "update_norm": "0.43276",
      "grad_low_over_high": "0.010152",
    },
    {"variant": "postnorm", "step": "25", "update_norm": "0.105", "grad_low_over_high": "3.42e-4"},
    {"variant": "postnorm", "step": "100", "update_norm": "0.0339", "grad_low_over_high": "6.6e-6"},
    {"variant": "postnorm", "step": "500", "update_norm": "0.0788", "grad_low_over_high": "1.37"},
    {"variant": "deepnorm", "step": "100", "update_norm": "9", "grad_low_over_high": "9"},
  ]
  for r in rows:
    r["norm_in_rms_first"], r["norm_in_rms_last"] = "1.0911", "8.59889"
  rows[3]["norm_in_rms_last"] = "17.666115"
  monkeypatch.setattr(results_md, "read", _reader({results_md.MECHANISM: rows}))
  assert results_md.mech_value("postnorm", "update_norm", 5) == "0.433"
  assert results_md.mech_value("postnorm", results_md.RATIO, 5) == "0.0102"
  assert results_md.mech_value("postnorm", results_md.RATIO, 25) == "3.4e-4"
  assert results_md.mech_value("postnorm", results_md.RATIO, 100) == "6.6e-6"
  assert results_md.mech_range("postnorm", "update_norm", 100) == "0.034-0.079"
  assert results_md.mech_range("postnorm", results_md.RATIO) == "6.6e-6-1.37"
  assert results_md.mech_range("postnorm", "norm_in_rms_first/norm_in_rms_last") == "1.091-17.666"


# lr_sensitivity_facts.py


def _grid_row(variant, depth, lr, seed, loss, outcome="trained", escape="50"):
  return {
    "name": f"{variant}-L{depth}-lr{lr}-s{seed}",
    "variant": variant,
    "num_layers": str(depth),
    "opt.lr": str(lr),
    "seed": str(seed),
    "final_eval_loss": str(loss),
    "outcome": outcome,
    "escape_step": escape,
  }


GRID_ROWS = [
  _grid_row("postnorm", 12, 5e-4, 0, 2.367, escape="200"),
  _grid_row("postnorm", 12, 5e-4, 1, 3.178, "stuck", ""),
  _grid_row("postnorm", 12, 5e-4, 2, 2.347, escape="100"),
  _grid_row("postnorm", 12, 1e-3, 0, 3.251, "stuck", ""),
  _grid_row("postnorm", 6, 5e-4, 0, 1.0),
  _grid_row("prenorm", 24, 2e-3, 0, 1.7554),
  _grid_row("prenorm", 24, 4e-3, 0, 1.7327),
  _grid_row("prenorm", 24, 4e-3, 1, 1.60),
  _grid_row("prenorm", 48, 2e-3, 0, 1.7450),
  _grid_row("prenorm", 48, 4e-3, 0, 1.7521),
  _grid_row("prenorm", 48, 8e-3, 0, 1.8359),
  _grid_row("prenorm", 24, 8e-3, 0, 1.8121),
]


def test_grid_counts_ranges_and_best(monkeypatch):
  monkeypatch.setattr(lrs_facts, "read", _reader({lrs_facts.GRID: GRID_ROWS}))
  assert lrs_facts.grid_count("postnorm", 12, 5e-4) == "2 of 3"
  assert lrs_facts.grid_count("postnorm", 12, 5e-4, "stuck") == "1 of 3"
  assert lrs_facts.grid_loss_range("postnorm", 12, 5e-4, 1e-3) == "2.367-3.251"
  assert lrs_facts.grid_best_loss("prenorm", 24) == "1.733"
  assert lrs_facts.cell_range("postnorm", (6, 12), 5e-4) == "1.000-3.178"
  assert lrs_facts.grid_escape_steps("postnorm", (12,), 5e-4) == "100 or 200 or none"
  assert lrs_facts.lr_losses("prenorm", 48, 2e-3, 8e-3) == "1.745, 1.752, 1.836"


def test_depth_shift_compares_48_with_24_layers_at_shared_lrs(monkeypatch):
  monkeypatch.setattr(lrs_facts, "read", _reader({lrs_facts.GRID: GRID_ROWS}))
  # 24 minus 48 at 2e-3: 0.0104; 48 minus 24 at 4e-3 and 8e-3: 0.0194, 0.0238
  assert lrs_facts.depth_shift(("prenorm",), 0, 2e-3, True) == "0.01-0.01"
  assert lrs_facts.depth_shift(("prenorm",), 4e-3, 8e-3, False) == "0.02-0.02"
  assert lrs_facts.depth_shift(("prenorm",), 2e-3, 8e-3, True) == "-0.02-0.01"


def test_grid_eval_facts(monkeypatch):
  monkeypatch.setattr(lrs_facts, "read", _reader({lrs_facts.GRID: GRID_ROWS}))
  run = lambda name: f"{lrs_facts.GRID_RUNS}/{name}"  # noqa: E731
  curves = {
    run("postnorm-L12-lr0.0005-s0"): ([50, 500, 1000], [3.5, 3.30, 3.214]),
    run("postnorm-L12-lr0.001-s0"): ([50, 500, 1000], [3.4, 3.325, 3.307]),
    run("postnorm-L6-lr0.0005-s0"): ([50, 500, 1000], [3.0, 2.5, 2.0]),
  }
  monkeypatch.setattr(lrs_facts, "evals_between", _evals_between(curves))
  assert lrs_facts.grid_eval_range("postnorm", 12, 5e-4, 1e-3, 500) == "3.214-3.325"
  assert lrs_facts.grid_evals_at((("postnorm", 12, 5e-4, 1e-3), ("postnorm", 6, 0, 1)), 50) == (
    "3.000-3.500"
  )
  assert lrs_facts.grid_lowest_range("postnorm", 12, 5e-4, 1e-3) == "3.214-3.307"
  assert (
    lrs_facts.evals_at(("postnorm-L12-lr0.0005-s0", "postnorm-L12-lr0.001-s0"), 1000) == "3.21-3.31"
  )
  assert lrs_facts.evals_at(("postnorm-L12-lr0.0005-s0",), 500) == "3.30"
  monkeypatch.setattr(lrs_facts, "run_summary", lambda r: {"periodic_eval_no_context_loss": 3.2986})
  assert lrs_facts.eval_below(run("postnorm-L12-lr0.0005-s0"), 1000) == "0.085"
  monkeypatch.setattr(lrs_facts, "_curve", _curves({"r": ([25, 950, 975], [3.3, 3.2730, 3.28])}))
  assert lrs_facts.eval_lowest("r") == "3.273 at step 950"


def test_late_slope_and_trend(monkeypatch):
  rows = [{"name": "a", "late_slope": "0.5612", "late_slope_se": "0.0527", "late_trend": "rising"}]
  monkeypatch.setattr(lrs_facts, "read", _reader({"x.csv": rows}))
  assert lrs_facts.late_slope("x.csv", "a") == "0.561 +- 0.053"
  assert lrs_facts.late_trend("x.csv", "a") == "rising"


def test_seeds_slash_reads_each_seeds_run(monkeypatch):
  losses = {f"{lrs_facts.GRID_RUNS}/c-s{k}": v for k, v in enumerate((1.7327, 1.6821, 1.7244))}
  monkeypatch.setattr(lrs_facts, "run_summary", lambda run: {"final_eval_loss": losses[run]})
  assert lrs_facts.seeds_slash("c") == "1.733 / 1.682 / 1.724"


def test_sensitivity_facts(monkeypatch):
  rows = [
    {"variant": "prenorm", "num_layers": "6", "lrs_trained": "9", "n_lrs": "9",
     "best_loss": "1.75945", "lr_sensitivity": "0.37962"},
    {"variant": "prenorm", "num_layers": "12", "lrs_trained": "9", "n_lrs": "9",
     "best_loss": "1.712", "lr_sensitivity": "0.4331"},
    {"variant": "deepnorm", "num_layers": "6", "lrs_trained": "6", "n_lrs": "9",
     "best_loss": "1.7", "lr_sensitivity": "0.77"},
    {"variant": "deepnorm", "num_layers": "12", "lrs_trained": "5", "n_lrs": "9",
     "best_loss": "1.7", "lr_sensitivity": "0.77"},
  ]  # fmt: skip
  monkeypatch.setattr(lrs_facts, "read", _reader({lrs_facts.SENSITIVITY: rows}))
  assert lrs_facts.sensitivity_triple("prenorm", 6) == "9 / 1.759 / 0.380"
  assert lrs_facts.sensitivity_value("prenorm", (6,)) == "0.380"
  assert lrs_facts.sensitivity_value("prenorm", (6, 12)) == "0.380-0.433"
  assert lrs_facts.plateau_lrs("deepnorm", (6,)) == "3 of 9"
  assert lrs_facts.plateau_lrs("deepnorm", (6, 12)) == "3 / 4 of 9"


# reproductions_facts.py: run folders


def _summaries(monkeypatch, module, summaries):
  monkeypatch.setattr(module, "run_summary", lambda run: summaries[run])


def test_run_folder_margins_and_ranges(monkeypatch):
  _summaries(
    monkeypatch,
    reproductions_facts,
    {
      "a": {"heldout_unigram_entropy": 3.2383, "final_eval_loss": 1.9787, "wall_seconds": 420},
      "b": {"heldout_unigram_entropy": 3.2383, "final_eval_loss": 1.9471, "wall_seconds": 1080},
      "c": {"heldout_unigram_entropy": 3.3927, "final_eval_loss": 3.4440, "wall_seconds": 330},
      "d": {"heldout_unigram_entropy": 3.4619, "final_eval_loss": 3.4400, "wall_seconds": 340},
    },
  )
  assert reproductions_facts.below_range(("a", "b")) == "1.26-1.29"
  assert reproductions_facts.below_range(("a",), 3) == "1.260"
  assert reproductions_facts.below_or_above(("c", "d")) == "between 0.02 below and 0.05 above"
  assert reproductions_facts.signed_below("c") == "0.051 above"
  assert reproductions_facts.signed_below("d", 2) == "0.02 below"
  assert reproductions_facts.most_below(("a", "c")) == "1.26"
  assert reproductions_facts.below_ratio("d") == "0.2"
  assert reproductions_facts.seed_spread((("a", "b"), ("c", "d"))) == "0.032"
  assert reproductions_facts.loss_range(("a", "c")) == "1.979-3.444"
  assert reproductions_facts.wall_range(("a", "b")) == "7-18"
  assert reproductions_facts.wall_range(("c", "d"), 1) == "5.5-5.7"
  assert reproductions_facts.run_baseline("d") == "3.462"
  # seed means 3.444 / 3.440 against 1.9787 / 1.9471: gaps 1.4653 and 1.4929
  pairs = ((("c",), ("a",)), (("d",), ("b",)))
  assert reproductions_facts.arm_gap(pairs) == "1.47-1.49"
  assert reproductions_facts.gap_over_spread(pairs, (("a", "b"),)) == "46"


def test_escape_set_and_eval_readings(monkeypatch):
  _summaries(
    monkeypatch,
    reproductions_facts,
    {
      "a": {"escape_step": 500, "periodic_eval_no_context_loss": 3.2986},
      "b": {"escape_step": 250},
      "c": {"escape_step": None},
    },
  )
  assert reproductions_facts.escape_set(("a", "a")) == "500"
  assert reproductions_facts.escape_set(("a", "b", "c")) == "250 or 500 or none"
  curves = {
    "a": ([100, 200, 300, 400], [3.6, 3.12, 3.14, 2.4]),
    "b": ([100, 200, 300, 400], [3.3, 2.6, 2.45, 2.1]),
  }
  monkeypatch.setattr(reproductions_facts, "_eval_curve", _curves(curves))
  assert reproductions_facts.runs_eval_range(("a", "b"), 200, 300, 2) == "2.45-3.14"
  assert reproductions_facts.runs_eval_range(("a",), 400) == "2.400"
  assert reproductions_facts.eval_list("a", 200) == "3.12, 3.14, 2.40"
  assert reproductions_facts.first_below(("a", "b"), 2.5) == "400"
  assert reproductions_facts.no_context_gap("a", 200, 300) == "0.16-0.18"


def test_train_band_and_crossing(monkeypatch):
  _summaries(monkeypatch, reproductions_facts, {"a": {"heldout_unigram_entropy": 3.0}})
  curve = [(10, 4.0), (50, 3.2), (300, 2.99), (310, 2.5)]
  monkeypatch.setattr(reproductions_facts, "_train_curve", lambda run: curve)
  assert reproductions_facts.train_band(("a",), 50) == "between 0.50 below and 0.20 above"
  assert reproductions_facts.train_crossing(("a",)) == "300"


def test_corpus_mb_and_seed_rows(monkeypatch):
  seeds = [
    {"variant": "postnorm", "num_layers": "24", "final_eval_mean": "3.3151",
     "final_eval_min": "3.3127", "final_eval_max": "3.3191"},
    {"variant": "prenorm", "num_layers": "24", "final_eval_mean": "2.5079",
     "final_eval_min": "2.5055", "final_eval_max": "2.5104"},
    {"variant": "deepnorm", "num_layers": "24", "final_eval_mean": "2.5644",
     "final_eval_min": "2.5586", "final_eval_max": "2.5719"},
  ]  # fmt: skip
  tables = {
    reproductions_facts.UNSEEN_CORPORA: [{"corpus": "vim", "bytes": "9519562"}],
    reproductions_facts.SEEDS: seeds,
  }
  monkeypatch.setattr(reproductions_facts, "read", _reader(tables))
  assert reproductions_facts.corpus_mb("vim") == "9.5"
  assert reproductions_facts.seeds_value("deepnorm", "final_eval_max") == "2.572"
  assert reproductions_facts.seeds_gap() == "0.75"
  assert reproductions_facts.seeds_gap_over_spread() == "56"


def test_grad_norm_facts(monkeypatch):
  per_layer = [
    {"config": "postnorm", "layer": str(k), "w2_grad_norm": str(v)}
    for k, v in enumerate((0.4776, 0.8, 1.19, 1.4321))
  ] + [{"config": "prenorm", "layer": "0", "w2_grad_norm": "9"}]
  depth = [
    {"config": "prenorm", "depth": "6", "last_w2_grad_norm": "0.567"},
    {"config": "prenorm", "depth": "96", "last_w2_grad_norm": "0.1134"},
  ]
  tables = {
    f"{reproductions_facts.GRAD}/grad_norms_per_layer_L24.csv": per_layer,
    f"{reproductions_facts.GRAD}/grad_norms_vs_depth.csv": depth,
  }
  monkeypatch.setattr(reproductions_facts, "read", _reader(tables))
  assert reproductions_facts.grad_layers("postnorm", 24, 0, 0) == "0.478"
  assert reproductions_facts.grad_layers("postnorm", 24, 2, 3, 2) == "1.19-1.43"
  assert reproductions_facts.grad_last("prenorm", 96) == "0.113"
  assert reproductions_facts.grad_last_range("prenorm") == "0.11-0.57"
  assert reproductions_facts.grad_last_factor("prenorm") == "5.0"


def test_grad_flow_facts(monkeypatch):
  rows = [
    {"state": "trained", "layer": str(k), "grad_norm": str(v)}
    for k, v in ((0, 6.23e-5), (1, 0.0203), (2, 0.19))
  ]
  monkeypatch.setattr(reproductions_facts, "read", _reader({reproductions_facts.FLOW: rows}))
  assert reproductions_facts.flow_value("trained", 0) == "6.2e-5"
  assert reproductions_facts.flow_value("trained", 1) == "2.0e-2"
  assert reproductions_facts.flow_value("trained", 2) == "0.190"
  assert reproductions_facts.flow_ratio("trained") == "3,050"
  assert reproductions_facts.flow_dip("trained") == "0.0"
  rows[1]["grad_norm"] = "0.01"
  rows[0]["grad_norm"] = "0.2"
  assert reproductions_facts.flow_dip("trained") == "19.0"
  assert reproductions_facts.flow_ratio("trained") == "0.95"


# results_md.py: the escape census, eval sets, the boundary


def test_escape_census_and_eval_set_offset(monkeypatch):
  escapes = [
    {"path": "docs/stability_boundary/runs/a", "steps": "300", "escape_step": "200",
     "diverged_step": "", "eval_set_baseline": "3.3"},
    {"path": "docs/runs/b", "steps": "600", "escape_step": "500", "diverged_step": "",
     "eval_set_baseline": ""},
    {"path": "docs/runs/c", "steps": "600", "escape_step": "100", "diverged_step": "",
     "eval_set_baseline": "3.3"},
    {"path": "docs/runs/d", "steps": "600", "escape_step": "", "diverged_step": "40",
     "eval_set_baseline": "3.3"},
  ]  # fmt: skip
  baselines = [
    {"baseline": "3.2383", "offset": "0.0602"},
    {"baseline": "3.34749", "offset": "0.01617"},
  ]
  tables = {results_md.ESCAPES: escapes, results_md.BASELINES: baselines}
  monkeypatch.setattr(results_md, "read", _reader(tables))
  census = {
    k: results_md.escape_census(k)
    for k in ("runs", "escaped", "never", "diverged", "late", "late_boundary", "late_other")
  }
  assert census == {
    "runs": "4",
    "escaped": "3",
    "never": "1",
    "diverged": "1",
    "late": "2",
    "late_boundary": "1",
    "late_other": "1",
  }
  assert results_md.escape_census("eval_set") == "3"
  assert results_md.escape_census("split_only") == "1"
  escapes[3]["diverged_step"] = ""
  assert results_md.escape_census("diverged") == "none"
  assert results_md.eval_set_offset("3.2383", 0.1, 2) == "0.16"
  assert results_md.eval_set_offset("3.3474") == "0.016"


def test_boundary_range_keeps_seed_0_without_warmup(monkeypatch):
  def row(lr, loss, seed="0", warmup="0", depth="24"):
    return {
      "variant": "postnorm",
      "num_layers": depth,
      "seed": seed,
      "opt.warmup_steps": warmup,
      "opt.lr": str(lr),
      "final_eval_loss": str(loss),
    }

  rows = [
    row(1.25e-4, 3.3081),
    row(5e-4, 3.2484),
    row(5e-4, 2.0, seed="1"),
    row(5e-4, 2.0, warmup="100"),
    row(5e-4, 3.2561, depth="48"),
    row(5e-4, 1.0, depth="12"),
  ]
  monkeypatch.setattr(results_md, "read", _reader({results_md.BOUNDARY: rows}))
  assert results_md.boundary_range("postnorm", (24, 48), 0, 1) == "3.248-3.308"
  assert results_md.boundary_range("postnorm", (24, 48), 5e-4, 1) == "3.248-3.256"


# lr_sensitivity_facts.py: censuses and gaps


def test_late_slope_census(monkeypatch):
  def row(v, lr, outcome, trend, slope, name="r"):
    return {
      "name": name,
      "variant": v,
      "num_layers": "24",
      "seed": "0",
      "opt.lr": str(lr),
      "outcome": outcome,
      "late_trend": trend,
      "late_slope": str(slope),
      "final_eval_loss": "2",
    }

  rows = [
    row("prenorm", 4e-3, "trained", "falling", -0.1301, "p1"),
    row("deepnorm", 8e-3, "trained", "falling", -0.5),
    row("deepnorm", 1.6e-2, "trained", "rising", 0.3),  # above 8e-3: not in "trained"
    row("postnorm", 1e-3, "stuck", "flat", 0.1404),
    row("postnorm", 5e-4, "stuck", "falling", -0.0712, "p2"),
    row("postnorm", 6.25e-5, "stuck", "falling", -0.4),  # below the grid's lrs
    row("prenorm", 3.2e-2, "trained", "rising", 0.3),
    row("prenorm", 1.6e-2, "trained", "flat", 0.0),
    row("sandwich", 1e-3, "stuck", "rising", 1.0),  # not a main variant
  ]
  monkeypatch.setattr(lrs_facts, "read", _reader({lrs_facts.GRID: rows}))
  assert lrs_facts.all_falling("trained") == "all 2"
  assert lrs_facts.max_slope("trained") == "-0.130"
  assert lrs_facts.trend_count("plateau") == "2"
  assert lrs_facts.trend_count("plateau", "flat") == "1"
  assert lrs_facts.trend_count("plateau", "rising") == "0"
  assert lrs_facts.max_slope("plateau") == "0.140"
  assert lrs_facts.trend_count("prenorm_right", "rising") == "1"
  assert lrs_facts.slope_value("p2") == "-0.071"
  rows[1]["late_trend"] = "flat"
  assert lrs_facts.all_falling("trained") == "1 of the 2"


def test_variant_gap_and_late_trends(monkeypatch):
  rows = [
    _grid_row("prenorm", 24, 2e-3, 0, 1.7554),
    _grid_row("prenorm", 24, 4e-3, 0, 1.7327),
    _grid_row("mhc", 24, 2e-3, 0, 1.7433),
    _grid_row("mhc", 24, 4e-3, 0, 1.7109),
  ]
  for r, t in zip(rows, ("flat", "flat", "falling", "flat"), strict=True):
    r["late_trend"] = t
  monkeypatch.setattr(lrs_facts, "read", _reader({lrs_facts.GRID: rows}))
  assert lrs_facts.variant_gap("mhc", "prenorm", 24, (2e-3, 4e-3)) == "0.01-0.02"
  assert lrs_facts.variant_gap("prenorm", "mhc", 24, (2e-3,)) == "-0.01"
  assert lrs_facts.late_trends(("prenorm-L24-lr0.002-s0", "prenorm-L24-lr0.004-s0")) == "flat"
  assert lrs_facts.late_trends(("mhc-L24-lr0.002-s0", "mhc-L24-lr0.004-s0")) == "falling / flat"


# budget.py: the 3,000-step runs


def test_budget_readings(monkeypatch):
  rows = [
    {"name": "a", "variant": "postnorm", "outcome": "stuck", "late_slope": "-0.0047",
     "diverged_step": "940.0", "final_eval_loss": "3.2011"},
    {"name": "b", "variant": "postnorm", "outcome": "stuck", "late_slope": "0.0271",
     "diverged_step": "", "final_eval_loss": "3.2052"},
    {"name": "c", "variant": "prenorm", "outcome": "trained", "late_slope": "-0.1773",
     "diverged_step": "", "final_eval_loss": "1.8"},
  ]  # fmt: skip
  monkeypatch.setattr(budget, "read", _reader({budget.BUDGET: rows}))
  assert budget.slope("c") == "-0.177"
  assert budget.plateau_slopes() == "-0.005 to 0.027"
  assert budget.diverged_step("a") == "940"
  assert budget.diverged_step("b") == "none"
  assert budget.short_of(("a", "b"), 3.036) == "0.17"
  assert budget.short_of(("a", "b"), 3.030) == "0.17-0.18"
  curves = {f"{budget.BUDGET_RUNS}/{k}": v for k, v in {"a": ([50, 100], [3.3, 3.29])}.items()}
  monkeypatch.setattr(budget, "evals_between", _evals_between(curves))
  assert budget.evals_range(("a",), 50) == "3.290-3.300"
  monkeypatch.setattr(
    budget, "_curve", _curves({f"{budget.BUDGET_RUNS}/a": ([800, 850], [3.281, 3.3])})
  )
  assert budget.lowest("a") == "3.281 at step 800"
  metrics = [{"step": 930, "train/loss": 3.8921}, {"step": 940, "train/loss": 6.5832}]
  monkeypatch.setattr(budget, "_metrics", lambda run: metrics)
  assert budget.train_loss_at("a", 940) == "6.583"
  monkeypatch.setattr(budget, "run_summary", lambda run: {"wall_seconds": 5760})
  assert budget.wall_minutes("a") == "96"
