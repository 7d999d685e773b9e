"""The README's Results section (the answer, a short row per claim) and docs/results.md's full
row of each claim, written from the committed data: every number in them is computed from a
CSV under docs/, so a number and its sentence cannot disagree.

python scripts/claims.py           # check: exit 1, naming the difference, when README.md's
                                   # Results section is not what the data say
python scripts/claims.py --write   # rewrite the section between its markers from the data

tests/test_claims.py runs the check. The rows are resnorm_jax/analysis/claims/'s: a new claim
is a row function (returning a Claim: in full and in a few words) in the module of its axis
there, declared in its README_ROWS. No JAX here.
"""

from __future__ import annotations

import argparse
import sys

from resnorm_jax.analysis.claims import readme  # (no JAX)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--write", action="store_true", help="rewrite the sections from the data")
  args = parser.parse_args()
  if args.write:
    try:
      for path in readme.PATHS:
        readme.write(path)
      readme.write_docs()
    except ValueError as e:
      sys.exit(str(e))
  problems = [p for path in readme.PATHS for p in readme.check(path)] + readme.check_docs()
  if problems:
    print("\n".join(problems))
    sys.exit(1)
  print(f"README.md and docs/results.md agree with the data ({len(readme.ROWS)} README claims)")


if __name__ == "__main__":
  main()
