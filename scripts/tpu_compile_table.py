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
The table's configs, slices, reading and markdown: resnorm_jax/hardware/compile_table.py.
"""

import argparse
import os
import time

from resnorm_jax.files import csv_table
from resnorm_jax.hardware import compile_table as ct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    print(ct.tables(ct.read(args.out)))
    return
  fields = ("config", "settings", *target_report.CSV_FIELDS[1:], "recommended")
  rows = ct.with_columns(args.out, fields)
  done = {(r["config"], r["topology"], r["settings"]) for r in rows}
  topologies = args.only.split(",") if args.only else ct.TOPOLOGIES
  labels = set(args.configs.split(",")) if args.configs else None

  def write(report, label: str, settings: str, recommended: str) -> None:
    row = {**target_report.csv_row(report, label), "settings": settings, "recommended": recommended}
    csv_table.write_csv(args.out, [row], fields, lineterminator="\n", append=True)
    print(" ".join(f"{k}={row[k]}" for k in fields), flush=True)

  # Post-LN at both depths on every slice first (the memory of the other variants differs
  # little at the same shape), then the rest.
  first = [c for c in ct.CONFIGS if c[0].startswith("postnorm")]
  order = [(t, c) for t in topologies for c in first]
  order += [(t, c) for t in topologies for c in ct.CONFIGS if c not in first]
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
