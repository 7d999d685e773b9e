"""Coordinate check across depth for the depth parametrizations (resnorm_jax/probes/coord_check.py).

python scripts/coord_check.py --config=configs/prenorm_96L.py --depths=2,4,8,16 \
    --params=sp,depth_mup,completep --seeds=0,1,2 --steps=10 --config.model.base_depth=2 \
    --outdir=docs/depth_param

--widths=64,128,256 (with --config.model.base_width=64) runs every point at each d_model
under muP (model.width_param=mup; --width_param=sp for the baseline) as well and writes
spread_width.csv (across widths).

Trains every (parametrization, depth, seed) for --steps steps with the config's optimizer
and batches, and measures after every step the RMS of the embeddings, each layer's
attention and MLP outputs, the residual stream and the logits on one held-out batch, and
their change since init. Every `--config.a.b=v` override applies. Writes coord_check.csv
(seed means per depth, step and role), spread.csv (largest / smallest across depths at the
last step), coord_check.png and COMMAND into --outdir.
"""

import shlex
import sys
import time

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config (FILE[:ARG]).", lock_config=True)
_DEPTHS = flags.DEFINE_list("depths", ["2", "4", "8", "16"], "Depths to train.")
_WIDTHS = flags.DEFINE_list("widths", [], "d_model values (empty: the config's alone).")
_WIDTH_PARAM = flags.DEFINE_enum("width_param", "mup", ["mup", "sp"], "With --widths: under.")
_PARAMS = flags.DEFINE_list("params", ["sp", "depth_mup", "completep"], "model.depth_param values.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (init and batches).")
_STEPS = flags.DEFINE_integer("steps", 10, "Training steps per run.")
_OUTDIR = flags.DEFINE_string("outdir", "runs/coord_check", "Output folder.")


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if _CONFIG.value is None:
    cli.fail("--config=FILE is required (e.g. configs/prenorm_96L.py)")
  from resnorm_jax.model import depth_param
  from resnorm_jax.probes import coord_check  # imports JAX: after flags

  start = time.time()
  try:
    for name in _PARAMS.value:
      depth_param.alpha(name)  # an unknown name: refused before anything compiles
    depths = cli.parse_depths(_DEPTHS.value)
    widths = [int(w) for w in _WIDTHS.value] or None
    seeds = [int(s) for s in _SEEDS.value]
    rows = coord_check.experiment(
      _CONFIG.value,
      _PARAMS.value,
      depths,
      seeds,
      _STEPS.value,
      widths=widths,
      width_param=_WIDTH_PARAM.value,
    )
  except ValueError as e:  # bad input (config, depths, seeds): a message, no traceback
    cli.fail(str(e))
  command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
  for path in coord_check.write(rows, _OUTDIR.value, command):
    print(path)
  print(f"{len(rows)} rows in {time.time() - start:.0f}s")


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
