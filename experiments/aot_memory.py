"""Memory a train step needs per device, from an ahead-of-time compile (nothing allocated).

python -m experiments.aot_memory --config=configs/postnorm_1000L.py:paper [--config.mesh.fsdp=8]
python -m experiments.aot_memory --config=configs/smoke.py --fake_devices=8  # CPU stand-ins

Run it on one host of the target hardware, with the run's config and mesh: that host's
compiler decides the temporaries. --fake_devices=N compiles for N CPU devices: right for
the sharded state, only indicative for a GPU's or TPU's temporaries.
"""

import functools
import os
import sys

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
_FAKE = flags.DEFINE_integer("fake_devices", 0, "Compile for N fake CPU devices (0: real ones).")
KINDS = ("argument", "output", "alias", "temp", "generated_code")


def train_step_memory(config, devices=None) -> dict:
  """Per-device bytes of config's train step compiled for its mesh (abstract state only)."""
  import jax

  from resnorm_jax import loop, optim
  from resnorm_jax import sharding as shard_lib
  from resnorm_jax import train_step as ts
  from resnorm_jax.config_types import model_config_from

  loop.validate_train(config)
  mesh = shard_lib.make_mesh(config.mesh, devices)
  model_def = ts.make_model_def(model_config_from(config))
  optimizer = optim.make_optimizer(config.opt, config.train.steps, model_def)
  abstract = jax.eval_shape(functools.partial(ts.init_state, model_def, optimizer, config.seed))
  shardings = shard_lib.state_shardings(abstract, model_def, optimizer, mesh, config.mesh.rules)
  state = jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
  )
  bsh = shard_lib.batch_sharding(mesh, config.mesh.rules)
  rows = jax.ShapeDtypeStruct(
    (config.train.batch_size, config.train.seq_len), "int32", sharding=bsh
  )
  step = functools.partial(ts.train_step, model_def, optimizer, per_layer=config.diag.per_layer)
  compiled = shard_lib.jit_train_step(step, shardings, bsh).lower(state, (rows, rows)).compile()
  mem = compiled.memory_analysis()
  out = {k: int(getattr(mem, f"{k}_size_in_bytes")) for k in KINDS}
  out["total"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
  out["total"] += out["generated_code"]
  device = mesh.devices.flat[0]
  return {
    **out,
    "params": sum(x.size for x in jax.tree.leaves(abstract.params)),
    "state": sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(abstract)),
    "allocated": sum(x.nbytes for x in jax.live_arrays()),  # 0: nothing was materialized
    "mesh": dict(mesh.shape),
    "device": f"{device.platform}:{device.device_kind}",
    "limit": (device.memory_stats() or {}).get("bytes_limit"),
  }


def _size(n: int) -> str:
  for unit, power in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
    if n >= 2**power:
      return f"{n / 2**power:9.2f} {unit} ({n:,} bytes)"
  return f"{n:9d} B   ({n:,} bytes)"


def _parse(argv):
  try:
    return flags.FLAGS(argv)
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:  # bad flag or key
    msg = str(e.args[0] if isinstance(e, KeyError) and e.args else e)
    msg = msg.replace("\\n", " ").replace("\\'", "").strip().splitlines()[-1]
    if isinstance(e, (KeyError, AttributeError)):  # a misspelt --config.a.b key
      key = next((a.split("=")[0] for a in argv if a.startswith("--config.")), "")
      msg = f"unknown config key in {key!r}: {msg}"
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv):
  if len(argv) > 1 or _CONFIG.value is None:
    print(
      "error: usage: --config=FILE[:ARG] [--config.k=v ...] [--fake_devices=N]", file=sys.stderr
    )
    sys.exit(2)
  if _FAKE.value:  # before JAX is imported
    os.environ["JAX_PLATFORMS"] = "cpu"
    count = f"--xla_force_host_platform_device_count={_FAKE.value}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {count}"
  from resnorm_jax import sharding as shard_lib

  c = _CONFIG.value
  try:
    shard_lib.maybe_initialize_distributed(c.dist)
    m = train_step_memory(c)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  print(f"{c.name}: {c.model.num_layers} layers, {m['params']:,} params")
  print(f"state: {_size(m['state'])} on all devices together (params, optimizer)")
  print(f"batch {c.train.batch_size}x{c.train.seq_len}, mesh {m['mesh']} of {m['device']}")
  print(f"per device (allocated while compiling: {m['allocated']} bytes):")
  for key in (*KINDS, "total"):
    print(f"  {key:>15}: {_size(m[key])}")
  if m["limit"]:
    verdict = "fits" if m["total"] <= m["limit"] else "DOES NOT FIT"
    print(f"  {'device memory':>15}: {_size(m['limit'])}: {verdict}")


if __name__ == "__main__":
  app.run(main, flags_parser=_parse)
