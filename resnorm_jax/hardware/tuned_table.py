"""The tuned table (docs/tpu_compile/tuned.csv) read back: the winner of `compile_for --tune`
for a `:paper` config on a slice, as the `--config.k=v` keys that run it that way.

scripts/launch_tpu_vm.sh asks this module for the keys of the slice it launches onto and adds
them after the user's (a key the user gave is kept as given); `--untuned` there runs the config
as it is. A row applies to a launch of the same config at the `:paper` scale on a slice of the
same TPU generation and chip count: the winner was compiled for that global batch on that many
chips, and a smaller slice holds more of it per chip. The winner's XLA flags (`maxtext`,
`no_windowed`, or both joined by "+": tune.FLAG_PARTS) are compile options, not config keys:
they go to the run as LIBTPU_INIT_ARGS.

A winner keeps the experiment (the global batch, float32 master weights, the loss to bfloat16
tolerance: tests/test_sharding.py's candidate meshes and remat policies, splash = dense in
tests/test_splash_attention.py); only how the step runs changes.

  python -m resnorm_jax.hardware.tuned_table CONFIG ACCELERATOR [--config.k=v ...]
prints one key per line (none where no row applies) and `LIBTPU_INIT_ARGS=...` as the last
line where the winner has XLA flags; what it did, in one line, on stderr.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from resnorm_jax.files import csv_table
from resnorm_jax.hardware import tpu_target
from resnorm_jax.hardware.tune import Candidate, overrides
from resnorm_jax.hardware.xla_flags import flag_parts, flags_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "docs", "tpu_compile", "tuned.csv")
SCALE = "paper"  # the scale every row was tuned at


@dataclasses.dataclass(frozen=True)
class Winner:
  """One row of the table: where it was tuned and the candidate that won."""

  config: str  # configs/<config>.py
  topology: str  # e.g. v5e:4x4
  chips: int
  candidate: Candidate
  est_mfu: float

  @property
  def generation(self) -> str:
    return self.topology.split(":")[0]


def read(path: str = TABLE) -> list[Winner]:
  """The rows of the tuned table; [] where the file is missing (an install without docs/)."""
  if not os.path.exists(path):
    return []
  rows = csv_table.read_csv(path)
  return [
    Winner(
      config=r["config"],
      topology=r["topology"],
      chips=int(r["chips"]),
      candidate=Candidate(
        mesh=r["mesh"].rstrip("0123456789"),  # fsdp16 -> fsdp: the table names its size
        remat=r["remat"],
        attention=r["attention"],
        flags=r["xla_flags"],
      ),
      est_mfu=float(r["est_mfu"]),
    )
    for r in rows
  ]


def _chips(name: str) -> int:
  """The chips of a topology name ('v5e:4x4' -> 16), as tpu_target counts them."""
  return tpu_target._prod([int(side) for side in name.split(":")[1].split("x")])


def lookup(config: str, accelerator: str, rows: list[Winner]) -> tuple[Winner | None, str]:
  """(the row that applies to launching `config` on `accelerator`, or None; why, in words).
  `config` is a --config value (path[:scale]); `accelerator` a type or topology that
  tpu_target reads (TargetError for one it does not)."""
  path, _, scale = config.partition(":")
  name = os.path.basename(path)[: -len(".py")] if path.endswith(".py") else os.path.basename(path)
  chip, topology = tpu_target.topology_name(accelerator)
  chips = _chips(topology)
  if scale != SCALE:
    return None, f"the tuned table holds :{SCALE} runs, not {config}"
  mine = [w for w in rows if w.config == name and w.generation == chip.name]
  if not mine:
    return None, f"no tuned row for {name} on {chip.name} in docs/tpu_compile/tuned.csv"
  same = [w for w in mine if w.chips == chips]
  if not same:
    tuned = ", ".join(w.topology for w in mine)
    return None, (
      f"{name} was tuned on {tuned}, not on {chips} chips ({accelerator}): a different "
      "slice size holds another share of the batch per chip"
    )
  return same[0], f"{name} on {same[0].topology}"


def launch_keys(winner: Winner, given: list[str]) -> tuple[list[str], str | None]:
  """(the winner's --config.k=v keys that `given` does not set, LIBTPU_INIT_ARGS or None)."""
  taken = {a.split("=", 1)[0] for a in given}
  keys = [
    f"--config.{k}={v}"
    for k, v in overrides(winner.candidate, winner.chips).items()
    if f"--config.{k}" not in taken
  ]
  flags = flags_of(winner.candidate.flags)
  libtpu = " ".join(f"--{k}={v}" for k, v in flags.items()) if flags else None
  return keys, libtpu


def main(argv: list[str]) -> int:
  if len(argv) < 2 or any(not a.startswith("--config.") for a in argv[2:]):
    print("usage: tuned_table CONFIG ACCELERATOR [--config.k=v ...]", file=sys.stderr)
    return 2
  config, accelerator, given = argv[0], argv[1], argv[2:]
  try:
    winner, why = lookup(config, accelerator, read())
  except tpu_target.TargetError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if winner is None:
    print(f"tuned: none ({why}); the config's own settings run", file=sys.stderr)
    return 0
  keys, libtpu = launch_keys(winner, given)
  added = " ".join(keys) or "nothing (every key given)"
  named = " and ".join(flag_parts(winner.candidate.flags))
  flags = f"; the {named} XLA flags as LIBTPU_INIT_ARGS" if libtpu else ""
  print(
    f"tuned: {why}, est MFU {winner.est_mfu:.1%} (cost model): adds {added}{flags} "
    "(--untuned runs the config as it is)",
    file=sys.stderr,
  )
  for k in keys:
    print(k)
  if libtpu:
    print(f"LIBTPU_INIT_ARGS={libtpu}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
