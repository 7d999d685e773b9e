"""Train runs that differ only in opt.lr and seed as one program (one vmapped step):

python -m experiments.train_population --points=FILE.json

FILE.json: a list of {"config": "configs/x.py[:ARG]", "overrides": {"dotted.key": value},
"workdir": DIR}, one per member; every member writes DIR as its single run
(`python -m experiments.train --config=... --workdir=DIR --config.k=v`) would. The same
command resumes an interrupted population, in the same program (one slot per point, in the
file's order), so it must not be changed in between. Exit status 2 for bad input, before
compiling (a member whose checkpoint another program wrote: the command that continues it);
1 for an I/O fault (a full disk: every member's line is printed, the same command resumes).
"""

import sys

from absl import app, flags, logging

from resnorm_jax.config import cli

_POINTS = flags.DEFINE_string(
  "points", None, "JSON file: a list of {config, overrides, workdir}, one per member."
)


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  logging.set_verbosity(logging.WARNING)  # orbax logs every file it writes at INFO
  if not _POINTS.value:
    cli.fail("--points=FILE.json is required")
  # JAX is imported after the flags, so --help stays fast.
  from resnorm_jax.train import io_faults
  from resnorm_jax.train.population import points as population_points
  from resnorm_jax.train.population import run as population_run

  try:
    configs, workdirs = population_points.load_points(_POINTS.value)
    commands = population_points.single_run_commands(_POINTS.value)
    summaries = population_run.run(configs, workdirs, argv=sys.argv[1:], commands=commands)
  except ValueError as e:  # bad input (points, configs, data, checkpoints): a message, exit 2
    cli.fail(str(e))
  except io_faults.RunFailed as e:  # an I/O fault before training: one line
    print(f"error: {e}", file=sys.stderr)
    sys.exit(io_faults.EXIT_FAILED)
  if any(s["status"] == "failed" for s in summaries):  # an I/O fault: its lines are printed
    sys.exit(io_faults.EXIT_FAILED)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
