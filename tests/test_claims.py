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
