"""The no-context baseline: token counts, the unigram entropy and the held-out unigram
cross-entropy, the loss a model that learned nothing about context reaches. Pure NumPy.
"""

import numpy as np

from resnorm_jax.data.token_files import DataError


def token_counts(tokens: np.ndarray, vocab_size: int, chunk: int = 1 << 24) -> np.ndarray:
  """How often each id occurs: int64 [vocab_size]."""
  known = getattr(tokens, "counts", None)  # a prepared split: counted when it was written
  if known is not None:
    if len(known) > vocab_size and known[vocab_size:].any():
      raise DataError(f"token ids up to {len(known) - 1} are out of range for {vocab_size=}")
    return np.pad(known[:vocab_size], (0, max(0, vocab_size - len(known))))
  counts = np.zeros(vocab_size, dtype=np.int64)
  # Chunked so a large memmap is never widened to int64 in one piece.
  for i in range(0, len(tokens), chunk):
    c = np.bincount(np.asarray(tokens[i : i + chunk]), minlength=vocab_size)
    if len(c) > vocab_size:
      raise DataError(f"token id {len(c) - 1} is out of range for vocab_size={vocab_size}")
    counts += c
  return counts


def unigram_entropy(tokens: np.ndarray, vocab_size: int, chunk: int = 1 << 24) -> float:
  """Entropy in nats/token of the token frequencies: the loss of a context-free model."""
  if len(tokens) == 0:
    raise DataError("unigram_entropy of an empty token array")
  counts = token_counts(tokens, vocab_size, chunk)
  p = counts[counts > 0] / counts.sum()
  return float(-(p * np.log(p)).sum())


class Counted:
  """A token array with its counts taken once (token_counts reads `.counts`, as it does a
  prepared split's): a split scored several times is counted once."""

  def __init__(self, tokens, vocab_size: int):
    self.counts = token_counts(tokens, vocab_size)
    self._len = len(tokens)

  def __len__(self) -> int:
    return self._len


# Add-one (Laplace) smoothing of the train counts: an id the train split never holds gets
# probability 1/(n + V), finite, as a context-free model that predicts every id would give.
UNIGRAM_SMOOTHING = 1.0


def heldout_unigram_entropy(
  train: np.ndarray, val: np.ndarray, vocab_size: int, chunk: int = 1 << 24
) -> float:
  """Cross-entropy (nats/token) of the train split's unigram distribution on the val split.

  The plateau a model that learned nothing about context reaches on the eval loss: it can
  only know the train frequencies, and is scored on held-out text. Higher than the train
  split's own entropy by the KL divergence between the two splits' frequencies.
  """
  if len(train) == 0 or len(val) == 0:
    raise DataError("heldout_unigram_entropy needs non-empty train and val token arrays")
  p_train = token_counts(train, vocab_size, chunk) + UNIGRAM_SMOOTHING
  p_train = p_train / p_train.sum()
  val_counts = token_counts(val, vocab_size, chunk)
  return float(-(val_counts * np.log(p_train)).sum() / val_counts.sum())
