"""Every result derived from the committed run folders, rebuilt by one command: each derived
table, figure and generated section of the docs, in dependency order, from the runs alone.

python scripts/results.py            # rebuild in place; print each file that changed
python scripts/results.py --check    # rebuild in a temporary copy; exit 1 naming each derived
                                     # file that differs from what its runs give now, with its
                                     # first differing line (what CI runs)
python scripts/results.py --list     # the steps, in order

The steps are the per-axis scripts (resnorm_jax/analysis/results_build.py STEPS), each run
as its own process from the repository root (or the copy's), so the build is exactly the
commands the docs give. A step reads runs and the tables of the steps before it, never a
number typed by hand: scripts/claims.py comes last and writes the README's Results,
docs/results.md's generated section and the docs READMEs' generated sections from the
tables. Text artefacts are compared line by line (tables row by row); a figure by the tables
it is drawn from, not by its bytes. Each step runs traced (resnorm_jax/analysis/traced_step.py)
and docs/provenance.csv records, for every derived table, the step that wrote it and the run
folders behind it: how many, and a digest of their files, so an added or edited run shows in
the table it reaches. No JAX here: every step reads files.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from resnorm_jax.analysis.results_build import (
  ROOT,
  STEPS,
  artefacts,
  compare,
  copy_tree,
  run_steps,
)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true", help="rebuild in a copy and compare")
  parser.add_argument("--list", action="store_true", help="print the steps")
  parser.add_argument("--root", default=ROOT, help=argparse.SUPPRESS)  # the tests' copies
  parser.add_argument(
    "--only", default="", help="comma-separated step names (--list): run only these, in order"
  )
  args = parser.parse_args()
  steps = STEPS
  if args.only:
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in {s.name for s in STEPS}]
    if unknown:
      sys.exit(f"--only: no step {unknown[0]!r}; the steps: {', '.join(s.name for s in STEPS)}")
    steps = tuple(s for s in STEPS if s.name in names)
  if args.list:
    for i, step in enumerate(STEPS, 1):
      print(f"{i:2d}. {step.name}: python {' '.join(step.argv)}")
    return
  root = os.path.abspath(args.root)
  if not args.check:
    before = artefacts(root)
    failures = run_steps(root, steps)
    after = artefacts(root)
    changed = sorted(p for p in after if before.get(p) != after[p])
    for path in changed:
      print(f"changed: {path}")
    print(f"{len(steps)} steps, {len(changed)} files changed")
    if failures:
      sys.exit("error: " + "\n  ".join(failures))
    return
  with tempfile.TemporaryDirectory(prefix="results-check-") as tmp:
    copy = os.path.join(tmp, "repo")
    copy_tree(root, copy)
    failures = run_steps(copy, steps)
    problems = compare(root, copy)
  for p in problems:
    print(f"stale: {p}")
  if failures or problems:
    sys.exit(
      "error: "
      + (f"{len(failures)} step(s) failed: " + "; ".join(failures) + ". " if failures else "")
      + (
        f"{len(problems)} derived file(s) differ from what their runs give now: run "
        "`python scripts/results.py` and commit what it changes"
        if problems
        else ""
      )
    )
  print(f"every derived file agrees with its runs ({len(steps)} steps)")


if __name__ == "__main__":
  main()
