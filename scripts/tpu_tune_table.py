"""docs/tpu_compile/tuned.csv: each :paper config tuned for a TPU slice (compile_for --tune),
its winner beside its untuned row of results.csv.

python scripts/tpu_tune_table.py [--out=docs/tpu_compile/tuned.csv] [--only=v5p:2x2x2,...]
  [--configs=postnorm_96L,...] [--tune_cache=~/.cache/resnorm_jax/tune.json]

Post-LN and DeepNorm compile to the same program (results.csv: the same memory and cost at
every depth and slice): Post-LN is tuned and DeepNorm's row is its winner compiled once for
DeepNorm (`tuned_on`). Rows are appended as they finish; a (config, topology) already in the
file is not tuned again (with --replace: unless its `program`, the hash of the winner's train
step as lowered, is not the one this code lowers; its new row takes its place), and every
compile is cached (resnorm_jax/hardware/tune_cache.py), so an interrupted table resumes
where it stopped. --reevaluate compiles each row's winner again where the code changed its
program, without a tune (the winner's settings kept). tuned_candidates.csv (--candidates_out): every
candidate of each tune, as its line prints it. est_*, bound and speedup: the TPU compiler's
cost-model estimates (loop-corrected; splash: + its kernel's analytic time), not measurements.
The rows and their columns: resnorm_jax/hardware/tuned_rows.py.
"""

import argparse
import os
import time

from resnorm_jax.files import csv_table
from resnorm_jax.hardware import compile_table
from resnorm_jax.hardware import tuned_rows as tr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The :paper configs by results.csv's labels (resnorm_jax/hardware/compile_table.py's CONFIGS).
CONFIGS = {label: (spec, o) for label, spec, o in compile_table.CONFIGS}

# (topology, labels), in the order they are done: Post-LN tuned on each slice first, then the
# other variants given its winner (`tuned_on`), then the 1000-layer configs on v5p.
PLAN = (
  ("v5p:2x2x2", ("postnorm_96L",)),
  ("v5e:4x4", ("postnorm_96L",)),
  ("v6e:4x4", ("postnorm_96L",)),
  ("v5p:2x2x2", ("deepnorm_96L", "prenorm_96L")),
  ("v5e:4x4", ("deepnorm_96L", "prenorm_96L")),
  ("v6e:4x4", ("deepnorm_96L", "prenorm_96L")),
  ("v5p:2x2x2", ("postnorm_1000L", "deepnorm_1000L", "prenorm_1000L")),
)
# DeepNorm compiles to Post-LN's program (results.csv: the same memory and cost everywhere):
# its row is Post-LN's winner compiled for it. Pre-LN's program differs a little (one more
# norm); with --given_winner its row is Post-LN's winner compiled for it too (not tuned).
SAME_PROGRAM = {"deepnorm_96L": "postnorm_96L", "deepnorm_1000L": "postnorm_1000L"}
LIKE = {"prenorm_96L": "postnorm_96L", "prenorm_1000L": "postnorm_1000L"}


def untuned(label: str, topology: str) -> dict[str, str]:
  """The (config, topology)'s `:paper` row of results.csv ({} where it has none)."""
  rows = tr.read(os.path.join(ROOT, "docs/tpu_compile/results.csv"))
  for r in rows:
    if (r["config"], r["topology"], r["settings"]) == (label, topology, ":paper"):
      return r
  return {}


def reevaluate(args) -> None:
  """--reevaluate: each selected row of --out whose winner this code lowers to another
  program, its winner compiled again (tune.evaluate, loop-corrected) and put in its place."""
  from resnorm_jax.hardware import tune

  for old in tr.read(args.out):
    if (args.only and old["topology"] not in args.only.split(",")) or (
      args.configs and old["config"] not in args.configs.split(",")
    ):
      continue
    start = time.perf_counter()
    w = winner(old)
    low, program = tune.lowered(*w)
    if old["program"] and low is not None and old["program"] == program:
      print(f"# {old['config']} on {old['topology']}: its program is this code's", flush=True)
      continue
    r = tune.evaluate(tune.Cache(args.tune_cache), *w, True)
    tr.put_row(args.out, tr.reevaluated(old, r))
    print(
      f"# {old['config']} on {old['topology']}: est step {old['est_step_s']} -> "
      f"{r.step_s:.4g} s, attributed bytes {old['attributed_bytes']} -> "
      f"{r.attributed_bytes:.4g}, program {old['program'] or '-'} -> {r.program} "
      f"({time.perf_counter() - start:.0f} s)",
      flush=True,
    )


def winner(r: dict[str, str]):
  """A row's winner as tune compiles it: (config, target with the row's accepted XLA flags,
  candidate, vocabulary size)."""
  from resnorm_jax.config import cli
  from resnorm_jax.hardware import target_compile as tc
  from resnorm_jax.hardware import tune

  spec, o = CONFIGS[r["config"]]
  config = tc.with_overrides(cli.load_config_file(spec), o)
  quiet = lambda s: None  # noqa: E731
  tgt = tune.target(r["topology"], quiet)
  tgt.flags = tune.accepted_flags(tgt.devices, tune.flags_of(r["xla_flags"]), quiet)
  c = tune.Candidate(tr.mesh_name(r["mesh"]), r["remat"], r["attention"], r["xla_flags"])
  return config, tgt, c, tc.resolve_vocab(config, 0, "tpu")[0]


def current_program(r: dict[str, str]) -> str:
  """The program_hash of a row's winner as this code lowers it ("" where it is refused)."""
  from resnorm_jax.hardware import tune

  low, program = tune.lowered(*winner(r))
  return program if low is not None else ""


def refresh_attribution(path: str, cache_path: str) -> None:
  """Recount the attributed-bytes columns of each row of `path` (tuned.csv or
  tuned_candidates.csv) whose count is stale (tune._stale: counted with older hlo_bytes rules,
  any program): its memory pass compiled again, its estimate kept (cached). A row whose
  estimate no longer matches the cache's is left as it is, with a line saying so. The file is
  rewritten after each row."""
  from resnorm_jax.hardware import tune

  rows = tr.read(path)
  fields = list(rows[0]) if rows else []
  cache = tune.Cache(cache_path)
  for r in rows:
    if not r.get("est_step_s") or r.get("fits") == "no":
      continue
    config, tgt, c, vocab = winner(r)
    start = time.process_time()
    res = tune.evaluate(cache, config, tgt, c, vocab, True)
    if f"{res.step_s:.4g}" != r["est_step_s"]:
      print(f"# {r['config']} {c.label}: the cache's estimate {res.step_s:.4g} s is not the "
            f"row's {r['est_step_s']} s: row left as it is", flush=True)  # fmt: skip
      continue
    r.update(tr.attributed(res))
    if "top_ops_by_bytes" in r:
      r["top_ops_by_bytes"] = "; ".join(res.top_ops)
    tr.write_all(path, fields, rows)
    cpu = time.process_time() - start
    print(
      f"{r['config']} {r['topology']} {c.label}: {tr.attributed(res)} [{cpu:.0f} s CPU]", flush=True
    )


def main() -> None:
  from resnorm_jax.config import cli
  from resnorm_jax.hardware import target_compile as tc
  from resnorm_jax.hardware import tune

  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", default=os.path.join(ROOT, "docs/tpu_compile/tuned.csv"))
  p.add_argument("--only", default="", help="comma-separated topologies (default: all)")
  p.add_argument("--configs", default="", help="comma-separated labels (default: all)")
  p.add_argument("--tune_cache", default=tune.DEFAULT_CACHE)
  p.add_argument(
    "--candidates_out", default=os.path.join(ROOT, "docs/tpu_compile/tuned_candidates.csv")
  )
  p.add_argument("--meshes", default=",".join(tune.MESHES), help="the meshes to try")
  p.add_argument("--flag_sets", default="default,no_windowed,maxtext", help="default: no XLA flags")
  p.add_argument(
    "--given_winner", action="store_true", help="Pre-LN: compile Post-LN's winner, not a tune"
  )
  p.add_argument(
    "--replace",
    action="store_true",
    help="tune the selected (config, topology) rows again and put each in place of its row",
  )
  p.add_argument(
    "--reevaluate",
    action="store_true",
    help="compile each selected row's winner again where this code lowers it to another "
    "program, and put the result in its place; tune nothing",
  )
  p.add_argument(
    "--refresh_attribution",
    action="store_true",
    help="recount the stale attributed-bytes columns of --out's rows; tune nothing",
  )
  args = p.parse_args()
  tc.use_cpu_host()
  if args.refresh_attribution:
    refresh_attribution(args.out, args.tune_cache)
    return
  if args.reevaluate:
    reevaluate(args)
    return
  specs, meshes = CONFIGS, tuple(args.meshes.split(","))
  kw = {"meshes": meshes, "flag_sets": tuple(args.flag_sets.split(","))}
  tr.with_columns(args.out, tr.FIELDS)
  tr.with_columns(args.candidates_out, tr.CANDIDATE_FIELDS)
  done = set()  # rows not tuned again: any row, or with --replace a row of this code
  if os.path.exists(args.out):
    rows = tr.read(args.out)
    if args.replace:
      rows = [r for r in rows if r["program"] and r["program"] == current_program(r)]
    done = {(r["config"], r["topology"]) for r in rows}
  else:
    csv_table.write_csv(args.out, [], tr.FIELDS, lineterminator="\n")
  winners = {}
  for topology, labels in PLAN:
    if args.only and topology not in args.only.split(","):
      continue
    for label in labels:
      if (args.configs and label not in args.configs.split(",")) or (label, topology) in done:
        continue
      start = time.perf_counter()
      spec, o = specs[label]
      config = tc.with_overrides(cli.load_config_file(spec), o)
      chips = len(tc.target_devices(topology)[2])
      given = SAME_PROGRAM.get(label) or (args.given_winner and LIKE.get(label))
      if given and (given, topology) not in winners:  # the winner of an earlier invocation
        winners[(given, topology)] = tune.tune(
          tc.with_overrides(cli.load_config_file(specs[given][0]), specs[given][1]),
          topology, cache_path=args.tune_cache, log=lambda s: None, **kw,
        )  # fmt: skip
      if given:
        tuned = winners[(given, topology)]
        if tuned.best is None:
          continue
        best, cache = tuned.best, tune.Cache(args.tune_cache)
        r = tune.evaluate(cache, config, tuned.target, best, tuned.vocab, True)
        out = tr.row(label, None, best, r, chips, untuned(label, topology), given)
        out["topology"] = tuned.target.name
      else:
        log = lambda s: print(s, flush=True)  # noqa: E731
        tuned = tune.tune(config, topology, cache_path=args.tune_cache, log=log, **kw)
        winners[(label, topology)] = tuned
        tr.write_candidates(args.candidates_out, label, tuned)
        if tuned.best is None:
          continue
        r = tuned.results[tuned.best]
        out = tr.row(label, tuned, tuned.best, r, chips, untuned(label, topology), label)
      tr.put_row(args.out, out)
      print(" ".join(f"{k}={out[k]}" for k in tr.FIELDS), flush=True)
      print(f"# {label} on {topology}: {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
  main()
