"""The README's Results section says what the committed data say (resnorm_jax/analysis/claims/;
scripts/claims.py is its command line)."""

import os
import re
import shutil

import pytest

from resnorm_jax.analysis import doc_sections
from resnorm_jax.analysis.claims import docs_data, edges, readme
from resnorm_jax.analysis.claims import stabilizers as stabilizers_claims
from resnorm_jax.analysis.claims import width as width_claims


def test_readme_results_agree_with_the_data():
  problems = readme.check()
  assert not problems, "README Results disagree with docs/ data (python scripts/claims.py "
  "--write rewrites them):\n" + "\n".join(problems)


def test_results_md_survival_section_agrees_with_the_data():
  problems = readme.check(readme.RESULTS_MD)
  assert not problems, "docs/results.md disagrees with docs/survival/ (python scripts/claims.py "
  "--write rewrites it):\n" + "\n".join(problems)


def test_a_changed_number_is_caught(tmp_path):
  copy = tmp_path / "README.md"
  shutil.copy(readme.README, copy)
  text = copy.read_text()
  body = readme.section(text)
  assert body is not None and "5e-4 (11/12 kept; 1e-3: 0/12) at 12" in body
  copy.write_text(text.replace(body, body.replace("(11/12 kept;", "(12/12 kept;")))
  problems = readme.check(str(copy))
  assert any("12/12 kept" in p for p in problems) and any("11/12 kept" in p for p in problems)


def test_the_answer_states_an_edge_only_where_the_rule_admits_it():
  """One protocol, >= 4 seeds on each side of a bracketed edge: 3 seeds, or a kept lr with no
  failing lr above it on as many seeds, leave the depth to the table."""
  from resnorm_jax.analysis.claims import lr_sensitivity as ls

  four_kept, four_stuck = ["trained", "stuck", "trained", "trained"], ["stuck"] * 4
  survival = {("postnorm", 12, 5e-4): four_kept, ("postnorm", 12, 1e-3): four_stuck}
  grid = {("postnorm", 6, 2e-3): ["trained"] * 3, ("postnorm", 6, 4e-3): ["stuck"] * 3}
  assert ls.ruled_edge((survival, grid), "postnorm", 12) == "5e-4 (3/4 kept; 1e-3: 0/4)"
  assert ls.ruled_edge((survival, grid), "postnorm", 6) is None  # 3 seeds each
  unbracketed = {("postnorm", 24, 2.5e-4): ["trained"] + ["stuck"] * 11}
  assert ls.ruled_edge((unbracketed,), "postnorm", 24) is None  # nothing above it fails


def test_missing_markers_are_named(tmp_path):
  copy = tmp_path / "README.md"
  copy.write_text("# nothing here\n")
  (problem,) = readme.check(str(copy))
  assert "no results markers" in problem


def test_edge_counts_seeds_and_says_none():
  cells = {
    ("postnorm", 12, 1e-3): ["trained", "stuck", "stuck"],
    ("postnorm", 12, 5e-4): ["trained"],
  }
  assert edges.edge(cells, "postnorm", 12) == "1e-3 (1/3 seeds)"
  assert edges.edge({("postnorm", 48, 1e-3): ["stuck"]}, "postnorm", 48) == "none"
  assert docs_data.lr_text(1.25e-4) == "1.25e-4" and docs_data.lr_text(3.2e-2) == "3.2e-2"


def test_results_cells_are_short():
  """Each full cell (docs/results.md) is at most about 250 characters; each README cell is a
  headline of about 20 words at most, its seeds and budget a few more."""
  for claim in readme.claims():
    assert all(len(c) <= 260 for c in claim.full()), [len(c) for c in claim.full()]
    assert len(claim.headline.split()) <= 32, claim.headline
    assert len(claim.seeds.split()) <= 16, claim.seeds
    assert claim.data(), f"{claim.claim}: its links cite no data file"


def _claims_in(text: str, begin: str, end: str) -> list[str]:
  """The first cell of each table row between the markers, an anchor before it dropped."""
  body = readme.section(text, begin, end)
  rows = [line for line in body.splitlines() if line.startswith("| ")][2:]  # after the head
  return [re.sub(r"<a id=[^>]*></a>", "", row.split(" | ")[0][2:]) for row in rows]


def test_the_short_and_the_full_rows_name_the_same_claims_in_the_same_order():
  """The README's short rows and docs/results.md's full rows: one claim each, in one order,
  each short row linking to its full row's anchor."""
  readme_text = open(readme.README).read()
  results_text = open(readme.RESULTS_MD).read()
  short = _claims_in(readme_text, readme.BEGIN, readme.END)
  full = _claims_in(results_text, readme.FULL_BEGIN, readme.FULL_END)
  assert short == full == [c.claim for c in readme.claims()]
  for claim in readme.claims():
    a = readme.anchor(claim)
    assert f"]({readme.RESULTS_LINK}#{a})" in readme_text
    assert f'<a id="{a}"></a>{claim.claim} |' in results_text


def _tree_with(tmp_path, changed: str) -> str:
  """A checkout whose docs/ links to the committed one's, but for its own copy of `changed`."""
  root = tmp_path / "root"
  src, dst = docs_data.ROOT, root
  for part in os.path.dirname(changed).split("/"):
    src, dst = os.path.join(src, part), dst / part
    dst.mkdir(parents=True)
    for name in os.listdir(src):
      if name not in changed.split("/"):
        (dst / name).symlink_to(os.path.join(src, name))
  shutil.copy(os.path.join(docs_data.ROOT, changed), root / changed)
  return str(root)


def test_a_changed_csv_value_fails_the_check_of_both_files(tmp_path, monkeypatch):
  """One value of a committed CSV changed (1000-layer Pre-LN's final eval loss): the check
  of the README (its short row) and of docs/results.md (its full row) each name it."""
  path = "docs/runs/results.csv"
  row = next(r for r in docs_data.read(path) if r["name"] == "prenorm-L1000-lr0.0002-w50")
  old = f"trained ({float(row['final_eval_loss']):.3f})"
  root = _tree_with(tmp_path, path)
  text = open(os.path.join(root, path)).read()
  assert text.count(row["final_eval_loss"]) == 1
  with open(os.path.join(root, path), "w") as f:
    f.write(text.replace(row["final_eval_loss"], "2.4001"))
  monkeypatch.setattr(docs_data, "ROOT", root)
  for doc in (readme.README, readme.RESULTS_MD):
    problems = readme.check(doc)
    assert any(p.startswith("-") and old in p for p in problems), (doc, problems)
    assert any(p.startswith("+") and "trained (2.400)" in p for p in problems), (doc, problems)


def test_width_row_tells_a_width_not_run_from_one_where_nothing_trained(tmp_path, monkeypatch):
  width = tmp_path / "docs" / "width"
  width.mkdir(parents=True)
  head = "variant,d_model,best_lr,failing_lr\n"
  rows = [
    "postnorm,64,0.00025,0.001", "postnorm,128,0.000125,0.0005", "postnorm,256,,0.000125",
    "prenorm,64,0.004,", "prenorm,128,0.002,", "prenorm,256,0.001,",
    "deepnorm,64,0.004,0.008", "deepnorm,128,0.0005,0.001",
  ]  # fmt: skip
  (width / "edges.csv").write_text(head + "\n".join(rows) + "\n")
  runs = [
    ("postnorm", 64, 2.5e-4, 0, "trained"), ("postnorm", 64, 1e-3, 0, "stuck"),
    ("postnorm", 64, 1e-3, 1, "trained"), ("postnorm", 64, 1e-3, 2, "stuck"),
    ("postnorm", 128, 1.25e-4, 0, "trained"), ("postnorm", 128, 5e-4, 0, "stuck"),
    ("postnorm", 256, 1.25e-4, 0, "stuck"), ("postnorm", 256, 2.5e-4, 0, "diverged"),
    ("prenorm", 64, 4e-3, 0, "trained"), ("prenorm", 64, 3.2e-2, 0, "trained"),
    ("prenorm", 128, 2e-3, 0, "trained"), ("prenorm", 256, 1e-3, 0, "trained"),
    ("deepnorm", 64, 4e-3, 0, "trained"), ("deepnorm", 64, 8e-3, 0, "stuck"),
    ("deepnorm", 128, 5e-4, 0, "trained"), ("deepnorm", 128, 1e-3, 0, "stuck"),
  ]  # fmt: skip
  # final_eval_loss: trained runs by lr (the lowest at the best), stuck ones on the plateau
  loss = {"trained": 2.0, "stuck": 3.25, "diverged": 9.0}
  lines = ["variant,d_model,opt.lr,seed,outcome,final_eval_loss"] + [
    ",".join(map(str, r)) + f",{loss[r[4]] + (0.01 if r[2] in (1e-3, 3.2e-2) else 0)}" for r in runs
  ]
  (width / "results.csv").write_text("\n".join(lines) + "\n")
  monkeypatch.setattr(docs_data, "ROOT", str(tmp_path))
  got = width_claims.row_width()
  claim, budget = got.result, got.budget
  assert "best (seed 0)/largest lr trained (k/n) at d_model 64, 128, 256: " in claim
  # 1e-3 trained on 1 of its 3 seeds at 64; nothing trained at 256; a best lr that is the
  # smallest lr run at its width is marked <= (the seed-0 rule of the muP row)
  assert "Post-LN <=2.5e-4/1e-3 (1/3), <=1.25e-4/1.25e-4, none trained;" in claim
  assert "DeepNorm <=4e-3/4e-3, <=5e-4/5e-4, not run;" in claim
  assert "Pre-LN <=4e-3/3.2e-2, <=2e-3/2e-3, <=1e-3/1e-3;" in claim
  assert "1/8 runs above 64 diverged" in claim
  assert "seed 0 (d_model 64: 0-2 next to edges)" in budget


def test_width_mup_row_best_lr_on_its_own_lrs_edge_on_shared_lrs(tmp_path, monkeypatch):
  width = tmp_path / "docs" / "width"
  (width / "mup").mkdir(parents=True)
  head = "variant,d_model,opt.lr,seed,outcome,final_eval_loss"
  mup = [
    ("postnorm", 64, 2.5e-4, 0, "trained", 2.4), ("postnorm", 64, 5e-4, 0, "trained", 2.3),
    ("postnorm", 64, 1e-3, 0, "stuck", 3.2),
    ("postnorm", 128, 5e-4, 0, "trained", 2.3), ("postnorm", 128, 1e-3, 0, "stuck", 3.2),
    ("prenorm", 64, 4e-3, 0, "trained", 1.7), ("prenorm", 64, 1.6e-2, 0, "trained", 1.9),
  ]  # fmt: skip
  sp = [
    ("postnorm", 64, 2.5e-4, 0, "trained", 2.3), ("postnorm", 64, 5e-4, 0, "trained", 2.4),
    ("postnorm", 64, 1e-3, 0, "stuck", 3.2), ("postnorm", 64, 1e-3, 1, "trained", 2.9),
    ("postnorm", 128, 5e-4, 0, "stuck", 3.2), ("postnorm", 128, 1e-3, 0, "stuck", 3.2),
    ("prenorm", 64, 4e-3, 0, "trained", 1.8), ("prenorm", 64, 1.6e-2, 0, "trained", 1.7),
    ("prenorm", 64, 3.2e-2, 0, "trained", 1.6),  # sp's own best, an lr muP did not run
  ]  # fmt: skip
  for path, runs in ((width / "mup" / "results.csv", mup), (width / "results.csv", sp)):
    path.write_text("\n".join([head] + [",".join(map(str, r)) for r in runs]) + "\n")
  monkeypatch.setattr(docs_data, "ROOT", str(tmp_path))
  got = width_claims.row_width_mup()
  claim, budget = got.result, got.budget
  assert claim.startswith("at d_model 64/128: ")
  # seed 1's 1e-3 at 64 (trained) is not seed 0's; nothing of sp's trained at 128
  assert "Post-LN's best lr muP 5e-4/<=5e-4, sp <=2.5e-4/none," in claim
  assert "its largest lr trained muP 5e-4/5e-4, sp 5e-4/none" in claim
  # the best lr is each one's own: sp's 3.2e-2; nothing of Pre-LN's ran at 128
  assert "Pre-LN's best lr muP <=4e-3/-, sp 3.2e-2/-;" in claim
  assert "seed 0" in budget


def test_a_wrong_fact_in_prose_is_caught_and_rewritten(tmp_path):
  """docs/results.md's numbers in prose are facts computed from their run folders: the
  Xiong-rescue escape steps (250 / 500 / 500 on stdlib) and the 1000-layer Pre-LN escape (200)."""
  results = tmp_path / "results.md"
  shutil.copy(readme.RESULTS_MD, results)
  text = results.read_text()
  assert "fact:xiong_rescue.escape.stdlib.w1000 -->250 / 500 / 500<" in text
  assert "fact:escape:docs/runs/prenorm-L1000-lr0.0002-w50 -->200<" in text
  assert "fact:escape:docs/xiong_rescue/runs/stdlib-L12-constant-lr0.0005-w0-s0 -->250<" in text
  assert "fact:escape:docs/xiong_rescue/runs/stdlib-L12-inverse_sqrt-lr0.001-w1000-s0 -->250<" in (
    text
  )
  wrong = text.replace("stdlib.w1000 -->250 / 500 / 500<", "stdlib.w1000 -->500 / 500 / 500<")
  wrong = wrong.replace("prenorm-L1000-lr0.0002-w50 -->200<", "prenorm-L1000-lr0.0002-w50 -->250<")
  results.write_text(wrong + "\n<!-- fact:nobody.computes.this -->1<!-- /fact -->\n")
  problems = readme.check(str(results))
  assert any("'500 / 500 / 500'" in p and "'250 / 500 / 500'" in p for p in problems)
  assert any("prenorm-L1000" in p and "'250'" in p and "'200'" in p for p in problems)
  assert any("nobody.computes.this" in p for p in problems)
  doc_sections.write_facts(str(results), readme.FACTS, docs_data.run_fact)
  assert not [p for p in readme.check(str(results)) if "nobody" not in p]


def test_edges_are_stated_on_escapes_kept_to_the_end():
  """A survival cell stands for the grid's: Post-LN's 1e-3 at 12 layers escaped on 1 of 12
  seeds and fell back, so the 12-layer edge is 5e-4 with 1e-3 named beside it."""
  cells = {
    ("postnorm", 12, 1e-3): ["stuck", "stuck", "trained"],
    ("postnorm", 12, 5e-4): ["trained"],
  }
  surv = [
    {"variant": "postnorm", "num_layers": "12", "lr": "1e-3", "seeds": "12", "escaped": "1",
     "escaped_for_good": "0"},
    {"variant": "postnorm", "num_layers": "12", "lr": "5e-4", "seeds": "12", "escaped": "11",
     "escaped_for_good": "10"},
  ]  # fmt: skip
  kept = edges.kept_cells(cells, surv)
  assert (
    edges.kept_edge(kept, "postnorm", 12) == "5e-4 (10/12 seeds; 1e-3: 1 of 12 escaped, none kept)"
  )
  assert edges.edge(cells, "postnorm", 12) == "1e-3 (1/3 seeds)"  # the first passage alone


def test_dense_params_is_the_models_own_count():
  """tokens/param in every budget cell: the analytic count equals the model's at 6 and 48 layers
  (d_model 64, the grid's shape; 321,152 and 2,396,288 parameters)."""
  model = {"d_model": 64, "d_ff": 256, "num_layers": 6, "vocab_size": 256, "max_seq_len": 128,
           "tie_embeddings": True, "position": "learned"}  # fmt: skip
  assert docs_data.dense_params(model) == 321_152
  assert docs_data.dense_params({**model, "num_layers": 48}) == 2_396_288
  note = docs_data.tokens_note("docs/lr_sensitivity/runs/prenorm-L48-lr0.004-s0")
  assert note == "0.85 tokens/param at 48 layers"


def test_the_reviewed_sentences_say_what_their_data_say():
  """The review's corrections, computed from the committed data: 'reduces', not 'bounds'; the
  FFN gradient's growth at 24 layers only; no 'stuck' at 200 steps; one best-lr rule (seed 0)
  for the width and muP rows; the 12-layer edge on kept escapes; the depth fits named."""
  rows = {c.claim: c.full() for c in readme.claims()}
  assert "DeepNet: DeepNorm reduces the model update's growth with depth" in rows
  grad = next(r for t, r in rows.items() if t.startswith("Xiong: at init"))
  assert grad[0].endswith("2x or more at 24 layers only") and "0.92x at 48, 1.10x at 96" in grad[1]
  later = rows["The later variants"][1]
  assert "not trained by step 200" in later and "nGPT stuck" not in later
  width = rows["Width moves the edges down in sp"][1]
  mup = rows["muP against sp across width"][1]
  # sp Post-LN's best lr at d_model 128 is seed 0's in both rows (1.25e-4), not the seed mean's
  assert "Post-LN 2.5e-4/1e-3 (1/3), 1.25e-4/" in width and "sp 2.5e-4/1.25e-4/" in mup
  assert "<=1.25e-4/2.5e-4" in width  # a best lr at the smallest lr run is marked
  edges = next(r for t, r in rows.items() if t.startswith("Post-LN's usable lr"))[1]
  assert "5e-4 (11/12 seeds; 1e-3: 1 of 12 escaped, none kept)" in edges
  transfer = rows["Depth transfer of Pre-LN's best lr"]
  assert "over 3 fits" in transfer[1] and "3-point vertex, at 48" in transfer[2]
  assert "5-point fit" not in transfer[1]
  text = open(readme.RESULTS_MD).read()
  assert "fact:valueres.L24.seed0.below_prenorm -->-0.105 / -0.089 / -0.101<" in text


def _cell(variant, lr, seeds, escaped, kept):
  return dict(
    variant=variant,
    num_layers="12",
    lr=lr,
    seeds=str(seeds),
    escaped=str(escaped),
    escaped_for_good=str(kept),
    horizon="1500",
  )


def test_the_stabilizers_row_states_kept_escapes_beside_plain_post_ln_and_marks_screens():
  from resnorm_jax.analysis.claims import stabilizers

  cells = [
    _cell("postnorm-softcap", "1e-3", 4, 2, 1),
    _cell("postnorm-attngate", "1e-3", 1, 1, 1),
    _cell("postnorm-muon", "8e-3", 4, 4, 4),
    _cell("postnorm-zloss", "2e-3", 2, 0, 0),
    _cell("prenorm-attngate", "1e-3", 4, 4, 4),  # not a Post-LN cell: left out
  ]
  base = [_cell("postnorm", "1e-3", 12, 1, 0), _cell("postnorm", "5e-4", 12, 11, 11)]
  first, second, third = stabilizers.odds_at_edge(cells, base)
  # kept (not first passages) of n, with Clopper-Pearson's interval; the grid's order
  assert first == (
    "Post-LN 12L at 1e-3: plain 0/12 (95% 0.00-0.26); gated attention 1/1*; logit softcap 1/4"
  )
  assert second == "Post-LN 12L at 2e-3: plain not run; z-loss 0/2*"
  # an optimizer at its own lr is not a cell of plain Post-LN's lr: named as such
  assert third == "Post-LN 12L, Muon at its 6L best lr 8e-3: 4/4"
  assert stabilizers.interval(cells[2]) == pytest.approx((0.3976, 1.0), abs=1e-4)


def test_the_stabilizers_row_reads_the_edge_cells_not_the_gates_deeper_ones(monkeypatch):
  """The gate's 24-layer cells (where its edge moves, claims/gate.py) are no stabilizer's edge
  cell: the row and its seed range leave them out."""
  from resnorm_jax.analysis.claims import stabilizers

  deep = {**_cell("postnorm-attngate", "1e-3", 2, 0, 0), "num_layers": "24"}
  planted = [_cell("postnorm-attngate", "1e-3", 12, 12, 12), deep]
  monkeypatch.setattr(stabilizers, "optional", lambda path: planted)
  monkeypatch.setattr(stabilizers, "survival_cells", lambda: [_cell("postnorm", "1e-3", 12, 1, 0)])
  row = stabilizers.row_stabilizers()
  assert "24L" not in row.result and "12 seeds per stabilizer cell" in row.budget


def test_the_stabilizer_curves_row_names_each_best_lr_and_marks_a_partial_curves_end():
  """Seed 0 only; plain Pre-LN's full curve first; a partial curve says how many lrs ran,
  and a best at an end of its lrs (not bracketed) is marked '+'."""
  from resnorm_jax.analysis.claims import stabilizers

  def point(name, lr, loss, seed="0", depth="6"):
    return {"stabilizer": name, "num_layers": depth, "opt.lr": lr, "seed": seed,
            "final_eval_loss": loss}  # fmt: skip

  rows = [point("none", lr, loss) for lr, loss in (("0.001", "2.0"), ("0.002", "1.8"),
                                                   ("0.004", "1.7"), ("0.008", "1.9"))]  # fmt: skip
  rows += [point("attngate", "0.002", "1.75"), point("attngate", "0.004", "1.70"),
           point("attngate", "0.008", "1.72"), point("qknorm", "0.004", "1.80"),
           point("qknorm", "0.008", "1.60"), point("qknorm", "0.001", "1.0", seed="1"),
           point("softcap", "0.004", "1.0", depth="24")]  # fmt: skip
  assert stabilizers.curve_bests(rows, 6) == [
    ("plain", 0.004, 1.7, 4, False),
    ("gated attention", 0.004, 1.7, 3, False),
    ("qk-norm", 0.008, 1.6, 2, True),
  ]
  assert stabilizers.curves_text(rows, 6) == (
    "Pre-LN 6L: 4e-3 for plain (1.7000), gated attention (1.7000); 8e-3 for qk-norm+ (1.6000)"
  )
  assert stabilizers.lrs_run(rows, 6) == (
    "4 of 4 lrs: plain; 3 of 4 lrs: gated attention; 2 of 4 lrs: the rest"
  )


def test_the_seeds_row_states_only_points_where_every_seed_is_apart_from_plain_pre_lns():
  """A stabilizer's point enters only with 3 seeds or more beside 3 or more of plain Pre-LN's
  at the same depth and lr, and only where the two ranges do not overlap."""
  from resnorm_jax.analysis.claims import stabilizers

  def point(name, seed, loss, lr="0.032"):
    return {"stabilizer": name, "num_layers": "6", "opt.lr": lr, "seed": str(seed),
            "final_eval_loss": loss}  # fmt: skip

  rows = [point("none", s, v) for s, v in enumerate(("2.6852", "2.6782", "2.6656"))]
  rows += [point("qknorm", s, v) for s, v in enumerate(("2.0007", "2.0368", "2.0219"))]
  rows += [point("sinks", s, v) for s, v in enumerate(("2.6605", "2.70", "2.69"))]  # overlaps
  rows += [point("softcap", s, v) for s, v in enumerate(("2.3", "2.4"))]  # two seeds
  rows += [point("zloss", s, "1.9", lr="0.016") for s in range(3)]  # no Pre-LN seeds there
  assert stabilizers.seeds_apart(rows) == [
    (6, 0.032, "qk-norm", 3, (2.0007, 2.0368), 3, (2.6656, 2.6852))
  ]
  assert stabilizers.seeds_apart(rows, min_seeds=2)[-1][2] == "logit softcap"


def test_the_stabilizer_curves_row_tells_a_large_group_by_its_count_and_range():
  """More than three stabilizers at one best lr are told as a count and a loss range, and a
  depth where every curve ran the same lrs says so once, so the README cell stays short."""
  from resnorm_jax.analysis.claims import stabilizers

  def point(name, lr, loss):
    return {"stabilizer": name, "num_layers": "6", "opt.lr": lr, "seed": "0",
            "final_eval_loss": loss}  # fmt: skip

  names = ("attngate", "qknorm", "sinks", "softcap")
  rows = [point("none", lr, v) for lr, v in (("0.002", "1.8"), ("0.004", "1.7"), ("0.008", "1.9"))]
  rows += [point(n, lr, v) for i, n in enumerate(names)
           for lr, v in (("0.002", "1.9"), ("0.004", f"1.7{i}"), ("0.008", "1.95"))]  # fmt: skip
  assert stabilizers.curves_text(rows, 6) == (
    "Pre-LN 6L: 4e-3 for plain (1.7000) and 4 stabilizers (1.7000-1.7300)"
  )
  assert stabilizers.lrs_run(rows, 6) == "3 of 3 lrs each"
  rows = [r for r in rows if not (r["stabilizer"] == "sinks" and r["opt.lr"] == "0.008")]
  assert stabilizers.curves_text(rows, 6) == (
    "Pre-LN 6L: 4e-3 for plain (1.7000) and 4 stabilizers (1.7000-1.7300), 1 of them+"
  )
  assert stabilizers.lrs_run(rows, 6) == "3 of 3 lrs: 4 curves; 2 of 3 lrs: the rest"


def test_the_muon_depth_row_pools_muon_with_muon_sp_and_marks_an_unbracketed_best():
  """`muon` and `muon-sp` are the same config (sp is the default) and pool per depth;
  CompleteP's curves are told apart; a best at an end of the lrs run is marked '+'; seeds
  other than 0 are left out."""
  from resnorm_jax.analysis.claims import stabilizers

  def point(name, depth, lr, loss, seed="0"):
    return {"stabilizer": name, "num_layers": str(depth), "opt.lr": lr, "seed": seed,
            "final_eval_loss": loss}  # fmt: skip

  rows = [point("muon", 6, lr, v) for lr, v in (("0.004", "1.57"), ("0.008", "1.53"),
                                                 ("0.016", "1.56"))]  # fmt: skip
  rows += [point("muon", 24, "0.008", "1.44"), point("muon-sp", 24, "0.004", "1.47"),
           point("muon-sp", 24, "0.016", "1.51"), point("muon-sp", 24, "0.002", "1.0", "1"),
           point("muon-completep", 12, "0.004", "1.50"), point("muon-completep", 12, "0.008",
           "1.49"), point("qknorm", 24, "0.004", "1.0")]  # fmt: skip
  assert stabilizers.muon_depth_bests(rows) == {
    "sp": [(6, 0.008, 1.53, False), (24, 0.008, 1.44, False)],
    "CompleteP": [(12, 0.008, 1.49, True)],
  }


def test_the_seeds_row_groups_its_points_under_their_depth_and_lr():
  from resnorm_jax.analysis.claims import stabilizers

  found = [(6, 0.004, "qk-norm", 3, (1.78, 1.80), 3, (1.75, 1.76)),
           (6, 0.032, "gated attention", 3, (2.49, 2.54), 3, (2.66, 2.69)),
           (6, 0.004, "Adam-atan2", 3, (1.77, 1.78), 3, (1.75, 1.76))]  # fmt: skip
  assert stabilizers.seeds_text(found) == (
    "6L 4e-3: plain 1.750-1.760; qk-norm 1.780-1.800, Adam-atan2 1.770-1.780"
    " / 6L 3.2e-2: plain 2.660-2.690; gated attention 2.490-2.540"
  )


def test_run_facts_read_the_survival_crossings_of_a_run(tmp_path, monkeypatch):
  """`passage`, `relapse`, `mingap`, `gap`, `trend` and `passage=<margin>` facts of a run folder
  whose eval curve goes below the no-context loss less 0.1 at step 50, back at 75, below again
  at 100 and back at 125 for good; a margin the protocol does not read is no fact."""
  from conftest import write_run_folder

  base = 3.3
  gaps = {25: -0.06, 50: -0.2, 75: 0.0, 100: -0.15, 125: -0.05, 150: -0.04}
  rows = [{"step": s, "eval/loss": base + g} for s, g in gaps.items()]
  summary = {"status": "completed", "steps": 150, "periodic_eval_no_context_loss": base,
             "final_eval_loss": 3.26, "escape_step": None}  # fmt: skip
  config = {"seed": 0, "opt": {"lr": 1e-3}, "train": {"eval_every": 25}, "model": {}}
  write_run_folder(tmp_path / "docs" / "r", rows, summary=summary, config=config)
  monkeypatch.setattr(docs_data, "ROOT", str(tmp_path))
  fact = lambda kind: docs_data.run_fact(f"{kind}:docs/r")  # noqa: E731
  assert fact("passage") == "50" and fact("passage=0.05") == "25"
  assert fact("relapse") == "75 and 125"
  assert (fact("mingap"), fact("gap"), fact("loss"), fact("escape")) == (
    "-0.2000", "-0.0400", "3.260", "none"
  )  # fmt: skip
  assert fact("trend") in ("falling", "flat", "rising")
  assert fact("passage=0.3") is None and fact("gap=0.05") is None and fact("median") is None
  assert docs_data.run_fact("passage:docs/no-such-run") is None


def test_a_docs_page_states_its_prose_numbers_as_facts_and_a_wrong_one_is_caught(tmp_path):
  """docs/stabilizers/README.md's screen paragraph: its counts (claims/stabilizers.py's
  DOC_FACTS) and each run's crossings (run facts) are checked against the data and rewritten."""
  assert stabilizers_claims.README in readme.doc_fact_files()
  page = tmp_path / "README.md"
  text = open(stabilizers_claims.README).read()
  named = {
    n: (str(page), f[1])
    for n, f in readme.DOC_FACTS.items()
    if os.path.samefile(f[0], stabilizers_claims.README)
  }
  assert "fact:stabilizers.screen.never -->" in text and "fact:mingap:docs/stabilizers/" in text
  wrong = re.sub(r"(fact:stabilizers\.screen\.never -->)\d+", r"\g<1>99", text)
  wrong = re.sub(r"(fact:mingap:docs/stabilizers/runs/[^ ]+ -->)-0\.\d+", r"\g<1>-0.9999", wrong)
  page.write_text(wrong)
  problems = doc_sections.check_facts(str(page), named, docs_data.run_fact)
  assert any("screen.never" in p and "'99 of the" in p for p in problems)
  assert any("mingap" in p and "-0.9999" in p for p in problems)
  doc_sections.write_facts(str(page), named, docs_data.run_fact)
  assert doc_sections.check_facts(str(page), named, docs_data.run_fact) == []
  assert page.read_text() == text


def test_loss_facts_read_final_eval_losses_of_runs_and_seed_spans(tmp_path, monkeypatch):
  """`loss=4`, `range=4`, `seeds=4` and `vs=4` facts: a missing seed or run is no fact."""
  from conftest import write_run_folder

  for seed, loss in enumerate((1.76462, 1.75661, 1.75519)):
    write_run_folder(tmp_path / "d" / f"a-s{seed}", summary={"final_eval_loss": loss})
  write_run_folder(tmp_path / "d" / "b-s0", summary={"final_eval_loss": 1.80})
  monkeypatch.setattr(docs_data, "ROOT", str(tmp_path))
  fact = docs_data.run_fact
  assert fact("loss:d/a-s0") == "1.765" and fact("loss=4:d/a-s0") == "1.7646"
  assert fact("range=4:d/a-s0..2") == "1.7552-1.7646"
  assert fact("seeds=4:d/a-s0..2") == "1.7646, 1.7566 and 1.7552"
  assert fact("seeds=4:d/a-s1..1") == "1.7566"
  assert fact("vs=4:d/b-s0:d/a-s0") == "0.0354 above"
  assert fact("vs=4:d/a-s2:d/a-s1") == "0.0014 below"
  assert fact("vs=2:d/a-s1:d/a-s2") == "level"
  for missing in ("range=4:d/a-s0..3", "range=4:d/a-s2..0", "vs=4:d/a-s0:d/c-s0", "loss=9:d/a-s0",
                  "loss=x:d/a-s0", "range=4:d/a-s0"):  # fmt: skip
    assert fact(missing) is None, missing
