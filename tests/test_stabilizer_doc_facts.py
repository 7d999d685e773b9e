"""docs/stabilizers/README.md's named facts (claims/stabilizers.py's DOC_FACTS) that read
several runs at once: each formula on fake run folders or cells, and which runs each fact of
the page reads."""

import pytest

from conftest import write_run_folder
from resnorm_jax.analysis.claims import docs_data
from resnorm_jax.analysis.claims import stabilizers as stab


@pytest.fixture
def runs(tmp_path, monkeypatch):
  """Writes run folders under a fake checkout: {'<path>-s0': final eval loss or None}."""
  monkeypatch.setattr(docs_data, "ROOT", str(tmp_path))

  def write(losses: dict[str, float | None]) -> None:
    for run, loss in losses.items():
      write_run_folder(tmp_path / run, summary={"final_eval_loss": loss})

  return write


def _cell(variant, layers, lr, seeds, escaped):
  return {"variant": variant, "num_layers": str(layers), "lr": lr, "seeds": str(seeds),
          "escaped": str(escaped), "escaped_for_good": "0"}  # fmt: skip


def test_plain_escaped_counts_the_seeds_of_plain_post_ln_edge_cell_that_escaped(monkeypatch):
  cells = [
    _cell("postnorm", 12, "0.0005", 12, 11),  # another lr
    _cell("postnorm", 24, "0.001", 4, 0),  # another depth
    _cell("postnorm-attngate", 12, "0.001", 12, 12),  # another variant
    _cell("postnorm", 12, "0.001", 12, 3),
  ]
  monkeypatch.setattr(stab, "survival_cells", lambda: cells)
  assert stab.plain_escaped() == "3 of 12"
  assert stab.plain_never() == "9 of plain Post-LN's 12 seeds"


def test_apart_is_the_nearest_and_farthest_seeds_and_the_side(runs):
  runs({"a-s0": 1.50, "a-s1": 1.52, "a-s2": 1.47,
        "b-s0": 1.70, "b-s1": 1.74, "b-s2": 1.71,
        "c-s0": 1.7801, "c-s1": 1.7602,
        "d-s0": 1.8321})  # fmt: skip
  # nearest: 1.70 - 1.52; farthest: 1.74 - 1.47
  assert stab.apart(("a-s0..2",), "b-s0..2") == "0.18-0.27 below"
  assert stab.apart(("b-s0..2",), "a-s0..2") == "0.18-0.27 above"
  # spans pooled: nearest 1.7602 - 1.74, farthest 1.8321 - 1.70
  assert stab.apart(("c-s0..1", "d-s0..0"), "b-s0..2", 3) == "0.020-0.132 above"
  assert stab.apart(("d-s0..0",), "c-s0..0", 4) == "0.0520 above"  # one seed each: one number
  assert stab.apart(("a-s0..1",), "a-s1..2") == "overlapping"
  # pooled, one span below and one above: no side
  assert stab.apart(("a-s0..2", "d-s0..0"), "b-s0..2") == "overlapping"
  assert stab.apart(("a-s0..3",), "b-s0..2") == "not run"
  assert stab.apart(("a-s0..2",), "b-s0") == "not run"  # no span


def test_apart_reads_no_unfinished_seed(runs):
  runs({"a-s0": 1.5, "a-s1": None, "b-s0": 1.7})
  assert docs_data.seed_losses("a-s0..0") == [1.5]
  assert docs_data.seed_losses("a-s0..1") is None
  assert stab.apart(("a-s0..1",), "b-s0..0") == "not run"


def test_largest_gap_is_the_farthest_seed_0_from_plain_pre_ln_at_each_lr(runs):
  plain = lambda lr: f"{stab.PLAIN_RUNS}/prenorm-L6-lr{lr}-s0"  # noqa: E731
  mine = lambda key, lr: f"{stab.STAB_RUNS}/prenorm-{key}-L6-lr{lr}-s0"  # noqa: E731
  runs({plain("0.001"): 2.01911, plain("0.002"): 1.83657,
        mine("x", "0.001"): 1.96556, mine("x", "0.002"): 1.85,
        mine("y", "0.001"): 2.03, mine("y", "0.002"): 1.7666,
        mine("x", "0.001").replace("-s0", "-s1"): 1.5})  # fmt: skip
  # each loss to 4 decimals first; the largest is y's at 2e-3, |1.7666 - 1.8366|; seed 1 unread
  assert stab.largest_gap(("x", "y"), ("0.001", "0.002")) == "0.0700"
  assert stab.largest_gap(("x",), ("0.001", "0.002")) == "0.0535"
  assert stab.largest_gap(("x",), ("0.001",), digits=3) == "0.053"  # 1.966 - 2.019
  assert stab.largest_gap(("x", "z"), ("0.001",)) == "not run"
  assert stab.largest_gap(("x",), ("0.004",)) == "not run"


S, P = "docs/stabilizers/runs/prenorm-", "docs/lr_sensitivity/runs/prenorm-"


@pytest.mark.parametrize(
  "name, function, args",
  [
    ("stabilizers.L6.lr0.004.above_plain", stab.apart,
     ((f"{S}adamatan2-L6-lr0.004-s0..2", f"{S}qknorm-L6-lr0.004-s0..2"),
      f"{P}L6-lr0.004-s0..2", 3)),
    ("stabilizers.L6.muon.below_plain", stab.apart,
     ((f"{S}muon-L6-lr0.008-s0..2",), f"{P}L6-lr0.004-s0..2")),
    ("stabilizers.L6.lr0.032.qknorm.below_plain", stab.apart,
     ((f"{S}qknorm-L6-lr0.032-s0..2",), f"{P}L6-lr0.032-s0..2")),
    ("stabilizers.L6.lr0.032.softcap.below_plain", stab.apart,
     ((f"{S}softcap-L6-lr0.032-s0..2",), f"{P}L6-lr0.032-s0..2")),
    ("stabilizers.L6.lr0.032.attngate.below_plain", stab.apart,
     ((f"{S}attngate-L6-lr0.032-s0..2",), f"{P}L6-lr0.032-s0..2")),
    ("stabilizers.L24.muon.below_plain", stab.apart,
     ((f"{S}muon-L24-lr0.008-s0..0",), f"{P}L24-lr0.004-s0..4")),
    ("stabilizers.L6.low_lrs.largest_gap", stab.largest_gap,
     (("adamatan2", "attngate", "qknorm", "sinks", "softcap", "zloss"),
      ("0.000125", "0.00025", "0.0005", "0.001"))),
    ("stabilizers.L6.lr0.0005-0.001.near_plain", stab.largest_gap,
     (("sinks", "softcap", "zloss"), ("0.0005", "0.001"))),
  ],
)  # fmt: skip
def test_each_named_fact_of_the_page_reads_the_runs_its_sentence_names(name, function, args):
  path, fact = stab.DOC_FACTS[name]
  assert path == stab.README
  assert (fact.func, fact.args) == (function, args)
  with open(stab.README) as f:
    assert f"<!-- fact:{name} -->" in f.read()


def _curve(stab, depth, lr, seed, loss):
  """A row of curves.csv as docs_data.optional reads it: every column a string."""
  return {"stabilizer": stab, "num_layers": str(depth), "opt.lr": f"{lr:g}", "seed": str(seed),
          "final_eval_loss": f"{loss:.4f}"}  # fmt: skip


def test_the_loss_vs_lr_sections_render_curves_csv_between_their_markers(monkeypatch):
  rows = [_curve("none", 24, 0.002, s, v) for s, v in enumerate((1.7552, 1.7480, 1.7750))]
  rows += [_curve("none", 24, 0.004, 0, 1.7327), _curve("qknorm", 24, 0.004, 0, 1.7535),
           _curve("qknorm", 24, 0.008, 0, 1.7537), _curve("muon", 24, 0.004, 0, 1.4725),
           _curve("muon", 24, 0.008, 0, 1.4361), _curve("muon", 6, 0.004, 0, 1.5700),
           _curve("muon", 6, 0.008, 0, 1.5381), _curve("muon", 6, 0.008, 1, 1.5473),
           _curve("none", 6, 0.008, 0, 1.8179), _curve("none", 6, 0.008, 1, 1.7940)]  # fmt: skip
  read = []
  monkeypatch.setattr(stab, "optional", lambda path: read.append(path) or rows)
  assert stab.render_curves(24).splitlines() == [
    stab.CURVES_24_BEGIN,
    "| stabilizer (lr) | 0.002 | 0.004 | 0.008 | best lr |",
    "| --- | --- | --- | --- | --- |",
    "| Pre-LN | 1.7552 | **1.7327** |  | >= 0.004 |",
    "| Pre-LN, its seeds' range (n) | 1.7480-1.7750 (3) |  |  | |",
    "| Muon |  | 1.4725 | **1.4361** | >= 0.008 |",
    "| qk-norm |  | **1.7535** | 1.7537 | <= 0.004 |",
    stab.CURVES_24_END,
  ]
  assert stab.render_muon_curve().splitlines() == [
    stab.MUON_CURVE_BEGIN,
    "| lr | 4e-3 | 8e-3 |",
    "| --- | --- | --- |",
    "| final eval loss | 1.5700 | 1.5381 |",
    stab.MUON_CURVE_END,
  ]
  assert stab.render_muon_depth().splitlines() == [
    stab.MUON_DEPTH_BEGIN,
    "| depth, parametrization | 4e-3 | 8e-3 | best lr |",
    "| --- | --- | --- | --- |",
    "| 6 layers (either) | 1.5700 | **1.5381** | >= 8e-3 |",
    "| 24 layers, sp | 1.4725 | **1.4361** | >= 8e-3 |",
    stab.MUON_DEPTH_END,
  ]
  assert stab.render_curve_seeds().splitlines() == [
    stab.CURVE_SEEDS_BEGIN,
    "| stabilizer | layers | lr | seeds | final eval loss | Pre-LN's seeds | Pre-LN | apart |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    "| Muon | 6 | 0.008 | 2 | 1.5381-1.5473 | 2 | 1.7940-1.8179 | yes |",
    stab.CURVE_SEEDS_END,
  ]
  assert set(read) == {stab.CURVES}
  assert stab.render_curves(6).splitlines() == [
    stab.CURVES_6_BEGIN,
    "| stabilizer (lr) | 0.004 | 0.008 | best lr |",
    "| --- | --- | --- | --- |",
    "| Pre-LN |  | 1.8179 |  |",  # one point: no bold, no best
    "| Pre-LN, its seeds' range (n) |  | 1.7940-1.8179 (2) | |",
    "| Muon | 1.5700 | **1.5381** | >= 0.008 |",
    stab.CURVES_6_END,
  ]
  rows[:] = []  # no curves.csv: the markers alone
  assert stab.render_curves(6) == f"{stab.CURVES_6_BEGIN}\n{stab.CURVES_6_END}"
  assert stab.render_muon_depth() == f"{stab.MUON_DEPTH_BEGIN}\n{stab.MUON_DEPTH_END}"


CURVE_SECTIONS = {
  "Muon curve 6 layers": "| final eval loss | 2.4503 |",
  "Muon across depth": "| 24 layers, CompleteP | 1.4749 |",
  "stabilizer curves 6 layers": "| qk-norm | 2.3892 |",
  "stabilizer curves seeds": "| qk-norm | 6 | 0.032 | 3 | 2.0007-2.0368 |",
  "stabilizer curves 24 layers": "| Pre-LN, its seeds' range (n) |  |  |  |  | 1.7480-1.7750 (3) |",
}


@pytest.mark.parametrize("name, cell", CURVE_SECTIONS.items())
def test_each_loss_vs_lr_table_of_the_page_is_checked_and_a_changed_cell_is_reported(
  tmp_path, name, cell
):
  """Each table is a section of readme.check_docs (DOC_SECTIONS): the page agrees with
  curves.csv, and a copy of it with one cell changed fails the check, naming the line."""
  from resnorm_jax.analysis import doc_sections
  from resnorm_jax.analysis.claims import readme

  (section,) = [s for s in stab.DOC_SECTIONS if s[1].startswith(f"<!-- {name}: ")]
  assert section in readme.DOC_SECTIONS and section[0] == stab.README
  assert doc_sections.check(stab.README, [section]) == []
  with open(stab.README) as f:
    text = f.read()
  assert text.count(cell) == 1  # the cell is the page's, once
  changed = cell[: -len(cell.rsplit(" | ", 1)[1])] + "9.9999 |"
  copy = tmp_path / "README.md"
  copy.write_text(text.replace(cell, changed))
  problems = doc_sections.check(str(copy), [section])
  assert any(p.startswith("-|") and changed in p for p in problems)  # the page's line
  assert any(p.startswith("+|") and cell in p for p in problems)  # curves.csv's


def test_check_docs_reports_the_page_when_curves_csv_changes_under_it(monkeypatch):
  from resnorm_jax.analysis.claims import readme

  real = stab.optional
  rows = [dict(r) for r in real(stab.CURVES)]
  plain = next(r for r in rows if (r["stabilizer"], r["num_layers"], r["opt.lr"], r["seed"])
               == ("none", "24", "0.002", "2"))  # fmt: skip
  plain["final_eval_loss"] = "1.7000"  # a seed below the others: the 24-layer range moves
  monkeypatch.setattr(stab, "optional", lambda path: rows if path == stab.CURVES else real(path))
  problems = [p for p in readme.check_docs() if "1.7000-1.7552 (3)" in p]
  assert problems == [
    "+| Pre-LN, its seeds' range (n) |  |  |  |  | 1.7000-1.7552 (3) | 1.6650-1.7327 (5) | "
    "1.8117-1.8472 (3) |  | 2.7650-2.8130 (3) | |"
  ]
