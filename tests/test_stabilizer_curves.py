"""resnorm_jax/analysis/stabilizer_curves.py (scripts/stabilizer_curves.py's tables): the seeds
table says whether a stabilizer's seeds and plain Pre-LN's at the same point are apart, and only
where a stabilizer has more than one seed."""

from resnorm_jax.analysis import stabilizer_curves as curves


def _row(stab, lr, seed, loss):
  return {"stabilizer": stab, "num_layers": 6, "opt.lr": f"{lr:g}", "seed": seed,
          "final_eval_loss": f"{loss:.4f}"}  # fmt: skip


def test_seeds_table_marks_ranges_apart_or_overlapping():
  rows = [_row("none", 0.032, s, v) for s, v in enumerate((2.6852, 2.6782, 2.6656))]
  rows += [_row("qknorm", 0.032, s, v) for s, v in enumerate((2.0007, 2.05, 2.10))]
  rows += [_row("sinks", 0.032, s, v) for s, v in enumerate((2.6605, 2.67))]
  rows += [_row("zloss", 0.032, 0, 2.6654)]  # one seed: not in the table
  text = curves.seeds_markdown(rows)
  lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
  assert sorted(lines) == ["attention sinks", "qk-norm"]
  assert lines["qk-norm"].endswith("| 3 | 2.0007-2.1000 | 3 | 2.6656-2.6852 | yes |")
  assert lines["attention sinks"].endswith("| 2 | 2.6605-2.6700 | 3 | 2.6656-2.6852 | no |")
  assert curves.seeds_markdown(rows[:3] + rows[-1:]) == ""  # no stabilizer with two seeds


def test_best_lr_is_said_only_as_far_as_the_points_bracket_it():
  assert curves.best_lr({}) == ""
  assert curves.best_lr({0.004: 1.75}) == ""  # one point: no best
  assert curves.best_lr({0.002: 1.80, 0.004: 1.75, 0.008: 1.78}) == "0.004"
  assert curves.best_lr({0.002: 1.80, 0.004: 1.75}) == ">= 0.004"  # highest run is best
  assert curves.best_lr({0.004: 1.75, 0.008: 1.78}) == "<= 0.004"
  rows = [_row("qknorm", lr, 0, v) for lr, v in ((0.004, 1.75),)]
  rows += [_row("none", lr, 0, v) for lr, v in ((0.002, 1.84), (0.004, 1.76), (0.008, 1.82))]
  lines = curves.markdown(rows, 6).splitlines()
  assert lines[2] == "| Pre-LN | 1.8400 | **1.7600** | 1.8200 | 0.004 |"
  assert lines[3] == "| qknorm |  | 1.7500 |  |  |"  # not bold, no best: one lr run


def test_the_table_gives_plain_pre_lns_seed_range_under_its_row():
  """A one-seed stabilizer point is read against plain Pre-LN's seeds at the same lr: their
  range and count sit under Pre-LN's seed-0 row, only where two or more seeds ran."""
  rows = [_row("none", 0.004, s, v) for s, v in enumerate((1.7327, 1.6822, 1.6650))]
  rows += [_row("none", 0.008, 0, 1.8117), _row("attngate", 0.004, 0, 1.6793)]
  lines = curves.markdown(rows, 6).splitlines()
  assert lines[2] == "| Pre-LN | **1.7327** | 1.8117 | <= 0.004 |"
  assert lines[3] == "| Pre-LN, its seeds' range (n) | 1.6650-1.7327 (3) |  | |"
  assert lines[4] == "| attngate | 1.6793 |  |  |"
  one = [r for r in rows if r["seed"] == 0]
  assert "seeds' range" not in curves.markdown(one, 6)
