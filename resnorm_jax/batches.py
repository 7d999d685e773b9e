"""Batches of a token array: a batch is a pure function of (seed, step, process index).

Training batch n of seed s (`get_batch`) and held-out batch i (`eval_batch`, the same for
every run) as int32 (inputs, targets) rows of this process. Pure NumPy. Shapes: B = rows of
this process, T = sequence length.
"""

import numpy as np

from resnorm_jax.shards import DataError

# Held-out batches draw from their own stream: a 3-word key never equals a train [seed, step].
EVAL_STREAM = (12345, 1)


def _rows(
  rng: np.random.Generator,
  tokens: np.ndarray,
  batch_size: int,
  seq_len: int,
  process_index: int,
  process_count: int,
) -> tuple[np.ndarray, np.ndarray]:
  """Draws the global batch's offsets, gathers only this process's rows."""
  if batch_size <= 0 or seq_len <= 0:
    raise DataError(f"batch_size={batch_size} and seq_len={seq_len} must be positive")
  if process_count <= 0 or not 0 <= process_index < process_count:
    raise DataError(f"process_index={process_index} must be in [0, process_count={process_count})")
  if batch_size % process_count:
    raise DataError(f"batch_size={batch_size} is not divisible by process_count={process_count}")
  if len(tokens) < seq_len + 1:
    raise DataError(f"{len(tokens)} tokens cannot fill one sequence of seq_len={seq_len} + 1")
  # All offsets are drawn on every process, so the global batch does not depend on the
  # process count; only this process's rows are read from the corpus.
  starts_B = rng.integers(0, len(tokens) - seq_len, size=batch_size)
  b = batch_size // process_count
  starts_B = starts_B[process_index * b : (process_index + 1) * b]
  window_BxT1 = np.asarray(tokens[starts_B[:, None] + np.arange(seq_len + 1)], dtype=np.int32)
  return window_BxT1[:, :-1], window_BxT1[:, 1:]


def get_batch(
  tokens: np.ndarray,
  *,
  seed: int,
  step: int,
  batch_size: int,
  seq_len: int,
  process_index: int = 0,
  process_count: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
  """Training (inputs_BxT, targets_BxT) int32 for this process: a pure function of its args."""
  if seed < 0 or step < 0:
    raise DataError(f"seed={seed} and step={step} must be non-negative")
  rng = np.random.default_rng([seed, step])
  return _rows(rng, tokens, batch_size, seq_len, process_index, process_count)


def eval_batch(
  tokens: np.ndarray,
  *,
  index: int,
  batch_size: int,
  seq_len: int,
  process_index: int = 0,
  process_count: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
  """Held-out batch number `index`: the same rows for every run, whatever its seed."""
  if index < 0:
    raise DataError(f"eval batch index={index} must be non-negative")
  rng = np.random.default_rng([*EVAL_STREAM, index])
  return _rows(rng, tokens, batch_size, seq_len, process_index, process_count)
