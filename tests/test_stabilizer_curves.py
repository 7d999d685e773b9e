"""resnorm_jax/analysis/stabilizer_curves.py (scripts/stabilizer_curves.py's tables, and
docs/stabilizers/README.md's generated sections of them): the seeds table says whether a
stabilizer's seeds and plain Pre-LN's at the same point are apart, and only where a stabilizer
has more than one seed; each table, from curves.csv's rows (every column a string), is the
page's, line for line."""

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
  assert lines[3] == "| qk-norm |  | 1.7500 |  |  |"  # not bold, no best: one lr run


def test_the_table_gives_plain_pre_lns_seed_range_under_its_row():
  """A one-seed stabilizer point is read against plain Pre-LN's seeds at the same lr: their
  range and count sit under Pre-LN's seed-0 row, only where two or more seeds ran."""
  rows = [_row("none", 0.004, s, v) for s, v in enumerate((1.7327, 1.6822, 1.6650))]
  rows += [_row("none", 0.008, 0, 1.8117), _row("attngate", 0.004, 0, 1.6793)]
  lines = curves.markdown(rows, 6).splitlines()
  assert lines[2] == "| Pre-LN | **1.7327** | 1.8117 | <= 0.004 |"
  assert lines[3] == "| Pre-LN, its seeds' range (n) | 1.6650-1.7327 (3) |  | |"
  assert lines[4] == "| gated attention | 1.6793 |  |  |"
  one = [r for r in rows if r["seed"] == 0]
  assert "seeds' range" not in curves.markdown(one, 6)


def _csv(stab, depth, lr, seed, loss):
  """A row as curves.csv reads back: every column a string, '' for a point not finished."""
  return {"stabilizer": stab, "num_layers": str(depth), "opt.lr": f"{lr:g}", "seed": str(seed),
          "final_eval_loss": "" if loss is None else f"{loss:.4f}"}  # fmt: skip


def test_the_depth_table_from_curves_csv_is_the_pages():
  """Pre-LN first with its seeds' range under it, then the stabilizers by their key's order,
  named as the page names them; Muon's parametrized curves, another depth and seeds other than
  0 are not rows; a best at the lowest or highest lr run is '<=' or '>='."""
  rows = [
    _csv("none", 24, 0.002, 0, 1.7552), _csv("none", 24, 0.002, 1, 1.7480),
    _csv("none", 24, 0.002, 2, 1.7750), _csv("none", 24, 0.004, 0, 1.7327),
    _csv("none", 24, 0.008, 0, 1.8117), _csv("none", 24, 0.008, 1, 1.8472),
    _csv("zloss", 24, 0.002, 0, 1.7540), _csv("zloss", 24, 0.004, 0, 1.7221),
    _csv("zloss", 24, 0.008, 0, None),  # still running: blank, and its best is the highest run
    _csv("softcap", 24, 0.004, 0, 1.7336), _csv("softcap", 24, 0.008, 0, 1.8015),
    _csv("softcap", 24, 0.004, 1, 1.60),  # seed 1: not a cell of the table
    _csv("adamatan2", 24, 0.001, 0, 1.8555), _csv("adamatan2", 24, 0.002, 0, 1.7202),
    _csv("adamatan2", 24, 0.004, 0, 1.7340),
    _csv("muon-completep", 24, 0.004, 0, 1.4749),  # Muon across depth's
    _csv("qknorm", 6, 0.004, 0, 1.7791),  # another depth
  ]  # fmt: skip
  assert curves.markdown(rows, 24).splitlines() == [
    "| stabilizer (lr) | 0.001 | 0.002 | 0.004 | 0.008 | best lr |",
    "| --- | --- | --- | --- | --- | --- |",
    "| Pre-LN |  | 1.7552 | **1.7327** | 1.8117 | 0.004 |",
    "| Pre-LN, its seeds' range (n) |  | 1.7480-1.7750 (3) |  | 1.8117-1.8472 (2) | |",
    "| Adam-atan2 | 1.8555 | **1.7202** | 1.7340 |  | 0.002 |",
    "| logit softcap |  |  | **1.7336** | 1.8015 | <= 0.004 |",
    "| z-loss |  | 1.7540 | **1.7221** |  | >= 0.004 |",
  ]


def test_muons_own_curve_is_one_row_of_its_seed_0_losses_at_the_lrs_as_the_docs_write_them():
  rows = [_csv("muon", 6, lr, 0, v) for lr, v in ((0.008, 1.5381), (0.000125, 2.4503))]
  rows += [_csv("muon", 6, 0.016, 0, None), _csv("muon", 6, 0.008, 1, 1.5473)]
  rows += [_csv("muon", 24, 0.004, 0, 1.4725), _csv("none", 6, 0.004, 0, 1.7646)]
  assert curves.muon_curve_markdown(rows).splitlines() == [
    "| lr | 1.25e-4 | 8e-3 |",
    "| --- | --- | --- |",
    "| final eval loss | 2.4503 | 1.5381 |",
  ]
  assert curves.muon_curve_markdown(rows[2:3]) == ""


def test_muon_across_depth_pools_sp_and_gives_one_row_at_the_base_depth():
  """`muon` and `muon-sp` are sp's one config; at 6 layers CompleteP is sp's model, one row;
  the lrs across are the deeper depths' (the 6-layer curve's others are not shown)."""
  rows = [
    _csv("muon", 6, lr, 0, v)
    for lr, v in ((0.002, 1.6736), (0.004, 1.5700), (0.008, 1.5381), (0.016, 1.5679))
  ]
  rows += [_csv("muon-sp", 12, lr, 0, v) for lr, v in ((0.004, 1.5060), (0.008, 1.4703))]
  rows += [
    _csv("muon-completep", 12, lr, 0, v)
    for lr, v in ((0.004, 1.5092), (0.008, 1.4763), (0.016, 1.4977))
  ]
  rows += [_csv("muon", 24, lr, 0, v) for lr, v in ((0.004, 1.4725), (0.008, 1.4361))]
  rows += [_csv("muon", 24, 0.016, 0, 1.39), _csv("muon", 24, 0.016, 1, 1.30)]
  rows += [_csv("none", 12, 0.004, 0, 1.7128)]  # fmt: skip
  assert curves.muon_depth_markdown(rows).splitlines() == [
    "| depth, parametrization | 4e-3 | 8e-3 | 1.6e-2 | best lr |",
    "| --- | --- | --- | --- | --- |",
    "| 6 layers (either) | 1.5700 | **1.5381** | 1.5679 | 8e-3 |",
    "| 12 layers, sp | 1.5060 | **1.4703** |  | >= 8e-3 |",
    "| 12 layers, CompleteP | 1.5092 | **1.4763** | 1.4977 | 8e-3 |",
    "| 24 layers, sp | 1.4725 | 1.4361 | **1.3900** | >= 1.6e-2 |",
  ]
  assert curves.muon_depth_markdown(rows[:4]) == ""  # no deeper depth ran


def test_the_seeds_table_from_curves_csv_orders_by_depth_lr_and_key_and_names_as_the_page():
  rows = [_csv("softcap", 6, 0.032, s, v) for s, v in enumerate((2.3491, 2.3293, 2.4309))]
  rows += [_csv("attngate", 6, 0.032, s, v) for s, v in enumerate((2.5389, 2.4946))]
  rows += [_csv("none", 6, 0.032, s, v) for s, v in enumerate((2.6852, 2.6782, 2.6656))]
  rows += [_csv("zloss", 6, 0.004, s, v) for s, v in enumerate((1.7470, 1.7577, None))]
  rows += [_csv("none", 6, 0.004, s, v) for s, v in enumerate((1.7646, 1.7566, 1.7552))]
  assert curves.seeds_markdown(rows).splitlines()[2:] == [
    "| z-loss | 6 | 0.004 | 2 | 1.7470-1.7577 | 3 | 1.7552-1.7646 | no |",
    "| gated attention | 6 | 0.032 | 2 | 2.4946-2.5389 | 3 | 2.6656-2.6852 | yes |",
    "| logit softcap | 6 | 0.032 | 3 | 2.3293-2.4309 | 3 | 2.6656-2.6852 | yes |",
  ]
