"""Xiong 2020, Fig. 3: per-layer FFN gradient norms at init; the last layer's W2 vs depth.

python -m experiments.grad_norms_at_init --config=configs/postnorm_96L.py \
    --compare=configs/prenorm_96L.py --depths=6,12,24,48,96 --num_batches=16 \
    --outdir=docs/grad_norms_at_init

The gradient is the expected one (averaged over K training batches, then the norm). Every
`--config.a.b=v` override applies to all configs. Writes grad_norms_per_layer.{csv,png} (each
config at its own depth) and grad_norms_vs_depth.{csv,png} (last layer, log-log).
Expected: Post-LN's profile rises toward the output, Pre-LN's is flat; Pre-LN's last-layer
norm shrinks like 1/sqrt(N) with depth while Post-LN's stays about constant.

With --from_data=FOLDER the figures are redrawn from the CSVs already in FOLDER.
"""

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli
from resnorm_jax.probes import reproduction_plots
from resnorm_jax.probes import reproductions as repro

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config (FILE[:ARG]).", lock_config=True)
_COMPARE = flags.DEFINE_list("compare", [], "More configs (FILE[:ARG],...), same overrides.")
_DEPTHS = flags.DEFINE_list("depths", [], "Depths for the last-layer W2 norm (empty: skip).")
_NUM_BATCHES = flags.DEFINE_integer("num_batches", 16, "K mini-batches of the expected gradient.")
_OUTDIR = flags.DEFINE_string("outdir", "runs/grad_norms_at_init", "Output folder.")
_FROM_DATA = flags.DEFINE_string(
  "from_data", None, "Redraw the figures of this folder from its CSVs; nothing is measured."
)


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if _FROM_DATA.value:
    try:
      paths = reproduction_plots.replot(_FROM_DATA.value)
    except ValueError as e:
      cli.fail(str(e))
    print("\n".join(paths))
    return
  try:
    configs, depths = cli.comparison_from_flags(_CONFIG.value, _COMPARE.value, _DEPTHS.value)
    per_layer, vs_depth = repro.grad_norms_experiment(configs, depths, _NUM_BATCHES.value)
  except ValueError as e:  # bad input (config, depths, data): a message, no traceback
    cli.fail(str(e))
  for path in repro.write_grad_norms(per_layer, vs_depth, _OUTDIR.value):
    print(path)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
