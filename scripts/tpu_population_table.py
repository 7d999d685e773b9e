"""Does batching small models pay on a TPU? The population step of M members against M single
steps, compiled for one chip of v5e and v5p without a TPU (resnorm_jax/hardware/
population_compile.py); writes docs/tpu_compile/population.csv.

python scripts/tpu_population_table.py [--out=FILE] [--topologies=v5e:2x2,v5p:2x2x1]
    [--members=1,4,16,64] [--shapes=d64_L12,d64_L96,d256_L12] [--skip=d64_L96:64]

The research shape: Pre-LN (configs/prenorm_96L.py at its CPU scale: d 64, batch 16 x 128,
bytes, vocabulary 256) at 12 and 96 layers, and d 256 (4 heads of 64, FFN 1024) at 12;
remat and per-layer diagnostics as the sweep points set them (sweeps.grid.constant_lr_point:
remat 'full' above 24 layers, else 'none'; diag.per_layer off). Rows already in --out are
not compiled again. Every time and ratio is the TPU compiler's cost-model estimate, not a
measurement; per_chip_gib of a row that does not fit: the temporaries the compiler refused;
compile_cpu_s is the CPU time of the population step's two compiles (the single
step's, once per topology and shape, is printed, not counted).
"""

import argparse
import os

from resnorm_jax.config import cli
from resnorm_jax.files import csv_table
from resnorm_jax.hardware import population_compile as pc
from resnorm_jax.hardware import target_compile as tc
from resnorm_jax.hardware import tpu_target

OUT = "docs/tpu_compile/population.csv"
FIELDS = (
  "topology",
  "d_model",
  "layers",
  "members",
  "per_chip_gib",
  "fits",
  "flops_per_step",
  "est_step_s",
  "est_source",
  "est_ratio_vs_singles",
  "compile_cpu_s",
)
SHAPES = {  # name: (d_model, layers, overrides of configs/prenorm_96L.py)
  "d64_L12": (64, 12, {}),
  "d64_L96": (64, 96, {}),
  "d256_L12": (256, 12, {"model.d_model": 256, "model.num_heads": 4, "model.d_ff": 1024}),
}
VOCAB = 256  # bytes


def shape_config(layers: int, overrides: dict):
  """Pre-LN at the CPU scale, `layers` deep, remat and diagnostics as a sweep point's."""
  base = cli.load_config_file("configs/prenorm_96L.py")
  return tc.with_overrides(
    base,
    {
      "model.num_layers": layers,
      "model.remat": "none" if layers <= 24 else "full",  # sweeps.grid.constant_lr_point
      "diag.per_layer": False,
      **overrides,
    },
  )


def row(r: pc.Comparison, d_model: int, layers: int) -> dict[str, str]:
  """One CSV row of a comparison (est_*: the TPU compiler's cost-model estimates)."""
  pop = r.population
  per_chip = pop.per_chip_bytes
  return {
    "topology": r.topology,
    "d_model": str(d_model),
    "layers": str(layers),
    "members": str(r.members),
    "per_chip_gib": f"{per_chip / tpu_target.GIB:.3f}" if per_chip else "",
    "fits": "yes" if pop.fits else "no",
    "flops_per_step": f"{pop.cost['flops']:.4g}" if pop.fits else "",
    "est_step_s": f"{r.population_seconds:.4g}" if r.population_seconds else "",
    "est_source": r.source,
    "est_ratio_vs_singles": f"{r.ratio:.3f}" if r.ratio else "",
    "compile_cpu_s": f"{pop.cpu_seconds:.1f}",
  }


def done_rows(path: str) -> dict[tuple[str, ...], dict]:
  """Rows already written, by (topology, d_model, layers, members)."""
  if not os.path.exists(path):
    return {}
  return {_key(r): r for r in csv_table.read_csv(path)}


def _key(r: dict) -> tuple[str, ...]:
  return (r["topology"], r["d_model"], r["layers"], r["members"])


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default=OUT)
  ap.add_argument("--topologies", default="v5e:2x2,v5p:2x2x1")
  ap.add_argument("--members", default="1,4,16,64")
  ap.add_argument("--shapes", default=",".join(SHAPES))
  ap.add_argument("--skip", default="", help="SHAPE:M,... rows not compiled")
  a = ap.parse_args()
  done = done_rows(a.out)
  skip = set(filter(None, a.skip.split(",")))
  for topology in a.topologies.split(","):
    for shape in a.shapes.split(","):
      d_model, layers, overrides = SHAPES[shape]
      config, single = shape_config(layers, overrides), None
      for m in [int(v) for v in a.members.split(",")]:
        key = (tpu_target.topology_name(topology)[1], str(d_model), str(layers), str(m))
        if key in done or f"{shape}:{m}" in skip:
          continue
        r = pc.compare(config, topology, m, vocab_size=VOCAB, single=single)
        if single is None:
          single = r.single
          print(f"{topology} {shape}: single step compiled in {single.cpu_seconds:.1f} s CPU")
        done[key] = row(r, d_model, layers)
        _write(a.out, sorted(done.values(), key=_order))
        print(" ".join(f"{k}={v}" for k, v in done[key].items()), flush=True)


def _order(r: dict) -> tuple:
  return (r["topology"], int(r["d_model"]), int(r["layers"]), int(r["members"]))


def _write(path: str, rows: list[dict]) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = path + ".tmp"
  csv_table.write_csv(tmp, rows, FIELDS, lineterminator="\n")
  os.replace(tmp, path)


if __name__ == "__main__":
  main()
