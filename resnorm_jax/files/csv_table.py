"""CSV tables: one reader and one writer, the argument order (path, rows, fields) everywhere.

A row is a dict keyed by column name. The writer writes through the symlink-safe open
(nofollow.open_nofollow), with the header first (an appended file gets it only where it is
new), and leaves the bytes to the csv module: the line end is the caller's (the csv module's
"\\r\\n" unless `lineterminator="\\n"`), each table keeps the one it was committed with. No JAX.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from resnorm_jax.files.nofollow import open_nofollow

Row = Mapping[str, Any]


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
  """The rows of a CSV file, as dicts of strings keyed by its header."""
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


def read_header(path: str | os.PathLike) -> list[str]:
  """The column names of a CSV file (its first row); [] for an empty file."""
  with open(path, newline="") as f:
    return next(csv.reader(f), [])


def csv_text(
  rows: Iterable[Row],
  fields: Sequence[str],
  *,
  lineterminator: str = "\r\n",
  extrasaction: str = "raise",
  header: bool = True,
) -> str:
  """`rows` as CSV text under the columns `fields` (the header line first unless
  header=False): a missing value or None is empty, a key outside `fields` raises ValueError
  (extrasaction="raise") or is left out ("ignore")."""
  buf = io.StringIO()
  writer = csv.DictWriter(
    buf, list(fields), extrasaction=extrasaction, lineterminator=lineterminator
  )
  if header:
    writer.writeheader()
  writer.writerows(rows)
  return buf.getvalue()


def write_csv(
  path: str | os.PathLike,
  rows: Iterable[Row],
  fields: Sequence[str],
  *,
  lineterminator: str = "\r\n",
  extrasaction: str = "raise",
  append: bool = False,
) -> str:
  """`rows` under the columns `fields` (csv_text) as the file `path`, never through a symbolic
  link; append=True adds them at its end, the header only where the file does not exist yet.
  Returns the path."""
  path = os.fspath(path)
  header = not (append and os.path.exists(path))
  text = csv_text(
    rows, fields, lineterminator=lineterminator, extrasaction=extrasaction, header=header
  )
  with open_nofollow(path, "a" if append else "w", newline="") as f:
    f.write(text)
  return path
