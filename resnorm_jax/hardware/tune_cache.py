"""What a tune compiled, kept: one candidate's `Result` and the JSON file of them (`Cache`).

The key of a result (`cache_key`) is everything that decides the compiled program: the config,
the topology, the candidate, whether the loop correction ran, the vocabulary, the jax and
libtpu versions, and a hash of the model's and the train step's source files
(`program_version`): a rerun compiles nothing it has already compiled, and a change to the
code is a new program, not read from a compile of the old one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from resnorm_jax.files.nofollow import open_nofollow

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "resnorm_jax", "tune.json")


@dataclasses.dataclass
class Result:
  """One candidate compiled (or refused): what a candidate line prints; JSON in the cache."""

  fits: bool
  per_chip_bytes: float | None = None
  hbm_limit: float = 0.0
  corrected: bool = False
  step_s: float | None = None  # estimate, loop-corrected only where `corrected`
  source: str = ""
  mfu: float | None = None
  bound: str = ""  # FLOPs | bytes: the larger of the cost's two roofline terms
  flops: float = 0.0  # per chip, the step's (loop-corrected where `corrected`)
  bytes: float = 0.0
  top_ops: list[str] = dataclasses.field(default_factory=list)
  raw_cost: dict[str, float] = dataclasses.field(default_factory=dict)  # the first compile's
  # The first compile's HBM bytes attributed op by op, times its loops' trips (hlo_bytes), and
  # the roofline with them in place of the loop-corrected bytes (0: compiled before this field).
  attributed_bytes: float = 0.0
  attributed_step_s: float | None = None
  attributed_mfu: float | None = None
  attribution: int = 0  # hlo_bytes.VERSION of the count (0: before versions; see `_stale`)
  cpu_s: float = 0.0
  error: str = ""  # refused before compiling (e.g. a kernel the shapes do not allow)
  program: str = ""  # program_hash of the step compiled ("": refused before lowering)
  cached: bool = False


def program_hash(lowered_text: str) -> str:
  """The hash of a train step as lowered (its StableHLO text, without source locations): the
  program XLA compiles, whatever code wrote it."""
  return hashlib.sha256(lowered_text.encode()).hexdigest()[:16]


def cache_key(program: str, topology: str, flags: dict[str, str], corrected: bool) -> str:
  """The key of one compile of `program` (program_hash) for `topology` with the compile
  options `flags`, loop-corrected or not, by this jax and libtpu."""
  import jax

  try:
    from libtpu import __version__ as libtpu_version
  except ImportError:
    libtpu_version = ""
  what = {
    "program": program,
    "topology": topology,
    "flags": flags,
    "corrected": corrected,
    "versions": [jax.__version__, libtpu_version],
  }
  return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


class Cache:
  """Candidate results in one JSON file ({key: Result fields}), written after each compile."""

  def __init__(self, path: str):
    self.path, self.entries = path, {}
    if path and os.path.exists(path):
      with open(path) as f:
        self.entries = json.load(f)

  def get(self, key: str) -> Result | None:
    e = self.entries.get(key)
    return Result(**{**e, "cached": True}) if e else None

  def put(self, key: str, r: Result) -> None:
    if not self.path:
      return
    self.entries[key] = {**dataclasses.asdict(r), "cached": False}
    os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
    tmp = f"{self.path}.{os.getpid()}.tmp"
    with open_nofollow(tmp, "w") as f:
      json.dump(self.entries, f, indent=1, sort_keys=True)
    os.replace(tmp, self.path)
