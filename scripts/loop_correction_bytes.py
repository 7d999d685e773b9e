"""The loop correction against the HLO attribution, for one config on one TPU slice.

  python scripts/loop_correction_bytes.py --config=configs/postnorm_96L.py:paper \
      --topology=v5e:2x2 --layers=4 --unrolls=1,2,4 --flags=no_windowed \
      --out=docs/tpu_compile/loop_correction.csv

Compiles the train step deviceless with 1, 2, ... layers per iteration of the scanned stack
(an unroll equal to the depth: no loop) and writes, per compile, the cost model's FLOPs and
bytes (each loop's body counted once), the bytes attributed op by op times their loops' trips
(resnorm_jax/hardware/hlo_bytes.py) and those counted once; then the loop-corrected FLOPs and
bytes (target_compile.loop_corrected from unrolls 1 and 2) on a last row. Appends to --out.
"""

from __future__ import annotations

import argparse
import time

from resnorm_jax.files import csv_table
from resnorm_jax.hardware import target_compile as tc

FIELDS = (
  "config", "topology", "layers", "mesh", "remat", "attention", "flags", "unroll",
  "flops", "cost_bytes", "attributed_bytes", "attributed_once_bytes", "compile_cpu_s",
)  # fmt: skip


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", required=True)
  p.add_argument("--topology", required=True)
  p.add_argument("--layers", type=int, required=True)
  p.add_argument("--unrolls", default="1,2")
  p.add_argument("--mesh", default="fsdp")
  p.add_argument("--remat", default="full")
  p.add_argument("--attention", default="dense")
  p.add_argument("--flags", default="default")
  p.add_argument("--out", required=True)
  args = p.parse_args()
  tc.use_cpu_host()
  from resnorm_jax.config import cli
  from resnorm_jax.hardware import hlo_bytes, tune, tune_compile

  config = tc.with_overrides(cli.load_config_file(args.config), {"model.num_layers": args.layers})
  c = tune.Candidate(args.mesh, args.remat, args.attention, args.flags)
  options = tune.flags_of(c.flags)
  tgt = tune.target(args.topology)
  tgt.flags = options
  vocab, _ = tc.resolve_vocab(config, 0, "tpu")
  rows = []
  for unroll in (int(u) for u in args.unrolls.split(",")):
    cpu = time.process_time()
    compiled = tune_compile._build(config, tgt, c, vocab, unroll=unroll).lower_step()
    compiled = compiled.compile(compiler_options=options or None)
    cost = compiled.cost_analysis()
    ops = hlo_bytes.op_bytes(compiled.as_text())
    row = {
      "config": args.config, "topology": tgt.name, "layers": args.layers, "mesh": c.mesh,
      "remat": c.remat, "attention": c.attention, "flags": c.flags, "unroll": unroll,
      "flops": f"{cost['flops']:.4g}", "cost_bytes": f"{cost['bytes accessed']:.4g}",
      "attributed_bytes": f"{sum(o.step_bytes for o in ops):.4g}",
      "attributed_once_bytes": f"{sum(o.nbytes for o in ops):.4g}",
      "compile_cpu_s": f"{time.process_time() - cpu:.0f}",
    }  # fmt: skip
    rows.append(row)
    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
  by = {r["unroll"]: r for r in rows}
  if 1 in by and 2 in by:
    one = {k: float(by[1][c]) for k, c in (("flops", "flops"), ("bytes", "cost_bytes"))}
    two = {k: float(by[2][c]) for k, c in (("flops", "flops"), ("bytes", "cost_bytes"))}
    lc = tc.loop_corrected(one, two, args.layers, 2)
    row = {**rows[0], "unroll": "loop-corrected", "flops": f"{lc['flops']:.4g}",
           "cost_bytes": f"{lc['bytes']:.4g}", "attributed_bytes": "",
           "attributed_once_bytes": "", "compile_cpu_s": ""}  # fmt: skip
    rows.append(row)
    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
  csv_table.write_csv(args.out, rows, FIELDS, lineterminator="\n", append=True)


if __name__ == "__main__":
  main()
