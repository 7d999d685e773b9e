"""What the committed results were built from: every run folder under docs/ (a folder holding
summary.json), counted and digested per sweep folder, into docs/runs_manifest.json. The
results build (scripts/results.py) writes it first, so `--check` fails when a run folder was
added, removed or its summary edited without the build being run again, whichever table
reads it. No JAX here.

python scripts/run_manifest.py [--out=docs/runs_manifest.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

from resnorm_jax.files.nofollow import open_nofollow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {"ckpt", "tb", "__pycache__"}


def manifest(docs: str) -> dict:
  """{"runs": n, "digest": sha256, "folders": {sweep folder: {"runs": n, "digest": sha256}}}:
  each digest over the sorted (run folder, sha256 of its summary.json) of the runs under it."""
  per: dict[str, list[tuple[str, str]]] = {}
  for here, dirs, files in os.walk(docs):
    dirs[:] = sorted(d for d in dirs if d not in SKIP)
    if "summary.json" in files:
      with open(os.path.join(here, "summary.json"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
      rel = os.path.relpath(here, ROOT)
      per.setdefault(os.path.dirname(rel), []).append((rel, digest))

  def digest(items: list[tuple[str, str]]) -> str:
    return hashlib.sha256(json.dumps(sorted(items)).encode()).hexdigest()

  every = [item for items in per.values() for item in items]
  return {
    "runs": len(every),
    "digest": digest(every),
    "folders": {k: {"runs": len(v), "digest": digest(v)} for k, v in sorted(per.items())},
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default="docs/runs_manifest.json")
  args = parser.parse_args()
  m = manifest(os.path.join(ROOT, "docs"))
  with open_nofollow(args.out, "w") as f:
    json.dump(m, f, indent=1, sort_keys=True)
    f.write("\n")
  print(f"{m['runs']} runs in {len(m['folders'])} folders -> {args.out}")


if __name__ == "__main__":
  main()
