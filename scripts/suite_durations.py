"""Where the test suite's time goes: per-file and per-test seconds from pytest's JUnit XML.

python -m pytest -q -n0 tests --junitxml=suite.xml
python scripts/suite_durations.py suite.xml [more.xml ...] [--out_dir=docs/perf/suite]

Several files (the suite run in parts) are merged; a test in more than one keeps the time of
the last file that has it. A skipped test (the long tier without --long) is counted apart, not
timed. Writes by_file.csv (file, tests, seconds; slowest first) and
slowest.csv (the 40 slowest tests) and prints the totals. No JAX import.
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_times(paths: list[str]) -> tuple[dict[tuple[str, str], float], set[tuple[str, str]]]:
  """({(test file, test name): seconds} of every test case that ran in the JUnit files, the
  skipped ones)."""
  times: dict[tuple[str, str], float] = {}
  skipped: set[tuple[str, str]] = set()
  for path in paths:
    for case in ET.parse(path).iter("testcase"):
      module = case.get("classname", "").split(".")[-1]
      key = (f"tests/{module}.py", case.get("name", ""))
      if case.find("skipped") is not None:
        skipped.add(key)
        times.pop(key, None)
      else:
        times[key] = float(case.get("time", 0.0))
        skipped.discard(key)
  return times, skipped


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("junit", nargs="+", help="pytest --junitxml files")
  p.add_argument("--out_dir", default=os.path.join(ROOT, "docs/perf/suite"))
  args = p.parse_args()
  times, skipped = test_times(args.junit)
  seconds, count = collections.Counter(), collections.Counter()
  for (path, _), s in times.items():
    seconds[path] += s
    count[path] += 1
  os.makedirs(args.out_dir, exist_ok=True)
  with open(os.path.join(args.out_dir, "by_file.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["file", "tests", "seconds"])
    w.writerows([path, count[path], f"{s:.1f}"] for path, s in seconds.most_common())
  slowest = sorted(times.items(), key=lambda kv: -kv[1])[:40]
  with open(os.path.join(args.out_dir, "slowest.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["test", "seconds"])
    w.writerows([f"{path}::{name}", f"{s:.1f}"] for (path, name), s in slowest)
  total = sum(times.values())
  over = [s for s in times.values() if s > 10]
  print(
    f"{len(times)} tests run, {len(skipped)} skipped: {total:,.0f} s ({total / 60:.1f} min) "
    "of test time"
  )
  print(f"{len(over)} tests over 10 s: {sum(over):,.0f} s ({sum(over) / total:.0%} of the time)")


if __name__ == "__main__":
  main()
