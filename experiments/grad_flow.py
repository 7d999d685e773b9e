"""Gradient flow through depth: per-layer gradient norms at init, after a few training steps,
and after those steps with one parameter group put back to init.

python -m experiments.grad_flow --config=configs/deepnorm_1000L.py \
    --compare=configs/deepnorm_96L.py --steps=5 --outdir=docs/grad_flow

For each config (at its own depth, or at each of --depths): the Frobenius norm of every
layer's parameter gradient on one fixed held-out batch, at init and after --steps steps of
the config's own optimizer and schedule; then, for each group of --reset (norm_bias,
norm_scale, attn, mlp, outside_layers), the same after putting that group's parameters back
to their init values. A reset that brings the first layers' gradient back to the last
layers' level names the parameters whose drift cut the gradient flow. Every `--config.a.b=v`
override applies to all configs. Writes grad_flow.{csv,png}.

With --from_data=FOLDER the figures are redrawn from the CSVs already in FOLDER.
"""

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli
from resnorm_jax.probes import reproduction_plots
from resnorm_jax.probes import reproductions as repro
from resnorm_jax.train import diagnostics

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config (FILE[:ARG]).", lock_config=True)
_COMPARE = flags.DEFINE_list("compare", [], "More configs (FILE[:ARG],...), same overrides.")
_DEPTHS = flags.DEFINE_list("depths", [], "Depths to run each config at (empty: its own).")
_STEPS = flags.DEFINE_integer("steps", 5, "Training steps before the second measurement.")
_RESET = flags.DEFINE_list(
  "reset", list(diagnostics.PARAM_GROUPS), "Parameter groups to put back to init, one at a time."
)
_OUTDIR = flags.DEFINE_string("outdir", "runs/grad_flow", "Output folder.")
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
    rows = repro.grad_flow_experiment(configs, depths, _STEPS.value, _RESET.value)
  except ValueError as e:  # bad input (config, depths, group): a message, no traceback
    cli.fail(str(e))
  for path in repro.write_grad_flow(rows, _OUTDIR.value):
    print(path)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
