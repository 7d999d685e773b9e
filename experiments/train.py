"""Train one config: python -m experiments.train --config=configs/postnorm_96L.py [--workdir=DIR]

Overrides: --config.model.num_layers=24 --config.opt.warmup_steps=0 ... (a locked config:
misspelt keys and wrong types are refused). --config.data.path=FILE alone trains on that
text; a folder made by experiments.prepare_data, on its tokens with its vocabulary.
Exit status 2 for bad input, before compiling; 1 for a run that failed (an I/O fault such
as a full disk: resumable by the same command).
"""

import sys

from absl import flags, logging
from ml_collections import config_flags

from resnorm_jax.config import cli
from resnorm_jax.train import startup_signals

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
_WORKDIR = flags.DEFINE_string(
  "workdir", None, "Run folder; default runs/<name>-<overrides>-<timestamp>."
)


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  logging.set_verbosity(logging.WARNING)  # orbax logs every file it writes at INFO
  if _CONFIG.value is None:
    cli.fail("--config=FILE is required (e.g. configs/postnorm_96L.py)")
  from resnorm_jax.data import sources
  from resnorm_jax.train import io_faults, loop  # imports JAX: after flags, so --help stays fast

  startup_signals.stop_if_received()

  try:
    overrides = config_flags.get_override_values(flags.FLAGS["config"])
    note = sources.source_from_path(_CONFIG.value, overrides)  # data.path alone: its source
    if note:
      print(note, flush=True)
    expected = _expected(overrides)
    summary = loop.run(
      _CONFIG.value, _WORKDIR.value, overrides=overrides, argv=sys.argv[1:], expected=expected
    )
  except ValueError as e:  # bad input (config, data, mesh, checkpoint): a message, exit 2
    cli.fail(str(e))
  except io_faults.RunFailed as e:  # an I/O fault before training: one line
    print(f"error: {e}", file=sys.stderr)
    sys.exit(io_faults.EXIT_FAILED)
  if summary["status"] == "failed":  # an I/O fault while training: its line is printed
    sys.exit(io_faults.EXIT_FAILED)


def _expected(overrides):
  """The named config's EXPECTED outcome when this run is the experiment it speaks for (its
  default scale, no override of a key its results depend on); else None."""
  from resnorm_jax.runs import expected as expected_lib

  spec = config_flags.get_config_filename(flags.FLAGS["config"])
  declared, arg = expected_lib.for_config_file(spec)
  if declared is None or not expected_lib.applies(arg, overrides):
    return None
  return declared


def cli_main() -> None:
  """The console command (pyproject.toml's [project.scripts]): the same as `python -m`."""
  startup_signals.hold()  # a Ctrl-C while JAX imports: one line, not a traceback
  cli.run_app(main, __name__)


if __name__ == "__main__":
  cli_main()
