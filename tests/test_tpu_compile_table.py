"""resnorm_jax/hardware/compile_table.py's markdown (scripts/tpu_compile_table.py --markdown):
the README's TPU tables are the committed file's."""

import csv
import os

from resnorm_jax.hardware import compile_table as t

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _row(config, topology, fits="yes", gib="4.30", **kw):
  return {"config": config, "settings": ":paper", "topology": topology, "chips": "16",
          "hbm_gib": "15.75", "fits": fits, "per_chip_gib": gib, "est_step_s": "0.8951",
          "est_mfu": "0.105", "flops_ratio": "0.78", **kw}  # fmt: skip


def test_markdown_places_each_row_and_says_what_is_missing():
  rows = [_row("postnorm_96L", "v5e:4x4"), _row("deepnorm_96L", "v5e:4x4", fits="no", gib="19.73")]
  table = t.markdown(rows, "96L").splitlines()
  assert table[0] == "| topology (chips, usable HBM) | Post-LN 96 | Pre-LN 96 | DeepNorm 96 |"
  assert table[2] == (
    "| v5e:4x4 (16, 15.75 GiB) | fits (4.30 GiB; est 0.895 s/step, MFU 10%; 0.78x FLOPs) "
    "| not compiled | does not fit (19.73 GiB) |"
  )
  assert len(table) == 3  # topologies without a row are left out
  assert "Post-LN 1000" in t.markdown(rows, "1000L") and "v5e" not in t.markdown(rows, "1000L")


def test_the_readme_shows_the_committed_table():
  with open(os.path.join(ROOT, "docs/tpu_compile/results.csv")) as f:
    rows = list(csv.DictReader(f))
  with open(os.path.join(ROOT, "docs/tpu_compile/README.md")) as f:
    readme = f.read()
  for depth in ("96L", "1000L"):
    assert t.markdown(rows, depth) in readme, depth
  assert f"Status: {len(rows)} rows" in readme
