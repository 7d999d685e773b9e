"""DeepNet (Wang 2022), Fig. 4a/5: the model update ||F(x, theta_t) - F(x, theta_0)|| early on.

python -m experiments.model_update --config=configs/postnorm_96L.py \
    --compare=configs/deepnorm_96L.py --depths=6,24,96 --steps=100 --outdir=docs/model_update

Trains each config at each depth for --steps steps with its own optimizer, schedule and
batches, and after every step measures on one fixed held-out batch how far F (the eval-mode
output logits) has moved from init (L2 over the vocabulary, averaged over tokens) and the RMS
at every norm's input (mean and max over layers; RMS 1 means ||x|| = sqrt(d)). Every
`--config.a.b=v` override applies to all configs. Writes model_update.{csv,png} (per step)
and model_update_vs_depth.{csv,png} (largest update over steps 1..--early_steps).
Expected: Post-LN's update jumps in the first steps and grows with depth, then stalls with
large norm inputs; DeepNorm's stays small and nearly flat in depth.

With --from_data=FOLDER the figures are redrawn from the CSVs already in FOLDER.
"""

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli
from resnorm_jax.probes import reproduction_plots
from resnorm_jax.probes import reproductions as repro

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config (FILE[:ARG]).", lock_config=True)
_COMPARE = flags.DEFINE_list("compare", [], "More configs (FILE[:ARG],...), same overrides.")
_DEPTHS = flags.DEFINE_list("depths", [], "Depths to run each config at (empty: its own).")
_STEPS = flags.DEFINE_integer("steps", 100, "Training steps per run.")
_EARLY = flags.DEFINE_integer("early_steps", 10, "Steps 1..E count as early (vs-depth plot).")
_OUTDIR = flags.DEFINE_string("outdir", "runs/model_update", "Output folder.")
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
    if _EARLY.value < 1:
      raise ValueError(f"--early_steps={_EARLY.value} must be >= 1")
    rows = repro.model_update_experiment(configs, depths, _STEPS.value)
  except ValueError as e:  # bad input (config, depths, data): a message, no traceback
    cli.fail(str(e))
  early = repro.early_update(rows, _EARLY.value)
  for path in repro.write_model_update(rows, early, _OUTDIR.value):
    print(path)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
