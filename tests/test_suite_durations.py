"""resnorm_jax/analysis/suite_durations.py (scripts/suite_durations.py's tables): the per-file
and slowest tables from JUnit XML, skipped tests counted apart."""

from resnorm_jax.analysis import suite_durations

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_one" time="12.5"/>
<testcase classname="tests.test_a" name="test_two" time="0.5"/>
<testcase classname="tests.test_b" name="test_long" time="0.01"><skipped message="long"/></testcase>
<testcase classname="tests.test_b" name="test_three" time="3.0"/>
</testsuite></testsuites>
"""


def test_tables_time_the_tests_that_ran_and_count_the_skipped(tmp_path, read_csv):
  junit = tmp_path / "suite.xml"
  junit.write_text(JUNIT)
  times, skipped = suite_durations.case_times([str(junit)])
  assert times == {
    ("tests/test_a.py", "test_one"): 12.5,
    ("tests/test_a.py", "test_two"): 0.5,
    ("tests/test_b.py", "test_three"): 3.0,
  }
  assert skipped == {("tests/test_b.py", "test_long")}
  suite_durations.write_tables(times, str(tmp_path))
  assert read_csv(tmp_path / "by_file.csv") == [
    {"file": "tests/test_a.py", "tests": "2", "seconds": "13.0"},
    {"file": "tests/test_b.py", "tests": "1", "seconds": "3.0"},
  ]
  assert read_csv(tmp_path / "slowest.csv")[0] == {
    "test": "tests/test_a.py::test_one",
    "seconds": "12.5",
  }
  lines = suite_durations.totals(times, skipped)
  assert lines[0].startswith("3 tests run, 1 skipped: 16 s (0.3 min)")
  assert lines[1] == "1 tests over 10 s: 12 s (78% of the time)"
