"""Where the test suite's time goes (docs/perf/suite/): per-file and per-test seconds from
pytest's JUnit XML files, as by_file.csv (file, tests, seconds; slowest first) and slowest.csv
(the slowest tests), and the totals in two lines. Several files (the suite run in parts) are
merged; a test in more than one keeps the time of the last file that has it. A skipped test
(the long tier without --long) is counted apart, not timed. scripts/suite_durations.py is its
command line. No JAX here.
"""

from __future__ import annotations

import collections
import os
import xml.etree.ElementTree as ET

from resnorm_jax.files import csv_table

SLOWEST = 40  # the tests slowest.csv lists


def case_times(paths: list[str]) -> tuple[dict[tuple[str, str], float], set[tuple[str, str]]]:
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


def write_tables(times: dict[tuple[str, str], float], out_dir: str) -> None:
  """by_file.csv and slowest.csv of `times` (case_times') in `out_dir`."""
  seconds, count = collections.Counter(), collections.Counter()
  for (path, _), s in times.items():
    seconds[path] += s
    count[path] += 1
  os.makedirs(out_dir, exist_ok=True)
  by_file = [
    {"file": path, "tests": count[path], "seconds": f"{s:.1f}"} for path, s in seconds.most_common()
  ]
  csv_table.write_csv(os.path.join(out_dir, "by_file.csv"), by_file, ["file", "tests", "seconds"])
  slowest = sorted(times.items(), key=lambda kv: -kv[1])[:SLOWEST]
  rows = [{"test": f"{path}::{name}", "seconds": f"{s:.1f}"} for (path, name), s in slowest]
  csv_table.write_csv(os.path.join(out_dir, "slowest.csv"), rows, ["test", "seconds"])


def totals(times: dict[tuple[str, str], float], skipped: set[tuple[str, str]]) -> list[str]:
  """The totals in two lines: tests run and skipped with their time, and the tests over 10 s."""
  total = sum(times.values())
  over = [s for s in times.values() if s > 10]
  return [
    f"{len(times)} tests run, {len(skipped)} skipped: {total:,.0f} s ({total / 60:.1f} min) "
    "of test time",
    f"{len(over)} tests over 10 s: {sum(over):,.0f} s ({sum(over) / total:.0%} of the time)",
  ]
