"""The named facts of the width, second-corpus, depth-transfer and mHC-divided-Sinkhorn pages
(each page's claims module's DOC_FACTS): each function's text from small fake rows, and every
declared fact stated on its page. No JAX."""

import os
import re

import pytest

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims import (
  corpus,
  depth_transfer,
  docs_data,
  lr_sensitivity_facts,
  readme,
)
from resnorm_jax.analysis.claims import width as width_claims

MODULES = (width_claims, corpus, depth_transfer, lr_sensitivity_facts)


def _reader(monkeypatch, module, tables: dict[str, list[dict[str, str]]]) -> None:
  """The module's `read` answers from `tables` (by path) and fails on any other file."""
  monkeypatch.setattr(module, "read", lambda path: tables[path])


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_declared_fact_is_collected_and_stated_on_its_page(module):
  (page,) = {path for path, _ in module.DOC_FACTS.values()}  # one page per module
  assert os.path.normpath(page) in readme.doc_fact_files()
  stated = {m.group(1) for m in doc_sections.FACT.finditer(open(page).read())}
  for name in module.DOC_FACTS:
    assert readme.DOC_FACTS[name][0] == page and re.fullmatch(r"[\w.:/=-]+", name)
    assert name in stated, f"{name} is declared but not stated on {page}"


# --- docs/lr_sensitivity/mhc_divided_sinkhorn/README.md --------------------------------------


def test_mhc_divided_facts_read_each_runs_summary_in_order(monkeypatch):
  summaries = {
    lr_sensitivity_facts.MHC_DIVIDED_RUNS[0]: {"diverged_step": 1413, "final_train_loss": 2.40751},
    lr_sensitivity_facts.MHC_DIVIDED_RUNS[1]: {"diverged_step": 66, "final_train_loss": 2.7964},
  }
  monkeypatch.setattr(lr_sensitivity_facts, "run_summary", summaries.__getitem__)
  assert lr_sensitivity_facts.mhc_divided_steps() == "1,413 and 66"
  assert lr_sensitivity_facts.mhc_divided_train_losses() == "2.408 and 2.796"


# --- docs/second_corpus/README.md ------------------------------------------------------------


def _corpus_row(variant, data, lr, seed, outcome, baseline="3.34749"):
  return {"variant": variant, "data": data, "opt.lr": str(lr), "seed": str(seed),
          "outcome": outcome, "baseline": baseline}  # fmt: skip


def test_second_corpus_counts_best_lr_no_context_and_walls(monkeypatch):
  shakespeare, stdlib = corpus.CORPORA["shakespeare"], corpus.CORPORA["stdlib"]
  rows = [
    _corpus_row("postnorm", shakespeare, 0.0005, 0, "trained"),
    _corpus_row("postnorm", shakespeare, 0.0005, 1, "stuck"),
    _corpus_row("postnorm", shakespeare, 0.0005, 2, "trained"),
    _corpus_row("postnorm", shakespeare, 0.001, 0, "diverged"),
    _corpus_row("postnorm", stdlib, 0.0005, 0, "stuck", baseline="3.23831"),
    _corpus_row("deepnorm", shakespeare, 0.0005, 0, "stuck"),
  ]
  edges = [
    {"variant": "deepnorm", "data": stdlib, "best_lr": "0.004"},
    {"variant": "deepnorm", "data": shakespeare, "best_lr": "0.00025"},
  ]
  _reader(monkeypatch, corpus, {corpus.RESULTS: rows, corpus.EDGES: edges})
  assert corpus.outcome_count("trained", "postnorm", "shakespeare", 5e-4) == "2 of 3"
  assert corpus.outcome_count("stuck", "postnorm", "shakespeare", 5e-4) == "1 of 3"
  assert corpus.outcome_count("trained", "postnorm", "stdlib", 5e-4) == "0 of 1"
  assert corpus.best_lr("deepnorm", "stdlib") == "4e-3"
  assert corpus.best_lr("deepnorm", "shakespeare") == "2.5e-4"
  assert corpus.no_context("shakespeare") == "3.347"
  assert corpus.no_context("stdlib") == "3.238"
  assert corpus.diverged("shakespeare") == "1 of 5"
  monkeypatch.setattr(corpus, "_wall_seconds", lambda: {"a": 221.0, "b": 379.0, "c": 300.0})
  assert corpus.wall_range() == "4-6"


# --- docs/depth_transfer/README.md -----------------------------------------------------------


def _best_row(variant, param, depth, lr, loss, lr3, lr5):
  return {"variant": variant, "depth_param": param, "num_layers": str(depth),
          "grid_best_lr": str(lr), "grid_best_loss": str(loss), "best_lr_3pt": str(lr3),
          "best_lr_5pt": str(lr5)}  # fmt: skip


def test_depth_transfer_best_lr_facts(monkeypatch):
  rows = [
    _best_row("prenorm", "completep", 6, 0.004, 1.75881, 0.0041285, 0.0033408),
    _best_row("prenorm", "completep", 12, 0.004, 1.68192, 0.0043479, 0.0031019),
    _best_row("prenorm", "completep", 24, 0.008, 1.63169, 0.0039781, 0.0030493),
    _best_row("postnorm", "completep", 6, 0.002, 1.87843, 0.0014965, 0.00083),
    _best_row("postnorm", "completep", 12, 0.002, 1.77052, 0.0015193, 0.00096),
  ]
  _reader(monkeypatch, depth_transfer, {depth_transfer.BEST_LR: rows})
  assert depth_transfer.sig_lr(0.0031019) == "3.10e-3"
  assert depth_transfer.sig_lr(0.0090603, 2) == "9.1e-3"
  assert depth_transfer.grid_lr("prenorm", "completep", 24) == "8e-3"
  assert depth_transfer.grid_loss("prenorm", "completep", 12) == "1.682"
  assert depth_transfer.vertex_lr("best_lr_3pt", "prenorm", "completep", 6) == "4.13e-3"
  assert depth_transfer.vertex_lr("best_lr_5pt", "prenorm", "completep", 12) == "3.10e-3"
  assert depth_transfer.vertex_lr("best_lr_5pt", "prenorm", "completep", 12, 2) == "3.1e-3"
  assert depth_transfer.vertex_lr("best_lr_3pt", "postnorm", "completep", 6) == "1.50e-3"
  assert depth_transfer.grid_lrs("postnorm", "completep") == "2e-3 at every depth"
  assert (
    depth_transfer.grid_lrs("prenorm", "completep") == "4e-3, 4e-3 and 8e-3 at 6, 12 and 24 layers"
  )
  assert depth_transfer.vertex_span("prenorm", "completep") == "3.0e-3 to 3.3e-3"


def test_depth_transfer_slopes(monkeypatch):
  rows = [
    {"variant": "prenorm", "depth_param": "sp", "fit": "3pt", "slope": "-0.18851",
     "slope_se": "0.2236"},
    {"variant": "prenorm", "depth_param": "sp", "fit": "5pt", "slope": "-0.05186",
     "slope_se": "0.04629"},
    {"variant": "prenorm", "depth_param": "depth_mup", "fit": "5pt", "slope": "0.39038",
     "slope_se": "0.03744"},
  ]  # fmt: skip
  _reader(monkeypatch, depth_transfer, {depth_transfer.SLOPES: rows})
  assert depth_transfer.slope("prenorm", "depth_mup", "5pt") == "+0.390 +- 0.037"
  assert depth_transfer.slope("prenorm", "sp", "3pt") == "-0.189 +- 0.224"
  assert depth_transfer.slope_value("prenorm", "sp", "3pt", 1) == "-0.2"
  assert depth_transfer.slope_value("prenorm", "sp", "5pt", 2) == "-0.05"
  assert depth_transfer.slope_se("prenorm", "sp", "5pt") == "0.046"


def test_depth_transfer_counts_read_sp_from_the_lr_grid_and_the_rest_from_this_study(monkeypatch):
  def run(variant, depth, lr, outcome, param=None):
    row = {"variant": variant, "num_layers": str(depth), "opt.lr": str(lr), "outcome": outcome}
    return row if param is None else {**row, "depth_param": param}

  sp = [run("postnorm", 12, 0.0005, o) for o in ("trained", "stuck", "trained")]
  study = [
    run("postnorm", 12, 0.0005, "stuck", "sp"),  # this study's copy of sp's rows is not read
    *(run("postnorm", 12, 0.0005, o, "completep") for o in ("trained", "trained", "stuck")),
    run("postnorm", 24, 0.0005, "trained", "completep"),
  ]
  _reader(
    monkeypatch,
    depth_transfer,
    {depth_transfer.SP_RESULTS: sp, depth_transfer.RESULTS: study},
  )
  assert depth_transfer.outcome_count("trained", "postnorm", "sp", 12, 5e-4) == "2 of 3"
  assert depth_transfer.outcome_count("trained", "postnorm", "completep", 12, 5e-4) == "2 of 3"
  assert depth_transfer.outcome_count("stuck", "postnorm", "completep", 12, 5e-4) == "1 of 3"


def test_depth_transfer_largest_seed_spread_and_wall_median(monkeypatch):
  def spread(variant, depth, lr, std, param=None):
    row = {"variant": variant, "num_layers": str(depth), "opt.lr": str(lr), "final_eval_std": std}
    return row if param is None else {**row, "model.depth_param": param}

  ours = [spread("prenorm", 24, 0.008, "0.0237", "completep"), spread("postnorm", 12, 0.002,
          "0.09", "completep")]  # fmt: skip
  sp = [spread("prenorm", 6, 0.008, "0.0328"), spread("prenorm", 6, 0.032, "0.05")]
  paths = depth_transfer.SEED_SPREADS
  _reader(monkeypatch, depth_transfer, {paths[0]: ours, paths[1]: sp})
  # Post-LN's cell and Pre-LN's at 3.2e-2 (off this grid) are not counted
  assert depth_transfer.largest_seed_spread() == (
    "0.033 in standard deviation (sp at 6 layers and 8e-3)"
  )
  ours[0]["final_eval_std"] = "0.04"
  assert depth_transfer.largest_seed_spread() == (
    "0.040 in standard deviation (CompleteP at 24 layers and 8e-3)"
  )
  walls = {"a-L24-lr1-s0": 700.0, "b-L24-lr2-s0": 780.0, "c-L24-lr3-s1": 4000.0,
           "d-L48-lr1-s0": 1000.0, "e-L12-lr1-s0": 290.0}  # fmt: skip
  monkeypatch.setattr(depth_transfer, "_wall_seconds", lambda: walls)
  assert depth_transfer.wall_median(24) == "13"  # 780 s, the middle of three
  assert depth_transfer.wall_median(12) == "5"


# --- docs/width/README.md --------------------------------------------------------------------


def _width_run(name, variant, d, lr, outcome, seed=0, peak="", rms="", baseline="3.2383"):
  return {"name": name, "variant": variant, "d_model": str(d), "opt.lr": str(lr),
          "seed": str(seed), "outcome": outcome, "attn_logit_max_peak": peak,
          "output_logit_rms_peak": rms, "baseline": baseline}  # fmt: skip


@pytest.fixture
def width_tables(monkeypatch):
  sp = [
    _width_run("d-128-a-s0", "deepnorm", 128, 0.001, "stuck", 0, "14.48", "6.5177"),
    _width_run("d-128-a-s1", "deepnorm", 128, 0.001, "stuck", 1, "16.3", "8.29"),
    _width_run("d-128-a-s2", "deepnorm", 128, 0.001, "trained", 2, "23.2", "6.76"),
    _width_run("d-128-b-s0", "deepnorm", 128, 0.016, "stuck", 0, "490.389", "12.344"),
    _width_run("p-128-c-s0", "prenorm", 128, 0.008, "trained", 0, "1425.468", "10.68"),
    _width_run("p-128-c-s1", "prenorm", 128, 0.008, "trained", 1, "1483.9", "10.85"),
    _width_run("p-128-c-s2", "prenorm", 128, 0.008, "diverged", 2, "1765.47", "11.2"),
    _width_run("p-256-c-s0", "prenorm", 256, 0.008, "trained", 0, "5.894", "8.4457"),
  ]
  mup = [_width_run("p-128-mup-c-s0", "prenorm", 128, 0.008, "trained", 0, "67.43", "9.3")]
  edges = [
    {"variant": "postnorm", "d_model": "128", "best_lr": "0.00025", "best_loss": "2.2581770",
     "boundary_lr": "0.00025", "failing_lr": "0.0005"},
    {"variant": "postnorm", "d_model": "256", "best_lr": "0.000125", "best_loss": "2.1294",
     "boundary_lr": "0.000125", "failing_lr": "0.0005"},
  ]  # fmt: skip
  mup_edges = [{"variant": "postnorm", "d_model": "128", "best_lr": "0.0005"}]
  E, R = width_claims.EDGES, width_claims.RESULTS
  tables = {R[False]: sp, R[True]: mup, E[False]: edges, E[True]: mup_edges}
  _reader(monkeypatch, width_claims, tables)
  return tables


def test_width_edges_facts(width_tables):
  w = width_claims
  assert w.edges_lr("best_lr", "postnorm", 256) == "1.25e-4"
  assert w.edges_lr("boundary_lr", "postnorm", 128) == "2.5e-4"
  assert w.edges_lr("failing_lr", "postnorm", 128) == "5e-4"
  assert w.edges_lr("best_lr", "postnorm", 128, True) == "5e-4"  # muP's edges.csv
  assert w.best_loss("postnorm", 128) == "2.258"


def test_width_counts_and_no_context(width_tables):
  w = width_claims
  assert w.outcome_count("trained", "deepnorm", 128, 1e-3) == "1 of 3"
  assert w.outcome_count("stuck", "deepnorm", 128, 1e-3) == "2 of 3"
  assert w.outcome_count("trained", "deepnorm", 64, 1e-3) == "0 of 0"
  assert w.diverged(128) == "1 of 7"
  assert w.diverged(256) == "0 of 1"
  assert w.diverged(None, True) == "0 of 1"
  assert w.no_context(128) == "3.238"
  width_tables[w.RESULTS[False]][0]["baseline"] = "3.3"
  assert w.no_context(128) == "3.238 / 3.300"


def test_width_logit_facts(width_tables):
  w = width_claims
  assert w.peak("p-128-c-s0") == "1,425"
  assert w.peak("p-256-c-s0") == "5.9"  # one decimal under 10
  assert w.peak("p-128-mup-c-s0") == "67"  # muP's results.csv
  assert w.rms("p-256-c-s0") == "8.4"
  assert w.peak_range("p-128-c-s0..2") == "1,425-1,765"
  assert w.stuck_range("attn_logit_max_peak", "deepnorm", 128) == "14-490"
  assert w.stuck_range("output_logit_rms_peak", "deepnorm", 128) == "6.5-12.3"
  assert w.peak_ratio("p-128-c-s0", "p-128-mup-c-s0") == "21"
  assert w.peak_ratio("p-128-mup-c-s0", "p-256-c-s0") == "11"


def test_width_wall_ranges_leave_the_paused_runs_out(tmp_path, monkeypatch):
  from conftest import write_run_folder

  walls = {
    "postnorm-L12-d128-lr0.0005-s0": 836.0,
    "postnorm-L12-d128-lr0.0005-s1": 795.0,
    "postnorm-L12-d128-lr0.0005-s2": 1445.0,
    "prenorm-L12-d128-mup-lr0.008-s0": 2056.0,  # paused
    "prenorm-L12-d128-mup-lr0.004-s0": 798.0,
    "deepnorm-L12-d256-lr0.0005-s0": 3295.0,  # paused
    "deepnorm-L12-d256-lr0.001-s0": 2279.0,
    "prenorm-L12-d256-lr0.002-s0": 2597.0,
  }
  for name, seconds in walls.items():
    write_run_folder(tmp_path / "docs" / "width" / "runs" / name, summary={"wall_seconds": seconds})
  monkeypatch.setattr(width_claims, "ROOT", str(tmp_path))
  monkeypatch.setattr(docs_data, "ROOT", str(tmp_path))
  assert width_claims.wall_seconds(width_claims.RUNS) == walls
  assert width_claims.wall_range("d128", "min") == "13-24"
  assert width_claims.wall_range("tier1", "min") == "14-14"  # seed 0, sp
  assert width_claims.wall_range("tier2", "s") == "795-1,445"
  assert width_claims.wall_range("mup.d128", "s") == "798-798"
  assert width_claims.wall_range("tier3", "s") == "2,279-2,597"
  assert width_claims.wall_range("d256", "min") == "38-43"
