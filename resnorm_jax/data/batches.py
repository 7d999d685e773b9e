"""Batches of a token array: a batch is a pure function of (seed, step, process index).

Training batch n of seed s (`get_batch`) and held-out batch i (`eval_batch`, the same for
every run) as int32 (inputs, targets) rows of this process. Pure NumPy. Shapes: B = rows of
this process, T = sequence length.

Two samplers (`data.sampling`): `random` draws each window's start uniformly, with replacement
(every committed CPU result; over a long run some tokens are never seen and others often), and
`epoch` cuts the corpus into W = (N - 1) // T non-overlapping windows and visits them in a
fresh pseudo-random order each epoch, so every window is seen once per epoch. The order is a
keyed Feistel permutation of [0, W) evaluated per index: no O(W) table, still a pure function
of (seed, epoch, position), so a resumed run and each process see exactly their batches.
"""

import numpy as np

from resnorm_jax.data.token_files import DataError

# Held-out batches draw from their own stream: a 3-word key never equals a train [seed, step].
EVAL_STREAM = (12345, 1)
SAMPLERS = ("random", "epoch")
_MASK64 = np.uint64(2**64 - 1)


def _mix(x: np.ndarray) -> np.ndarray:
  """splitmix64's finaliser: a bijective avalanche of uint64 words."""
  with np.errstate(over="ignore"):
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def permute(index: np.ndarray, domain: int, key: int, rounds: int = 4) -> np.ndarray:
  """A pseudo-random permutation of [0, domain) applied to `index` (int array in range).

  A balanced Feistel network on the smallest even number of bits that covers `domain`, with
  cycle-walking (values that land outside [0, domain) are permuted again): a bijection of
  [0, domain), the same for the same (domain, key), different across keys.
  """
  if domain < 1:
    raise DataError(f"cannot permute an empty range (domain={domain})")
  half = max(1, (int(domain - 1).bit_length() + 1) // 2)
  lo_mask = np.uint64((1 << half) - 1)
  key64 = _mix(np.uint64(key & 0xFFFFFFFFFFFFFFFF))

  def feistel(x: np.ndarray) -> np.ndarray:
    left, right = x >> np.uint64(half), x & lo_mask
    for r in range(rounds):
      with np.errstate(over="ignore"):
        f = _mix(right ^ key64 ^ (np.uint64(r + 1) * np.uint64(0x9E3779B97F4A7C15))) & lo_mask
      left, right = right, left ^ f
    return (left << np.uint64(half)) | right

  x = feistel(np.asarray(index, dtype=np.uint64))
  outside = x >= np.uint64(domain)
  while outside.any():  # cycle-walking: at most a few rounds (the cover is < 4x the domain)
    x[outside] = feistel(x[outside])
    outside = x >= np.uint64(domain)
  return x.astype(np.int64)


def epoch_starts(n_tokens: int, seq_len: int, seed: int, first: int, count: int) -> np.ndarray:
  """Starts of global windows first .. first+count-1 of the `epoch` sampler."""
  windows = (n_tokens - 1) // seq_len
  g = np.arange(first, first + count, dtype=np.int64)
  epoch, pos = g // windows, g % windows
  out = np.empty(count, dtype=np.int64)
  for e in np.unique(epoch):  # a batch spans at most two epochs
    sel = epoch == e
    key = int(np.random.default_rng([seed, int(e), 7]).integers(0, 2**63))
    out[sel] = permute(pos[sel], windows, key) * seq_len
  return out


def _rows(
  rng: np.random.Generator | None,
  tokens: np.ndarray,
  batch_size: int,
  seq_len: int,
  process_index: int,
  process_count: int,
  *,
  check_only: bool = False,
) -> tuple[np.ndarray, np.ndarray] | None:
  """Draws the global batch's offsets, gathers only this process's rows (check_only: only
  the checks of the arguments)."""
  if batch_size <= 0 or seq_len <= 0:
    raise DataError(f"batch_size={batch_size} and seq_len={seq_len} must be positive")
  if process_count <= 0 or not 0 <= process_index < process_count:
    raise DataError(f"process_index={process_index} must be in [0, process_count={process_count})")
  if batch_size % process_count:
    raise DataError(f"batch_size={batch_size} is not divisible by process_count={process_count}")
  if len(tokens) < seq_len + 1:
    raise DataError(f"{len(tokens)} tokens cannot fill one sequence of seq_len={seq_len} + 1")
  if check_only:
    return None
  # All offsets are drawn on every process, so the global batch does not depend on the
  # process count; only this process's rows are read from the corpus.
  starts_B = rng.integers(0, len(tokens) - seq_len, size=batch_size)
  return _gather(tokens, starts_B, seq_len, process_index, process_count)


def _gather(
  tokens: np.ndarray, starts_B: np.ndarray, seq_len: int, process_index: int, process_count: int
) -> tuple[np.ndarray, np.ndarray]:
  """This process's rows of the global batch whose windows start at starts_B."""
  batch_size = len(starts_B)
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
  sampling: str = "random",
) -> tuple[np.ndarray, np.ndarray]:
  """Training (inputs_BxT, targets_BxT) int32 for this process: a pure function of its args."""
  if seed < 0 or step < 0:
    raise DataError(f"seed={seed} and step={step} must be non-negative")
  if sampling not in SAMPLERS:
    raise DataError(f"data.sampling={sampling!r} is not one of {', '.join(SAMPLERS)}")
  if sampling == "random":
    rng = np.random.default_rng([seed, step])
    return _rows(rng, tokens, batch_size, seq_len, process_index, process_count)
  _rows(None, tokens, batch_size, seq_len, process_index, process_count, check_only=True)
  starts_B = epoch_starts(len(tokens), seq_len, seed, step * batch_size, batch_size)
  return _gather(tokens, starts_B, seq_len, process_index, process_count)


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


def eval_targets(
  tokens: np.ndarray, n_batches: int, *, batch_size: int, seq_len: int
) -> np.ndarray:
  """Every target token of held-out batches 0 .. n_batches-1 (the global batches): the tokens
  a periodic eval scores, e.g. to know their own no-context loss."""
  rows = [
    eval_batch(tokens, index=i, batch_size=batch_size, seq_len=seq_len)[1].ravel()
    for i in range(n_batches)
  ]
  return np.concatenate(rows)


def distinct_eval_targets(n_tokens: int, n_batches: int, *, batch_size: int, seq_len: int) -> int:
  """How many distinct held-out positions held-out batches 0 .. n_batches-1 score: their
  windows are drawn with replacement, so a held-out split smaller than the eval is scored
  with repeats (1,000 tokens can never give 16,384 distinct ones)."""
  positions = eval_targets(
    np.arange(n_tokens, dtype=np.int64), n_batches, batch_size=batch_size, seq_len=seq_len
  )
  return len(np.unique(positions))
