"""The README's Results section says what the committed data say (scripts/claims.py)."""

import shutil

from scripts import claims


def test_readme_results_agree_with_the_data():
  problems = claims.check()
  assert not problems, "README Results disagree with docs/ data (python scripts/claims.py "
  "--write rewrites them):\n" + "\n".join(problems)


def test_results_md_survival_section_agrees_with_the_data():
  problems = claims.check(claims.RESULTS_MD)
  assert not problems, "docs/results.md disagrees with docs/survival/ (python scripts/claims.py "
  "--write rewrites it):\n" + "\n".join(problems)


def test_a_changed_number_is_caught(tmp_path):
  readme = tmp_path / "README.md"
  shutil.copy(claims.README, readme)
  text = readme.read_text()
  body = claims.section(text)
  assert body is not None and "2e-3 at 6" in body
  readme.write_text(text.replace(body, body.replace("2e-3 at 6", "4e-3 at 6")))
  problems = claims.check(str(readme))
  assert any("4e-3 at 6" in p for p in problems) and any("2e-3 at 6" in p for p in problems)


def test_missing_markers_are_named(tmp_path):
  readme = tmp_path / "README.md"
  readme.write_text("# nothing here\n")
  (problem,) = claims.check(str(readme))
  assert "no results markers" in problem


def test_edge_counts_seeds_and_says_none():
  cells = {
    ("postnorm", 12, 1e-3): ["trained", "stuck", "stuck"],
    ("postnorm", 12, 5e-4): ["trained"],
  }
  assert claims.edge(cells, "postnorm", 12) == "1e-3 (1/3 seeds)"
  assert claims.edge({("postnorm", 48, 1e-3): ["stuck"]}, "postnorm", 48) == "none"
  assert claims.lr_text(1.25e-4) == "1.25e-4" and claims.lr_text(3.2e-2) == "3.2e-2"


def test_results_cells_are_short():
  """Each results cell is at most about 250 characters; the rest is in docs/results.md."""
  for row in claims.ROWS:
    cells = row()
    if cells:
      assert all(len(c) <= 260 for c in cells), [len(c) for c in cells]


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
  lines = ["variant,d_model,opt.lr,seed,outcome"] + [",".join(map(str, r)) for r in runs]
  (width / "results.csv").write_text("\n".join(lines) + "\n")
  monkeypatch.setattr(claims, "ROOT", str(tmp_path))
  _, claim, budget, _ = claims.row_width()
  assert "best/largest lr trained (k/n seeds) at d_model 64, 128, 256: " in claim
  # 1e-3 trained on 1 of its 3 seeds at 64; nothing trained at 256
  assert "Post-LN 2.5e-4/1e-3 (1/3), 1.25e-4/1.25e-4, none trained;" in claim
  assert "DeepNorm 4e-3/4e-3, 5e-4/5e-4, not run;" in claim
  assert "Pre-LN 4e-3/3.2e-2, 2e-3/2e-3, 1e-3/1e-3;" in claim
  assert "1 of 8 runs above 64 diverged" in claim
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
  monkeypatch.setattr(claims, "ROOT", str(tmp_path))
  _, claim, budget, _ = claims.row_width_mup()
  assert claim.startswith("at d_model 64/128: ")
  # seed 1's 1e-3 at 64 (trained) is not seed 0's; nothing of sp's trained at 128
  assert "Post-LN's best lr muP 5e-4/<=5e-4, sp <=2.5e-4/none," in claim
  assert "its largest lr trained muP 5e-4/5e-4, sp 5e-4/none" in claim
  # the best lr is each one's own: sp's 3.2e-2; nothing of Pre-LN's ran at 128
  assert "Pre-LN's best lr muP <=4e-3/-, sp 3.2e-2/-;" in claim
  assert "seed 0" in budget
