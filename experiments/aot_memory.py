"""Memory a train step needs per device, from an ahead-of-time compile (nothing allocated).

python -m experiments.aot_memory --config=configs/postnorm_1000L.py:paper [--config.mesh.fsdp=8]
python -m experiments.aot_memory --config=configs/smoke.py --fake_devices=8  # CPU stand-ins

Run it on one host of the target hardware, with the run's config and mesh: that host's
compiler decides the temporaries. --fake_devices=N compiles for N CPU devices: right for
the sharded state, only indicative for a GPU's or TPU's temporaries.
"""

import os

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
_FAKE = flags.DEFINE_integer("fake_devices", 0, "Compile for N fake CPU devices (0: real ones).")


def train_step_memory(config, devices=None) -> dict:
  """Per-device bytes of config's train step compiled for its mesh (abstract state only)."""
  import jax

  from resnorm_jax.train import run_setup

  run = run_setup.build(config, devices)  # the loop's run setup, abstract: nothing allocated
  out = run_setup.aot_memory(run.compile_step())
  device = run.mesh.devices.flat[0]
  return {
    **out,
    "params": run.num_params,
    "state": sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(run.abstract)),
    "allocated": sum(x.nbytes for x in jax.live_arrays()),  # 0: nothing was materialized
    "mesh": dict(run.mesh.shape),
    "device": f"{device.platform}:{device.device_kind}",
    "limit": (device.memory_stats() or {}).get("bytes_limit"),
  }


def _size(n: int) -> str:
  for unit, power in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
    if n >= 2**power:
      return f"{n / 2**power:9.2f} {unit} ({n:,} bytes)"
  return f"{n:9d} B   ({n:,} bytes)"


def main(argv):
  if len(argv) > 1 or _CONFIG.value is None:
    cli.fail("usage: --config=FILE[:ARG] [--config.k=v ...] [--fake_devices=N]")
  if _FAKE.value:  # before JAX is imported
    os.environ["JAX_PLATFORMS"] = "cpu"
    count = f"--xla_force_host_platform_device_count={_FAKE.value}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {count}"
  from resnorm_jax.train import run_setup
  from resnorm_jax.train import sharding as shard_lib

  c = _CONFIG.value
  try:
    shard_lib.maybe_initialize_distributed(c.dist)
    m = train_step_memory(c)
  except ValueError as e:
    cli.fail(str(e))
  print(f"{c.name}: {c.model.num_layers} layers, {m['params']:,} params")
  print(f"state: {_size(m['state'])} on all devices together (params, optimizer)")
  print(f"batch {c.train.batch_size}x{c.train.seq_len}, mesh {m['mesh']} of {m['device']}")
  print(f"per device (allocated while compiling: {m['allocated']} bytes):")
  for key in (*run_setup.MEMORY_KINDS, "total"):
    print(f"  {key:>15}: {_size(m[key])}")
  if m["limit"]:
    verdict = "fits" if m["total"] <= m["limit"] else "DOES NOT FIT"
    print(f"  {'device memory':>15}: {_size(m['limit'])}: {verdict}")


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
