"""Check a run's config without devices: python -m experiments.validate --config=FILE[:ARG]
    [--platform=gpu|tpu|cpu] [--config.key=value ...]

The checks a training run makes before it compiles anything (a misspelt key or a wrong type
in the overrides, then run_setup.validate: model, train settings, optimizer and schedule, the
data folder's vocabulary), run where a job is submitted, so that a bad config is refused
before the job waits in a queue (scripts/submit_slurm.sh, scripts/launch_tpu_vm.sh).
`--platform` is the target's (what `attention=fused|cudnn` resolves to there), not this
host's. Exit 0 with one line when the config is valid, 2 with the error otherwise. The mesh
and the batch's divisibility by it depend on the devices: the run checks those itself.
"""

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
_PLATFORM = flags.DEFINE_enum(
  "platform", "gpu", ["cpu", "gpu", "tpu"], "The platform the run will train on."
)


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if _CONFIG.value is None:
    cli.fail("--config=FILE is required (e.g. configs/postnorm_96L.py)")
  from resnorm_jax.train import run_setup  # imports JAX (no devices are used): after the flags

  config = _CONFIG.value
  try:
    model = run_setup.validate(config, platform=_PLATFORM.value)
  except ValueError as e:
    cli.fail(str(e))
  print(
    f"ok: {config.name}: {model.num_layers} layers, {config.train.steps} steps, "
    f"vocabulary {model.vocab_size}, attention {model.attention} on {_PLATFORM.value}"
  )


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
