"""Records or checks the exact losses of every named config at smoke scale (a refactor guard).

  python scripts/golden_losses.py --write   # record tests/data/golden_losses.json
  python scripts/golden_losses.py --write ngpt_96L:smoke   # add or re-record one entry
  python scripts/golden_losses.py           # train again, exit 1 on any difference

The points and how each trains are resnorm_jax/probes/golden_losses.py's; here every value is
compared bit for bit. Losses are those of this CPU build of XLA: on another machine record your
own first. The script runs under that module's XLA_FLAGS, as the file was recorded.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from resnorm_jax.probes.golden_losses import GOLDEN, XLA_FLAGS, losses, points


def main(argv: list[str]) -> int:
  os.environ["XLA_FLAGS"] = XLA_FLAGS  # before JAX is imported (losses() imports it)
  write = "--write" in argv
  only = [a for a in argv if not a.startswith("--")]
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  results = {}
  for label, spec, overrides in points():
    if only and label not in only:
      continue
    results[label] = losses(spec, overrides)
  if write:  # with names: those entries are added or replaced, the others kept
    from resnorm_jax.config import cli

    kept = json.load(open(GOLDEN)) if only and os.path.exists(GOLDEN) else {}
    cli.write_json(GOLDEN, {**kept, **results})
    print(f"wrote {len(results)} configs to {GOLDEN}")
    return 0
  golden = json.load(open(GOLDEN))
  bad = [label for label in results if results[label] != golden.get(label)]
  for label in bad:
    print(f"DIFFERENT {label}:\n  now    {results[label]}\n  golden {golden.get(label)}")
  print(f"{len(results) - len(bad)}/{len(results)} configs bit-identical to {GOLDEN}")
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
