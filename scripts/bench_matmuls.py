"""The matmul floor of one train step: every dot of a step alone, XLA against PyTorch.

python scripts/bench_matmuls.py [--config=configs/nanogpt_char.py] [--reps=40] [--copies=8]
    [--no_torch] [--out=matmuls.json]

Lists the dots one train step of the config's model performs (`step_dots`: for each dense
layer the forward x@W, the input gradient dY@W^T and the weight gradient X^T@dY; for
attention the batched QK^T and AV and their four backward products; the head's three),
then times (1) each distinct dot shape alone and (2) all of a step's dots in one jitted call
with distinct operands per layer (no common-subexpression reuse), in XLA on the default
device and, when PyTorch is installed, the same products in PyTorch eager. Their sum of
FLOPs equals `benchmark.flops_per_token(...)["train"]` times the tokens per step (tested).
What it answers: how much of a step's time its matmuls alone take with XLA's kernels on this
machine, i.e. the floor no change to fusion or dispatch can go below. The dots and their
timings are resnorm_jax/hardware/matmul_floor.py's.
"""

from __future__ import annotations

import argparse
import os

from resnorm_jax.config import cli
from resnorm_jax.hardware.bench import machine_info
from resnorm_jax.hardware.matmul_floor import step_dots, time_shapes, time_step


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", default="configs/nanogpt_char.py", help="FILE[:ARG]")
  p.add_argument("--reps", type=int, default=40, help="timed calls per measurement")
  p.add_argument("--copies", type=int, default=8, help="distinct products per shape call")
  p.add_argument("--no_torch", action="store_true", help="skip the PyTorch comparison")
  p.add_argument("--out", default="", help="write the results as JSON to this file")
  a = p.parse_args()

  from resnorm_jax.model.config_types import model_config_from

  config = cli.load_config_file(a.config)
  m, t = model_config_from(config), config.train
  dots = step_dots(m, t.batch_size, t.seq_len)
  use_torch = not a.no_torch
  res = {"machine": machine_info(), "config": a.config, "batch": t.batch_size, "seq": t.seq_len}
  res["shapes"] = time_shapes(dots, a.copies, a.reps, use_torch)
  res["step"] = time_step(dots, a.reps, use_torch)
  res["loadavg_end"] = list(os.getloadavg())

  print(f"{config.name}: {len(dots)} dot kinds, load {res['machine']['loadavg'][0]:.2f}")
  print(f"{'dot':16} {'shapes':>24} {'xla ms':>8} {'GFLOP/s':>8} {'torch ms':>9} {'GFLOP/s':>8}")
  for r in res["shapes"]:
    xs = r["xla_s"]["median"] / a.copies
    shapes = str(r["a"]) + str(r["b"])
    line = f"{r['name']:16} {shapes:>24} {xs * 1e3:8.3f} {r['flops'] / xs / 1e9:8.1f}"
    if "torch_s" in r:
      ts = r["torch_s"]["median"] / a.copies
      line += f" {ts * 1e3:9.3f} {r['flops'] / ts / 1e9:8.1f}"
    print(line)
  s = res["step"]
  fl = s["flops"]
  print(
    f"whole step's dots: {fl / 1e9:.3f} GFLOP; XLA {s['xla_s']['median'] * 1e3:.2f} ms "
    f"({fl / s['xla_s']['median'] / 1e9:.1f} GFLOP/s, p10-p90 "
    f"{s['xla_s']['p10'] * 1e3:.2f}-{s['xla_s']['p90'] * 1e3:.2f})",
    end="",
  )
  if "torch_s" in s:
    ts = s["torch_s"]["median"]
    rate = fl / ts / 1e9
    print(f"; PyTorch eager {ts * 1e3:.2f} ms ({rate:.1f} GFLOP/s, {s['torch_threads']} threads)")
  else:
    print()
  print(f"load at end {res['loadavg_end'][0]:.2f}")
  if a.out:
    cli.write_json(a.out, res)


if __name__ == "__main__":
  main()
