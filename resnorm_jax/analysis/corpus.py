"""The corpus axis: the 12-layer loss-vs-lr grid on a second corpus beside the embedded stdlib
one, each variant's edges per corpus (configs/sweeps/second_corpus.py is the grid,
scripts/second_corpus.py the command line). Each corpus has its own no-context baseline, so
the edges are read against each one's own plateau. No JAX here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from resnorm_jax.analysis import lr_axis, lr_sweep_rows
from resnorm_jax.analysis.style import save_figure
from resnorm_jax.files import csv_table

Row = dict[str, Any]
NUM_LAYERS = 12
REFERENCE = "stdlib bytes"  # the loss-vs-lr grid's corpus (docs/lr_sensitivity/)
# The variant is the panel: light grey for the stdlib column, near-black for the other corpus.
CORPUS_COLORS = {REFERENCE: "#969696"}
OTHER_COLOR = "#252525"
RESULT_COLUMNS = lr_sweep_rows.RESULT_COLUMNS
EDGE_COLUMNS = ("variant", "data", *lr_axis.EDGE_FIELDS)


def _order(corpus: str) -> tuple:
  return (corpus != REFERENCE, corpus)


AXIS = lr_axis.Axis(
  key="data",
  order=_order,
  color=lambda c: CORPUS_COLORS.get(c, OTHER_COLOR),
  label=str,
  title=f"Final eval loss against lr by corpus, {NUM_LAYERS} layers (each its own baseline)",
)


def reference_rows(csv_path: str, variants: Sequence[str]) -> list[Row]:
  """The stdlib column: the loss-vs-lr grid's results.csv rows of `variants` at 12 layers."""
  return lr_axis.grid_rows(csv_path, variants, NUM_LAYERS)


def write_outputs(rows: Sequence[Row], out_dir: str) -> dict[str, str]:
  """results.csv (a row per run), edges.csv (a row per variant and corpus) and curves.png in
  `out_dir`."""
  os.makedirs(out_dir, exist_ok=True)
  paths = {n: os.path.join(out_dir, n) for n in ("results.csv", "edges.csv", "curves.png")}
  rows = sorted(rows, key=lambda r: (r["variant"], _order(r["data"]), r["opt.lr"], r["seed"]))
  csv_table.write_csv(paths["results.csv"], rows, RESULT_COLUMNS, extrasaction="ignore")
  edges = lr_axis.edge_table(rows, AXIS)
  csv_table.write_csv(paths["edges.csv"], edges, EDGE_COLUMNS, extrasaction="ignore")
  save_figure(lr_axis.draw_curves(rows, AXIS), paths["curves.png"])
  return paths
