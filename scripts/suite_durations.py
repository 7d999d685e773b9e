"""Where the test suite's time goes: per-file and per-test seconds from pytest's JUnit XML.

python -m pytest -q -n0 tests --junitxml=suite.xml
python scripts/suite_durations.py suite.xml [more.xml ...] [--out_dir=docs/perf/suite]

Several files (the suite run in parts) are merged; a test in more than one keeps the time of
the last file that has it. A skipped test (the long tier without --long) is counted apart, not
timed. Writes by_file.csv (file, tests, seconds; slowest first) and
slowest.csv (the 40 slowest tests) and prints the totals. The tables themselves:
resnorm_jax/analysis/suite_durations.py. No JAX import.
"""

from __future__ import annotations

import argparse
import os

from resnorm_jax.analysis import suite_durations

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("junit", nargs="+", help="pytest --junitxml files")
  p.add_argument("--out_dir", default=os.path.join(ROOT, "docs/perf/suite"))
  args = p.parse_args()
  times, skipped = suite_durations.case_times(args.junit)
  suite_durations.write_tables(times, args.out_dir)
  for line in suite_durations.totals(times, skipped):
    print(line)


if __name__ == "__main__":
  main()
