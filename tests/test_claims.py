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
  outcomes = "d_model,outcome\n64,stuck\n128,stuck\n256,diverged\n256,trained\n"
  (width / "results.csv").write_text(outcomes)
  monkeypatch.setattr(claims, "ROOT", str(tmp_path))
  _, claim, _, _ = claims.row_width()
  assert "best lr / first stuck at d_model 64, 128, 256: " in claim
  assert "Post-LN 2.5e-4/1e-3, 1.25e-4/5e-4, none trained;" in claim
  assert "DeepNorm 4e-3/8e-3, 5e-4/1e-3, not run;" in claim
  assert "Pre-LN 4e-3/none, 2e-3/none, 1e-3/none;" in claim
  assert "1 of 3 runs at 128, 256 diverged" in claim
