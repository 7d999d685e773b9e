"""Committed runs into TensorBoard: metrics.jsonl, config.json and summary.json of every run
folder under the given paths become TensorBoard events, HParams and the Custom Scalars layout,
the same a live run writes (resnorm_jax.train.tb_events, resnorm_jax.train.hparams).

python scripts/export_tensorboard.py docs/deepnet_panel [MORE ...] [--logdir=OUT]
tensorboard --logdir docs/deepnet_panel      (or --logdir OUT)

Without --logdir the events go beside each run's metrics.jsonl (under docs/ they are
gitignored: the script makes them again on demand); with --logdir into OUT/<the run's path
below the given folder>. Idempotent: a second export replaces the first's files
(`*.export` and `*.hparams` event files), nothing else. A run folder that holds a live run's
own event files is left alone in place (export it with --logdir). Wall times are
reconstructed from each row's step_seconds, ending at the time of export. A run whose
summary predates `periodic_eval_no_context_loss` draws the held-out no-context loss as
its baseline instead. The export itself: resnorm_jax/train/tb_export.py.
"""

from __future__ import annotations

import argparse
import sys

from resnorm_jax.train import tb_export


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("paths", nargs="+", help="run folders, or folders holding run folders")
  parser.add_argument("--logdir", help="write here instead of beside each metrics.jsonl")
  args = parser.parse_args(argv)
  return tb_export.export(args.paths, args.logdir)


if __name__ == "__main__":
  sys.exit(main())
