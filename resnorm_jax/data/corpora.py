"""The corpus: the train and held-out token arrays of `data.source`, with how they were split
and what data they are. Pure NumPy.

sources.py loads the corpus a config names (stdlib_source.py, text_source.py,
tokens_source.py: one module per source) and checks it against the model; split.py chooses
its held-out part; vocab.py resolves model.vocab_size from the data. Batches of it are
batches.py; the no-context baseline's statistics unigram.py.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Train and held-out 1-D token arrays (uint8 bytes or uint16/uint32 token ids).

  `split` says how the held-out part was made (recorded in config.json and summary.json):
  `method` (`by_file_hash`, `tail`, `val_path`), the token counts of both splits, the
  file counts and how many files matched by `data.val_path` were left out of training.
  `fingerprint`: what the data is (data_fingerprint.py), in config.json and checkpoints.
  `warning`: one line the run prints under its setup line ('' for none): the stdlib corpus of
  another Python than the committed results' (stdlib_source.results_warning).
  """

  train: np.ndarray
  val: np.ndarray
  description: str
  split: dict = dataclasses.field(default_factory=dict)
  fingerprint: dict = dataclasses.field(default_factory=dict)
  warning: str = ""
