"""The held-out split by document hash: prepare_data's folders, and `data.split=hash` for text.

A document is held out when the blake2b hash of its UTF-8 bytes, read as a number in [0, 1),
falls below the held-out fraction: nanoGPT's random split made deterministic, and the same
text lands on the same side whatever the order of the documents, the number of workers or the
tokenizer (an exact duplicate never straddles the split). A document longer than the piece
limit is first cut at line ends into pieces, each assigned by its own hash, so a small corpus,
even a single file, still has enough units for its fraction: the limit is 1/32 of the expected
held-out bytes, within [1 KiB, 1 MiB] (in a web corpus almost no document is cut).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

HASH = "blake2b-64 of each piece's UTF-8 bytes, as a fraction of 2**64"
MIN_PIECE, MAX_PIECE = 1 << 10, 1 << 20  # bytes
PIECES_PER_HELD_OUT = 32  # pieces the expected held-out part spans, at least


def position(piece: bytes) -> float:
  """Where a piece's hash falls in [0, 1)."""
  return int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "big") / 2**64


def is_held_out(piece: bytes, fraction: float) -> bool:
  """Whether a piece belongs to the held-out split."""
  return position(piece) < fraction


def piece_limit(total_bytes: int | None, fraction: float) -> int:
  """The longest piece: 1/32 of the expected held-out bytes, within [1 KiB, 1 MiB]; 1 MiB when
  the corpus's size is unknown (a streamed dataset)."""
  if not total_bytes:
    return MAX_PIECE
  return int(min(MAX_PIECE, max(MIN_PIECE, total_bytes * fraction / PIECES_PER_HELD_OUT)))


def _cut(doc: bytes, start: int, limit: int) -> int:
  """The end of the piece starting at `start`: after the last newline within `limit` bytes,
  else at `limit` backed off to a UTF-8 character boundary."""
  end = start + limit
  if end >= len(doc):
    return len(doc)
  newline = doc.rfind(b"\n", start, end)
  if newline >= 0:
    return newline + 1
  while end > start + 1 and doc[end] & 0xC0 == 0x80:  # a continuation byte: not a boundary
    end -= 1
  return end


def pieces(doc: bytes, limit: int) -> Iterator[bytes]:
  """A document cut at line ends into pieces of at most `limit` bytes (whole when shorter)."""
  start = 0
  while start < len(doc):
    end = _cut(doc, start, limit)
    yield doc[start:end]
    start = end


def split(docs: Iterable[bytes], fraction: float, limit: int) -> tuple[list[bytes], list[bytes]]:
  """(train pieces, held-out pieces) of the documents, each in its order."""
  train: list[bytes] = []
  val: list[bytes] = []
  for doc in docs:
    for piece in pieces(doc, limit):
      (val if is_held_out(piece, fraction) else train).append(piece)
  return train, val
