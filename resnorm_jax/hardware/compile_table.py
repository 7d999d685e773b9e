"""The compile table (docs/tpu_compile/results.csv for TPU slices, gpu.csv for H100s): the
:paper configs and the slices it compiles, its rows read back (a file written before a column
was added gets the column, derived from the others or empty), and its markdown tables as
docs/tpu_compile/README.md has them (topologies down, variants across, a table per depth and
settings). scripts/tpu_compile_table.py compiles the rows and prints the tables.
"""

from __future__ import annotations

import os

from resnorm_jax.files import csv_table

# (label, config spec, overrides): Post-LN, Pre-LN, DeepNorm at 96 and 1000 layers. There is
# no prenorm_1000L file: Pre-LN at 1000 layers is prenorm_96L's :paper scale at 1000 layers.
CONFIGS = (
  ("postnorm_96L", "configs/postnorm_96L.py:paper", {}),
  ("prenorm_96L", "configs/prenorm_96L.py:paper", {}),
  ("deepnorm_96L", "configs/deepnorm_96L.py:paper", {}),
  ("postnorm_1000L", "configs/postnorm_1000L.py:paper", {}),
  ("prenorm_1000L", "configs/prenorm_96L.py:paper", {"model.num_layers": 1000}),
  ("deepnorm_1000L", "configs/deepnorm_1000L.py:paper", {}),
)
# v5e 16 and 64 chips, v5p 8 and 128 chips (v5p-16, v5p-256), v4 16 chips (v4-32), v6e 16.
TOPOLOGIES = ("v5e:4x4", "v5p:2x2x2", "v4:2x2x4", "v5e:8x8", "v5p:4x4x8", "v6e:4x4")


def derived(row: dict[str, str], key: str) -> str:
  """A column an older file lacks, where its other columns give it: flops_ratio."""
  if key == "flops_ratio" and row.get("flops_per_step") and row.get("model_flops_per_step"):
    return f"{float(row['flops_per_step']) / float(row['model_flops_per_step']):.2f}"
  return ""


VARIANT_NAMES = {"postnorm": "Post-LN", "prenorm": "Pre-LN", "deepnorm": "DeepNorm"}


def cell(row: dict[str, str] | None) -> str:
  """One (config, topology)'s result in words: fits or not, per-chip GiB, the estimates."""
  if row is None:
    return "not compiled"
  if row["fits"] != "yes":
    return f"does not fit ({float(row['per_chip_gib']):.2f} GiB)"
  if not row["est_step_s"]:  # a GPU: the compiler gives memory only, no cost model
    return f"fits ({float(row['per_chip_gib']):.2f} GiB)"
  return (
    f"fits ({float(row['per_chip_gib']):.2f} GiB; est {float(row['est_step_s']):.3g} s/step, "
    f"MFU {100 * float(row['est_mfu']):.0f}%; {float(row['flops_ratio']):.2f}x FLOPs)"
  )


def markdown(rows: list[dict[str, str]], depth: str, settings: str = ":paper") -> str:
  """The rows of `settings` (`:paper`, or `:paper model.attention=cudnn` as --set writes it)
  at one depth ("96L", "1000L") as a markdown table: topologies down (those with a row at
  this depth, in the file's order), variants across (CONFIGS' order)."""
  paper = {(r["config"], r["topology"]): r for r in rows if r["settings"] == settings}
  labels = [c[0] for c in CONFIGS if c[0].endswith("_" + depth)]
  hbm = {r["topology"]: (r["chips"], r["hbm_gib"]) for r in rows}
  layers = depth[:-1]
  head = [f"{VARIANT_NAMES[label.split('_')[0]]} {layers}" for label in labels]
  lines = [
    "| topology (chips, usable HBM) | " + " | ".join(head) + " |",
    "| --- " * (len(head) + 1) + "|",
  ]
  for t in dict.fromkeys(r["topology"] for r in rows):
    if not any((label, t) in paper for label in labels):
      continue
    chips, gib = hbm[t]
    cells = [cell(paper.get((label, t))) for label in labels]
    lines.append(f"| {t} ({chips}, {gib} GiB) | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def read(path: str) -> list[dict[str, str]]:
  return csv_table.read_csv(path)


def tables(rows: list[dict[str, str]]) -> str:
  """Every table of the file (`rows`): its row count, then per `:paper` settings the markdown
  table at each depth it has rows for."""
  out = [f"{len(rows)} rows"]
  for settings in dict.fromkeys(r["settings"] for r in rows if r["settings"].startswith(":paper")):
    depths = [d for d in ("96L", "1000L") if any(
      r["settings"] == settings and r["config"].endswith("_" + d) for r in rows
    )]  # fmt: skip
    out += [f"{settings}:", *(markdown(rows, d, settings) for d in depths)]
  return "\n\n".join(out)


def with_columns(path: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
  """The rows of `path` ([] where there is no file), the file (re)written with the header
  `fields` where it lacks it: a file from before a new column gets the column (`derived`)."""
  rows, header = [], ()
  if os.path.exists(path):
    rows, header = csv_table.read_csv(path), tuple(csv_table.read_header(path))
    if header != fields:  # a file from before a new column: rewritten with it
      rows = [{k: r.get(k) or derived(r, k) for k in fields} for r in rows]
  if header != fields:
    csv_table.write_csv(path, rows, fields, lineterminator="\n")
  return rows
