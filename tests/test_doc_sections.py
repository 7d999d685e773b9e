"""Generated doc sections (resnorm_jax/analysis/doc_sections.py) and the survival section's text
(resnorm_jax/analysis/survival_section.py) on small made-up files and rows."""

import pytest

from resnorm_jax.analysis import doc_sections, survival_section

B, E = "<!-- b -->", "<!-- e -->"


def _sections(path, body):
  return [(str(path), B, E, lambda: f"{B}\n{body}\n{E}")]


def test_check_names_the_changed_line_and_write_puts_the_data_back(tmp_path):
  doc = tmp_path / "doc.md"
  doc.write_text(f"# title\n{B}\nlr 4e-3\n{E}\ntail\n")
  assert doc_sections.check(str(doc), _sections(doc, "lr 4e-3")) == []
  problems = doc_sections.check(str(doc), _sections(doc, "lr 2e-3"))
  assert "-lr 4e-3" in problems and "+lr 2e-3" in problems
  doc_sections.write(str(doc), _sections(doc, "lr 2e-3"))
  assert doc.read_text() == f"# title\n{B}\nlr 2e-3\n{E}\ntail\n"  # around it untouched


def test_sections_of_another_file_are_left_alone_and_missing_markers_named(tmp_path):
  doc, other = tmp_path / "doc.md", tmp_path / "other.md"
  doc.write_text("no markers\n")
  assert doc_sections.check(str(doc), _sections(other, "x")) == []
  (problem,) = doc_sections.check(str(doc), _sections(doc, "x"))
  assert "no results markers" in problem and B in problem
  with pytest.raises(ValueError, match="add the markers"):
    doc_sections.write(str(doc), _sections(doc, "x"))
  assert doc.read_text() == "no markers\n"


CELL = {
  "variant": "postnorm",
  "num_layers": "12",
  "lr": "5e-4",
  "seeds": "3",
  "horizon": "1500",
  "escaped": "2",
  "ci_lo": "0.0943",
  "ci_hi": "0.9916",
  "first_passages": "175 300",
  "relapsed_runs": "1",
  "escaped_for_good": "1",
  "escaped_m0.05": "2",
  "escaped_m0.1": "2",
  "escaped_m0.2": "1",
  "never_falling": "1",
  "never_flat": "0",
  "never_rising": "0",
}


def _run(seed, first, relapses="0", steps=""):
  return {
    "name": f"postnorm-L12-lr0.0005-s{seed}",
    "variant": "postnorm",
    "num_layers": "12",
    "opt.lr": "0.0005",
    "seed": str(seed),
    "periodic_baseline": "3.2985509",
    "first_passage": first,
    "relapses": relapses,
    "relapse_steps": steps,
    "fraction_below": "0.4",
    "final_eval_gap": "0.02",
    "late_trend": "flat",
  }


def test_survival_section_reads_its_cells_relapses_and_the_grid_seeds():
  runs = [_run(0, "175"), _run(1, "300", "1", "400 1200"), _run(2, "")]
  # the 1,000-step grid: seed 0 escaped there too, seed 1 did not (here at 300: they
  # disagree), seed 2 escaped in neither
  grid = [
    {
      "variant": "postnorm",
      "num_layers": "12",
      "opt.lr": "0.0005",
      "seed": "0",
      "escape_step": "150",
    },
    {"variant": "postnorm", "num_layers": "12", "opt.lr": "0.0005", "seed": "1", "escape_step": ""},
    {"variant": "postnorm", "num_layers": "12", "opt.lr": "0.0005", "seed": "2", "escape_step": ""},
  ]
  text = survival_section.render([CELL], runs, grid)
  assert text.startswith(survival_section.BEGIN) and text.endswith(survival_section.END)
  assert "| Post-LN, 12 layers, lr 5e-4 | 2 of 3 | 0.094-0.992 | 175 300 | 1 | 1 |" in text
  assert "baseline" not in text and "(their no-context loss 3.299)" in text
  assert "first came 0.1 below at step 300 and was back above at steps 400, 1,200" in text
  assert "2 of 3 agree" in text and "postnorm-L12-lr0.0005-s1 (grid never, here 300)" in text
  # the odds are those of escapes kept to the end (1 of 3), the first passages (2) beside them
  short = survival_section.odds_by_cell([CELL], long=False)
  assert short == "Post-LN 12 layers 1/3 kept at 5e-4 (2 first passages)"
  # the interval is the kept fraction's: Clopper-Pearson 1 of 3
  assert survival_section.odds_by_cell([CELL], long=True) == "Post-LN 12L: 5e-4 1/3 (0.01-0.91; 2)"


def test_survival_section_without_cells_says_none_finished():
  text = survival_section.render([], [], [])
  assert "No survival run has finished yet" in text
