"""docs/tpu_compile/results.csv: every :paper depth config compiled for the TPU slices people
rent, on this host (deviceless: libtpu's compiler, no TPU); gpu.csv: the same for one and
eight H100s (the CUDA plugin's compiler, requirements-gpu-compile.txt; memory only).

python scripts/tpu_compile_table.py [--out=docs/tpu_compile/results.csv] [--only=v5e:4x4,...]
python scripts/tpu_compile_table.py --only=h100:1,h100:8 --out=docs/tpu_compile/gpu.csv
python scripts/tpu_compile_table.py --only=h100:1,h100:8 --configs=postnorm_96L,prenorm_96L,\
    deepnorm_96L --set=model.attention=cudnn --out=docs/tpu_compile/gpu.csv  # + nvidia-cudnn-cu12
python scripts/tpu_compile_table.py --markdown  # its tables, as docs/tpu_compile/README.md has them

Each (config, topology) is compiled as `python -m experiments.compile_for` does (train step,
loop-corrected cost model; no eval step). A config that does not fit gets its row (fits=no)
and the row of the first candidate setting that does (target_compile.find_fit). Rows are
appended as they finish; a row already in the file is not compiled again (delete the file to
redo all). est_* columns: the TPU compiler's cost-model estimates, not measurements;
flops_ratio: the compiled FLOPs over the analytic model FLOPs (above 2: the partitioned
step repeats work on several chips, and the estimates are of that program). A file written
before a column was added is rewritten with it (derived from the other columns, or empty).
"""

import argparse
import csv
import os
import time

from resnorm_jax.config.nofollow import open_nofollow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
  with open(path) as f:
    return list(csv.DictReader(f))


def main() -> None:
  from resnorm_jax.config import cli
  from resnorm_jax.hardware import target_compile as tc
  from resnorm_jax.hardware import target_report
  from resnorm_jax.sweeps import grid

  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", default=os.path.join(ROOT, "docs/tpu_compile/results.csv"))
  p.add_argument("--only", default="", help="comma-separated topologies (default: all)")
  p.add_argument("--configs", default="", help="comma-separated labels (default: all)")
  p.add_argument("--markdown", action="store_true", help="print the file's tables; compile nothing")
  p.add_argument(
    "--set",
    action="append",
    default=[],
    help="KEY=VALUE added to every config (e.g. model.attention=cudnn); repeatable. The rows' "
    "settings say them (`:paper model.attention=cudnn`): rows of other settings stay apart",
  )
  args = p.parse_args()
  tc.use_cpu_host()  # before JAX starts a backend: the CUDA plugin fails on a host without CUDA
  try:
    extra = grid.parse_sets(args.set)  # as scripts/sweep.py reads its --set
  except ValueError as e:
    p.error(str(e))
  paper = " ".join([":paper", *(f"{k}={v}" for k, v in extra.items())])
  if args.markdown:
    rows = read(args.out)
    tables = [f"{len(rows)} rows"]
    for settings in dict.fromkeys(
      r["settings"] for r in rows if r["settings"].startswith(":paper")
    ):
      depths = [d for d in ("96L", "1000L") if any(
        r["settings"] == settings and r["config"].endswith("_" + d) for r in rows
      )]  # fmt: skip
      tables += [f"{settings}:", *(markdown(rows, d, settings) for d in depths)]
    print("\n\n".join(tables))
    return
  fields = ("config", "settings", *target_report.CSV_FIELDS[1:], "recommended")
  rows, header = [], ()
  if os.path.exists(args.out):
    with open(args.out) as f:
      reader = csv.DictReader(f)
      rows, header = list(reader), tuple(reader.fieldnames or ())
    if header != fields:  # a file from before a new column: rewritten with it
      rows = [{k: r.get(k) or derived(r, k) for k in fields} for r in rows]
  if header != fields:
    with open_nofollow(args.out, "w", newline="") as f:
      w = csv.DictWriter(f, fields, lineterminator="\n")
      w.writeheader()
      w.writerows(rows)
  done = {(r["config"], r["topology"], r["settings"]) for r in rows}
  topologies = args.only.split(",") if args.only else TOPOLOGIES
  labels = set(args.configs.split(",")) if args.configs else None

  def write(report, label: str, settings: str, recommended: str) -> None:
    row = {**target_report.csv_row(report, label), "settings": settings, "recommended": recommended}
    with open(args.out, "a", newline="") as f:
      csv.DictWriter(f, fields, lineterminator="\n").writerow(row)
    print(" ".join(f"{k}={row[k]}" for k in fields), flush=True)

  # Post-LN at both depths on every slice first (the memory of the other variants differs
  # little at the same shape), then the rest.
  first = [c for c in CONFIGS if c[0].startswith("postnorm")]
  order = [(t, c) for t in topologies for c in first]
  order += [(t, c) for t in topologies for c in CONFIGS if c not in first]
  for topology, (label, spec, overrides) in order:
    if (labels and label not in labels) or (label, topology, paper) in done:
      continue
    config = tc.with_overrides(cli.load_config_file(spec), {**overrides, **extra})
    start = time.perf_counter()
    report = tc.compile_for(config, topology, eval_step=False)
    write(report, label, paper, "yes" if report.fits else "no")
    if not report.fits:
      fit = tc.find_fit(config, topology, correct_loop=True)
      if fit:
        write(fit[2], label, " ".join([fit[0], *paper.split()[1:]]), "yes")
    print(f"# {label} on {topology}: {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
  main()
