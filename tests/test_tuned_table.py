"""The tuned table read back (resnorm_jax/hardware/tuned_table.py): which row a launch gets, the
keys and flags it adds, and its one-line answers; and its rows as the tuner writes them
(resnorm_jax/hardware/tuned_rows.py)."""

import pytest

from resnorm_jax.hardware import (
  target_compile,
  tpu_target,
  tune,
  tuned_rows,
  tuned_table,
  xla_flags,
)

PAPER = "configs/postnorm_96L.py:paper"


def test_every_committed_row_is_a_candidate_tune_can_make():
  rows = tuned_table.read()
  assert {(w.config, w.generation) for w in rows} >= {
    ("postnorm_96L", "v5p"),
    ("postnorm_96L", "v5e"),
    ("postnorm_96L", "v6e"),
    ("deepnorm_96L", "v5p"),
    ("prenorm_96L", "v5e"),
  }
  for w in rows:
    c = w.candidate
    assert c.mesh in tune.MESHES and c.attention in tune.ATTENTIONS, w
    assert c.remat in target_compile.REMAT_ORDER, w
    assert set(tune.flag_parts(c.flags)) <= set(tune.FLAG_PARTS), w  # raises for another name
    _, topology = tpu_target.topology_name(w.topology)
    assert topology == w.topology and tuned_table._chips(topology) == w.chips
    assert 0 < w.est_mfu < 1


def test_a_launch_gets_the_row_of_its_config_generation_and_chip_count():
  rows = tuned_table.read()
  w, why = tuned_table.lookup(PAPER, "v5p-16", rows)  # v5p types count cores: 8 chips
  assert (w.config, w.topology) == ("postnorm_96L", "v5p:2x2x2") and "v5p:2x2x2" in why
  w, why = tuned_table.lookup(PAPER, "v5e:4x4", rows)
  assert w.topology == "v5e:4x4"
  w, why = tuned_table.lookup(PAPER, "v5p-8", rows)
  assert w is None and "tuned on v5p:2x2x2, not on 4 chips" in why
  w, why = tuned_table.lookup("configs/postnorm_96L.py:smoke", "v5p-16", rows)
  assert w is None and ":paper" in why
  w, why = tuned_table.lookup("configs/rezero_96L.py:paper", "v5p-16", rows)
  assert w is None and "no tuned row for rezero_96L on v5p" in why
  with pytest.raises(tpu_target.TargetError, match="unknown TPU 'v9'"):
    tuned_table.lookup(PAPER, "v9-4", rows)


def test_the_keys_are_tunes_overrides_less_the_given_and_maxtext_flags_go_to_libtpu():
  c = tune.Candidate("fsdp", "full", "splash", "maxtext")
  w = tuned_table.Winner("postnorm_96L", "v5p:2x2x2", 8, c, 0.168)
  keys, libtpu = tuned_table.launch_keys(w, ["--config.model.remat=dots"])
  want = [f"--config.{k}={v}" for k, v in tune.overrides(c, 8).items() if k != "model.remat"]
  assert keys == want and "--config.model.attention=splash" in keys
  assert libtpu.split() == [f"--{k}={v}" for k, v in xla_flags.MAXTEXT_FLAGS.items()]
  both = tune.Candidate("fsdp", "full", "splash", "no_windowed+maxtext")
  _, libtpu = tuned_table.launch_keys(
    tuned_table.Winner("postnorm_96L", "v5e:4x4", 16, both, 0.2), []
  )
  want = {**xla_flags.NO_WINDOWED_EINSUM, **xla_flags.MAXTEXT_FLAGS}
  assert libtpu.split() == [f"--{k}={v}" for k, v in want.items()]
  assert "--xla_tpu_enable_windowed_einsum_for_all_gather=false" in libtpu.split()
  plain = tuned_table.Winner("prenorm_96L", "v5e:4x4", 16, tune.Candidate("data_fsdp", "dots"), 0.1)
  keys, libtpu = tuned_table.launch_keys(plain, [])
  assert libtpu is None and keys[:2] == ["--config.mesh.data=4", "--config.mesh.fsdp=4"]


def test_the_command_prints_keys_and_says_what_it_did_in_one_line(capsys):
  assert tuned_table.main([PAPER, "v5p-16", "--config.train.steps=10"]) == 0
  out, err = capsys.readouterr()
  lines = out.splitlines()
  assert lines[-1].startswith("LIBTPU_INIT_ARGS=--") and "--config.model.remat=full" in lines
  assert len(err.splitlines()) == 1 and err.startswith("tuned: postnorm_96L on v5p:2x2x2")
  assert tuned_table.main(["configs/smoke.py", "v5p-16"]) == 0
  out, err = capsys.readouterr()
  assert out == "" and err.startswith("tuned: none (")
  assert tuned_table.main([PAPER, "v9-4"]) == 2
  assert capsys.readouterr().err == "error: accelerator type 'v9-4': unknown TPU 'v9'\n"
  assert tuned_table.main([PAPER]) == 2 and "usage" in capsys.readouterr().err


def test_a_missing_table_is_no_rows(tmp_path):
  assert tuned_table.read(str(tmp_path / "tuned.csv")) == []


def test_a_table_gains_the_program_column_and_a_retuned_row_takes_the_old_ones_place(tmp_path):
  """A tuned.csv written before the `program` column is rewritten with it (empty: the old
  code); a row tuned again (--replace) is put where its (config, topology) was, the others
  kept as they were, in their order."""
  import csv

  path = str(tmp_path / "tuned.csv")
  old = [c for c in tuned_rows.FIELDS if c != "program"]
  pairs = [("postnorm_96L", "v5p:2x2x2"), ("postnorm_96L", "v5e:4x4"), ("prenorm_96L", "v5e:4x4")]
  rows = [{**dict.fromkeys(old, "x"), "config": c, "topology": t} for c, t in pairs]
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, old, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
  tuned_rows.with_columns(path, tuned_rows.FIELDS)
  got = tuned_rows.read(path)
  assert list(got[0]) == list(tuned_rows.FIELDS) and all(r["program"] == "" for r in got)
  tuned_rows.with_columns(path, tuned_rows.FIELDS)  # already there: unchanged
  assert tuned_rows.read(path) == got
  new = {**got[1], "est_step_s": "0.2606", "program": "0123456789abcdef"}
  tuned_rows.put_row(path, new)
  after = tuned_rows.read(path)
  assert [(r["config"], r["topology"]) for r in after] == [
    (r["config"], r["topology"]) for r in got
  ]
  assert after[1] == new and after[0] == got[0] and after[2] == got[2]
  tuned_rows.put_row(path, {**new, "topology": "v6e:4x4"})  # a pair not in the table: appended
  assert [r["topology"] for r in tuned_rows.read(path)][-1] == "v6e:4x4"


def test_a_reevaluated_row_keeps_its_tune_and_takes_the_new_compiles_numbers():
  """--reevaluate: the winner's settings, the tune's candidates and CPU time, and the untuned
  columns stay; every column of the compile comes from the new result, the speedup against
  the untuned estimate recomputed."""
  import types

  old = {**dict.fromkeys(tuned_rows.FIELDS, "old"), "untuned_est_step_s": "0.8951"}
  r = types.SimpleNamespace(
    per_chip_bytes=4.5 * 2**30, hbm_limit=15.75 * 2**30, step_s=0.2609, source="roofline",
    mfu=0.3616, bound="bytes", flops=2.123e13, bytes=1.9996e11, attributed_bytes=1.560e11,
    attributed_step_s=0.1905, attributed_mfu=0.4952, program="6263220603bd978d",
  )  # fmt: skip
  new = tuned_rows.reevaluated(old, r)
  assert list(new) == list(old)
  kept = set(tuned_rows.FIELDS) - set(tuned_rows.RESULT_FIELDS)
  assert {k: new[k] for k in kept} == {k: old[k] for k in kept}
  assert all(new[k] != "old" for k in tuned_rows.RESULT_FIELDS)
  assert (new["est_step_s"], new["speedup"], new["program"]) == ("0.2609", "3.43", r.program)
  assert (new["per_chip_gib"], new["attributed_bytes"]) == ("4.50", "1.56e+11")
