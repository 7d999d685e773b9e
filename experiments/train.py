"""Train one config: python -m experiments.train --config=configs/postnorm_96L.py [--workdir=DIR]

Overrides: --config.model.num_layers=24 --config.opt.warmup_steps=0 ... (a locked config:
misspelt keys and wrong types are refused). Exit status 2 for bad input, before compiling.
"""

import os
import sys
import time

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run folder; default runs/<name>-<timestamp>.")


def _parse(argv):
  try:
    return flags.FLAGS(argv)
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    if "Traceback" in msg:  # config_flags wraps errors raised by get_config(arg)
      msg = msg.split("Traceback")[0].strip() + " " + msg.strip().splitlines()[-1]
    if isinstance(e, (KeyError, AttributeError)):  # a misspelt --config.a.b key
      key = next((a for a in argv if a.startswith("--config.")), "")
      msg = f"unknown config key in {key.split('=')[0]!r}: " + msg.replace("\\n", " ").replace("\\'", "")
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv):
  if len(argv) > 1:
    print(f"error: unexpected arguments {argv[1:]}", file=sys.stderr)
    sys.exit(2)
  logging.set_verbosity(logging.WARNING)  # orbax logs every file it writes at INFO
  config = _CONFIG.value
  if config is None:
    print("error: --config=FILE is required (e.g. configs/postnorm_96L.py)", file=sys.stderr)
    sys.exit(2)
  workdir = _WORKDIR.value or os.path.join(
    "runs", f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
  )
  from resnorm_jax import loop  # imports JAX: after flags, so --help stays fast

  try:
    loop.run(config, workdir)
  except ValueError as e:  # bad input (config, data, mesh): a clear message, no traceback
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
  app.run(main, flags_parser=_parse)
