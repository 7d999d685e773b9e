"""The gate's controls (resnorm_jax/analysis/claims/gate.py): the conclusion is a rule on the
cells' odds, not typed; the generated section of docs/stabilizers/README.md fails its check
when the cells change under it."""

from resnorm_jax.analysis.claims import gate, readme


def _cell(variant, kept, seeds):
  return {"variant": variant, "num_layers": "12", "lr": "1e-3", "escaped_for_good": str(kept),
          "seeds": str(seeds), "first_passages": ""}  # fmt: skip


PLAIN, GATE = _cell("postnorm", 0, 12), _cell("postnorm-attngate", 12, 12)


def test_a_halving_that_keeps_like_the_gate_is_a_smaller_branch():
  have = {"postnorm": PLAIN, "postnorm-attngate": GATE,
          "postnorm-attnscale": _cell("postnorm-attnscale", 11, 12)}  # fmt: skip
  assert gate.verdict(have).startswith("**A smaller attention branch at init is enough.**")


def test_a_halving_that_keeps_like_plain_leaves_the_gate():
  have = {"postnorm": PLAIN, "postnorm-attngate": GATE,
          "postnorm-attnscale": _cell("postnorm-attnscale", 1, 12)}  # fmt: skip
  assert gate.verdict(have).startswith("**The gate, not its scale.**")


def test_between_the_two_is_both_and_the_other_controls_add_clauses():
  have = {
    "postnorm": PLAIN, "postnorm-attngate": GATE,
    "postnorm-attnscale": _cell("postnorm-attnscale", 6, 12),
    "postnorm-gatefrozen": _cell("postnorm-gatefrozen", 5, 12),
  }  # fmt: skip
  text = gate.verdict(have)
  assert text.startswith("**Both, in part.**")
  assert "frozen at its init" in text and "5/12" in text


def test_too_few_seeds_decide_nothing():
  have = {"postnorm": PLAIN, "postnorm-attngate": GATE,
          "postnorm-attnscale": _cell("postnorm-attnscale", 3, 3)}  # fmt: skip
  assert gate.verdict(have) == "Not decided: the 0.5-scale control needs 4 seeds."
  no_effect = {"postnorm": PLAIN, "postnorm-attngate": _cell("postnorm-attngate", 1, 12)}
  assert gate.verdict(no_effect).startswith("Not decided: gated attention's odds")


def test_the_docs_section_is_checked_against_its_cells(monkeypatch):
  assert readme.check_docs() == []
  real = gate.cells()
  seeds = str(int(real["postnorm-attngate"]["seeds"]) + 1)
  changed = dict(real, **{"postnorm-attngate": {**real["postnorm-attngate"], "seeds": seeds}})
  monkeypatch.setattr(gate, "cells", lambda: changed)
  problems = readme.check_docs()
  assert problems and any("stabilizers/README.md" in p for p in problems)


def _at(lr, kept, seeds):
  return {"escaped_for_good": str(kept), "seeds": str(seeds)}


def test_the_edge_is_the_largest_lr_kept_on_half_its_seeds_and_says_what_brackets_it():
  assert gate.edge({5e-4: _at(5e-4, 11, 12), 1e-3: _at(1e-3, 0, 12)}) == (
    "5e-4 (bracketed by 1e-3)"
  )
  # 2 of 4 is half: it holds; nothing larger ran
  assert gate.edge({1e-3: _at(1e-3, 5, 5), 2e-3: _at(2e-3, 2, 4)}) == (
    "2e-3 (open above: no larger lr run)"
  )
  # a cell under 4 seeds is not read, either way
  assert gate.edge({1e-3: _at(1e-3, 4, 4), 4e-3: _at(4e-3, 3, 3)}) == (
    "1e-3 (open above: no larger lr run)"
  )
  assert gate.edge({1e-3: _at(1e-3, 1, 12)}) == "below every lr run"
  assert gate.edge({1e-3: _at(1e-3, 1, 2)}) == "not run on 4 seeds"


def test_the_where_table_pairs_each_cell_and_tests_it(monkeypatch):
  plain, gated = _cell("postnorm", 0, 12), _cell("postnorm-attngate", 5, 5)
  cells = {(12, 1e-3): {"plain": plain, "gate": gated},
           (12, 4e-3): {"gate": _cell("postnorm-attngate", 1, 4)}}  # fmt: skip
  monkeypatch.setattr(gate, "where_cells", lambda: cells)
  text = gate.render_where()
  assert "| 12 | 1e-3 | 0/12 | 0.00-0.26 | 5/5 | 0.48-1.00 | 0.00016 |" in text
  assert "| 12 | 4e-3 | not run |  | 1/4 | 0.01-0.81 |  |" in text
  assert "- 12 layers, gated attention: 1e-3 (bracketed by 4e-3)" in text


def test_the_shakespeare_cells_join_the_where_table_as_their_own_rows(monkeypatch):
  planted = [
    {**_cell("shakespeare-postnorm", 0, 4), "lr": "1e-3"},
    {**_cell("shakespeare-postnorm-attngate", 4, 4), "lr": "1e-3"},
    {**_cell("postnorm-attngate", 4, 4), "lr": "1e-3"},  # another corpus's: not this table's
  ]
  monkeypatch.setattr(gate, "optional", lambda path: planted if "shakespeare" in path else [])
  assert gate.corpus_rows() == [
    "| 12 (Shakespeare) | 1e-3 | 0/4 | 0.00-0.60 | 4/4 | 0.40-1.00 | 0.029 |"
  ]


def test_the_short_edge_is_the_lr_a_bound_below_or_not_run():
  assert gate.edge_short({5e-4: _at(5e-4, 11, 12), 1e-3: _at(1e-3, 0, 12)}) == "5e-4"
  assert gate.edge_short({2.5e-4: _at(2.5e-4, 1, 12), 1.25e-4: _at(1.25e-4, 5, 12)}) == ("<1.25e-4")
  assert gate.edge_short({1e-3: _at(1e-3, 1, 3)}) == "not run"


def _deep(variant, kept, seeds):
  return {**_cell(variant, kept, seeds), "num_layers": "24", "lr": "4e-3"}


def test_the_deepnorm_row_pairs_the_gate_with_deepnorm_alone_from_survival(monkeypatch):
  alone = _deep("deepnorm", 6, 12)
  monkeypatch.setattr(gate, "survival_cells", lambda: [alone, _deep("postnorm", 0, 12)])
  monkeypatch.setattr(gate, "optional", lambda path: [_deep("deepnorm-attngate", 4, 4)])
  cells = gate.deepnorm_cells()
  assert cells == {(24, 4e-3): {"plain": alone, "gate": _deep("deepnorm-attngate", 4, 4)}}
  monkeypatch.setattr(gate, "where_cells", lambda: {})
  text = gate.render_where()
  assert "| 24 (DeepNorm) | 4e-3 | 6/12 | 0.21-0.79 | 4/4 | 0.40-1.00 | 0.23 |" in text
  said = "- 24 layers, 4e-3, the gate with DeepNorm: no difference detected from DeepNorm alone"
  assert said in text
  assert "- 24 layers, DeepNorm: 4e-3 (open above: no larger lr run)" in text
  assert "- 24 layers, DeepNorm with the gate: 4e-3 (open above: no larger lr run)" in text


def test_whether_the_gate_adds_to_deepnorm_is_read_only_at_4_seeds_and_by_fisher():
  key = (24, 4e-3)
  alone = _deep("deepnorm", 1, 12)
  few = gate.combines(key, {"plain": alone, "gate": _deep("deepnorm-attngate", 3, 3)})
  assert few.endswith("not read until both have 4 seeds")
  more = gate.combines(key, {"plain": alone, "gate": _deep("deepnorm-attngate", 8, 8)})
  assert "adds to DeepNorm (8/8 kept against 1/12, Fisher p" in more
  less = gate.combines(key, {"plain": _deep("deepnorm", 12, 12),
                             "gate": _deep("deepnorm-attngate", 0, 8)})  # fmt: skip
  assert "takes away from DeepNorm" in less
  assert gate.combines(key, {"gate": _deep("deepnorm-attngate", 2, 4)}).endswith(
    "DeepNorm alone not run there"
  )
