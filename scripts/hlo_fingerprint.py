"""sha256 of the lowered train-step HLO of a few named configs (a refactor guard).

  python scripts/hlo_fingerprint.py            # print the hashes
  python scripts/hlo_fingerprint.py --check    # exit 1 unless equal to the recorded hashes
  python scripts/hlo_fingerprint.py --write    # record them in tests/data/hlo_fingerprint.json
  python scripts/hlo_fingerprint.py --all      # also every named config at :smoke (printed only)
  python scripts/hlo_fingerprint.py configs/ngpt_96L.py:smoke  # also these (printed only)

A change that claims to move code without changing what it computes should leave these
hashes byte-identical: the StableHLO text (no source locations) of the jitted train step,
traced abstractly through the run setup the loop uses (nothing allocated or compiled).
Hashes are those of this jax/flax version on CPU with one device.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RECORD = os.path.join(ROOT, "tests", "data", "hlo_fingerprint.json")
SPECS = (
  "configs/nanogpt_char.py",
  "configs/prenorm_96L.py:smoke",
  "configs/postnorm_96L.py",
  "configs/deepnorm_1000L.py:smoke",
)


def fingerprint(spec: str) -> str:
  """sha256 of the StableHLO text of `spec`'s lowered train step."""
  from resnorm_jax.config import cli
  from resnorm_jax.train import run_setup

  run = run_setup.build(cli.load_config_file(spec))
  return hashlib.sha256(run.lower_step().as_text().encode()).hexdigest()


def every_smoke() -> list[str]:
  """Every named config at :smoke scale (each variant's recipe at 2 layers)."""
  names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "configs", "*.py")))
  skip = ("__init__", "base", "smoke", "nanogpt_char")
  return [f"configs/{n}.py:smoke" for n in names if n not in skip]


def main(argv: list[str]) -> int:
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  extra = [a for a in argv if not a.startswith("--")]
  specs = list(SPECS) + (every_smoke() if "--all" in argv else []) + extra
  hashes = {spec: fingerprint(spec) for spec in dict.fromkeys(specs)}
  for spec, digest in hashes.items():
    print(f"{digest}  {spec}")
  if "--write" in argv:
    from resnorm_jax.config import cli

    cli.write_json(RECORD, {s: hashes[s] for s in SPECS})
    print(f"wrote {RECORD}")
    return 0
  if "--check" in argv:
    recorded = json.load(open(RECORD))
    bad = [s for s in SPECS if hashes[s] != recorded.get(s)]
    for spec in bad:
      print(f"DIFFERENT {spec}: recorded {recorded.get(spec)}")
    print(f"{len(SPECS) - len(bad)}/{len(SPECS)} train-step HLO hashes equal to {RECORD}")
    return 1 if bad else 0
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
