"""csv_table: the bytes each table is written with (the csv module's "\r\n" line end unless a
table asks for "\n"), an appended file's one header, and a symbolic link refused, not followed."""

import os

import pytest

from resnorm_jax.files import csv_table
from resnorm_jax.files.nofollow import SymlinkRefused

ROWS = [{"a": 1, "b": 0.5}, {"a": 2, "b": None}, {"a": "x,y"}]


def test_the_csv_modules_bytes(tmp_path):
  path = tmp_path / "t.csv"
  assert csv_table.write_csv(path, ROWS, ["a", "b"]) == str(path)
  assert path.read_bytes() == b'a,b\r\n1,0.5\r\n2,\r\n"x,y",\r\n'
  csv_table.write_csv(path, ROWS, ["a", "b"], lineterminator="\n")
  assert path.read_bytes() == b'a,b\n1,0.5\n2,\n"x,y",\n'
  assert csv_table.read_csv(path) == [
    {"a": "1", "b": "0.5"},
    {"a": "2", "b": ""},
    {"a": "x,y", "b": ""},
  ]
  assert csv_table.read_header(path) == ["a", "b"]


def test_columns_beyond_the_fields_raise_or_are_left_out(tmp_path):
  path = tmp_path / "t.csv"
  with pytest.raises(ValueError):
    csv_table.write_csv(path, ROWS, ["a"])
  csv_table.write_csv(path, ROWS, ["a"], extrasaction="ignore")
  assert path.read_text() == 'a\n1\n2\n"x,y"\n'


def test_no_rows_is_the_header_alone(tmp_path):
  path = tmp_path / "t.csv"
  csv_table.write_csv(path, [], ["a", "b"], lineterminator="\n")
  assert path.read_bytes() == b"a,b\n"
  assert csv_table.read_csv(path) == []
  (tmp_path / "empty.csv").write_text("")
  assert csv_table.read_header(tmp_path / "empty.csv") == []


def test_an_appended_file_gets_its_header_once(tmp_path):
  path = tmp_path / "t.csv"
  csv_table.write_csv(path, ROWS[:1], ["a", "b"], lineterminator="\n", append=True)
  csv_table.write_csv(path, ROWS[1:2], ["a", "b"], lineterminator="\n", append=True)
  assert path.read_bytes() == b"a,b\n1,0.5\n2,\n"


def test_csv_text_is_what_the_file_holds(tmp_path):
  path = tmp_path / "t.csv"
  csv_table.write_csv(path, ROWS, ["a", "b"])
  assert csv_table.csv_text(ROWS, ["a", "b"]).encode() == path.read_bytes()
  assert csv_table.csv_text(ROWS[:1], ["a", "b"], header=False) == "1,0.5\r\n"


@pytest.mark.parametrize("append", [False, True])
def test_a_symbolic_link_is_refused_not_followed(tmp_path, append):
  target, link = tmp_path / "target.csv", tmp_path / "link.csv"
  target.write_text("kept\n")
  os.symlink(target, link)
  with pytest.raises(SymlinkRefused):
    csv_table.write_csv(link, ROWS, ["a", "b"], append=append)
  assert target.read_text() == "kept\n"
