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
