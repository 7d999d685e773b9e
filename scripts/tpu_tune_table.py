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
"""

import argparse
import csv
import os
import time

from resnorm_jax.config.nofollow import open_nofollow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The :paper configs by results.csv's labels (scripts/tpu_compile_table.py's CONFIGS): there is
# no prenorm_1000L file, Pre-LN at 1000 layers is prenorm_96L's :paper scale at 1000 layers.
CONFIGS = {
  "postnorm_96L": ("configs/postnorm_96L.py:paper", {}),
  "prenorm_96L": ("configs/prenorm_96L.py:paper", {}),
  "deepnorm_96L": ("configs/deepnorm_96L.py:paper", {}),
  "postnorm_1000L": ("configs/postnorm_1000L.py:paper", {}),
  "prenorm_1000L": ("configs/prenorm_96L.py:paper", {"model.num_layers": 1000}),
  "deepnorm_1000L": ("configs/deepnorm_1000L.py:paper", {}),
}

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
FIELDS = (
  "config", "topology", "chips",
  "untuned_mesh", "untuned_remat", "untuned_per_chip_gib", "untuned_est_step_s", "untuned_est_mfu",
  "mesh", "remat", "attention", "xla_flags", "per_chip_gib", "hbm_gib",
  "est_step_s", "est_step_source", "est_mfu", "bound", "speedup",
  "candidates", "tune_cpu_s", "tuned_on",
  "flops_per_step", "bytes_per_step", "attributed_bytes", "est_step_attributed_s",
  "est_mfu_attributed", "program",
)  # fmt: skip


CANDIDATE_FIELDS = (
  "config", "topology", "mesh", "remat", "attention", "xla_flags", "fits", "per_chip_gib",
  "hbm_gib", "est_step_s", "est_step_source", "est_mfu", "bound", "top_ops_by_bytes",
  "compile_cpu_s", "refused", "attributed_bytes", "est_step_attributed_s", "est_mfu_attributed",
  "program",
)  # fmt: skip


def write_candidates(path: str, label: str, tuned) -> None:
  """Every candidate of one tune as rows of `path` (what its lines print; est_*: loop-corrected
  estimates, empty for a memory pass only), appended."""
  from resnorm_jax.hardware import tune

  new = not os.path.exists(path)
  with open(path, "a", newline="") as f:
    w = csv.DictWriter(f, CANDIDATE_FIELDS, lineterminator="\n")
    if new:
      w.writeheader()
    for c, r in tuned.results.items():
      w.writerow({
        "config": label, "topology": tuned.target.name, "mesh": c.mesh, "remat": c.remat,
        "attention": c.attention, "xla_flags": c.flags, "fits": "yes" if r.fits else "no",
        "per_chip_gib": f"{r.per_chip_bytes / tune.GIB:.2f}" if r.per_chip_bytes else "",
        "hbm_gib": f"{r.hbm_limit / tune.GIB:.2f}",
        "est_step_s": f"{r.step_s:.4g}" if r.step_s else "",
        "est_step_source": r.source if r.step_s else "",
        "est_mfu": f"{r.mfu:.3f}" if r.mfu else "", "bound": r.bound,
        "top_ops_by_bytes": "; ".join(r.top_ops), "compile_cpu_s": f"{r.cpu_s:.0f}",
        "refused": r.error, **attributed(r), "program": r.program,
      })  # fmt: skip


def attributed(r) -> dict[str, str]:
  """The attributed-bytes columns of a result (empty where it was compiled before them)."""
  return {
    "attributed_bytes": f"{r.attributed_bytes:.4g}" if r.attributed_bytes else "",
    "est_step_attributed_s": f"{r.attributed_step_s:.4g}" if r.attributed_step_s else "",
    "est_mfu_attributed": f"{r.attributed_mfu:.3f}" if r.attributed_mfu else "",
  }


def read(path: str) -> list[dict[str, str]]:
  with open(path) as f:
    return list(csv.DictReader(f))


def untuned(label: str, topology: str) -> dict[str, str]:
  """The (config, topology)'s `:paper` row of results.csv ({} where it has none)."""
  rows = read(os.path.join(ROOT, "docs/tpu_compile/results.csv"))
  for r in rows:
    if (r["config"], r["topology"], r["settings"]) == (label, topology, ":paper"):
      return r
  return {}


def row(label: str, tuned, best, r, chips: int, base: dict[str, str], on: str) -> dict:
  """One tuned.csv row: the winner `best` (its result `r`) beside the untuned `base`."""
  from resnorm_jax.hardware import tune

  mesh = tune.mesh_overrides(best.mesh, chips)
  mesh_label = "x".join(
    f"{k[5:]}{chips if v == -1 else v}" for k, v in mesh.items() if v != 1 and k != "mesh.tensor"
  )
  fresh = [x for x in tuned.results.values() if not x.cached] if tuned else []
  out = {
    "config": label,
    "topology": tuned.target.name if tuned else "",
    "chips": str(chips),
    "untuned_mesh": base.get("mesh", ""),
    "untuned_remat": base.get("remat", ""),
    "untuned_per_chip_gib": base.get("per_chip_gib", ""),
    "untuned_est_step_s": base.get("est_step_s", ""),
    "untuned_est_mfu": base.get("est_mfu", ""),
    "mesh": mesh_label,
    "remat": best.remat,
    "attention": best.attention,
    "xla_flags": best.flags,
    "candidates": str(len(tuned.results)) if tuned else "1",
    "tune_cpu_s": f"{sum(x.cpu_s for x in fresh):.0f}" if tuned else f"{r.cpu_s:.0f}",
    "tuned_on": on,
    **result_columns(r, base.get("est_step_s", "")),
  }
  return {k: out[k] for k in FIELDS}


# The columns of a winner's compile (row() fills them from its Result); the rest of a row say
# how it was tuned and what it is compared with.
RESULT_FIELDS = (
  "per_chip_gib", "hbm_gib", "est_step_s", "est_step_source", "est_mfu", "bound", "speedup",
  "flops_per_step", "bytes_per_step", "attributed_bytes", "est_step_attributed_s",
  "est_mfu_attributed", "program",
)  # fmt: skip


def result_columns(r, untuned_step_s: str) -> dict[str, str]:
  """The RESULT_FIELDS of a winner's compile `r`; the speedup against the untuned estimate
  (`untuned_step_s`, empty: none)."""
  from resnorm_jax.hardware import tune

  step = float(untuned_step_s) if untuned_step_s else None
  return {
    "per_chip_gib": f"{r.per_chip_bytes / tune.GIB:.2f}",
    "hbm_gib": f"{r.hbm_limit / tune.GIB:.2f}",
    "est_step_s": f"{r.step_s:.4g}",
    "est_step_source": r.source,
    "est_mfu": f"{r.mfu:.3f}",
    "bound": r.bound,
    "speedup": f"{step / r.step_s:.2f}" if step else "",
    "flops_per_step": f"{r.flops:.4g}",
    "bytes_per_step": f"{r.bytes:.4g}",
    **attributed(r),
    "program": r.program,
  }


def reevaluated(old: dict[str, str], r) -> dict[str, str]:
  """A tuned.csv row whose winner was compiled again with this code (`r`, its Result): the
  winner's settings, the tune's candidates and CPU time and the untuned columns kept; the
  compile's columns (RESULT_FIELDS) from `r`. Not a tune: whether another candidate would now
  win is not asked."""
  return {**old, **result_columns(r, old.get("untuned_est_step_s", ""))}


def reevaluate(args) -> None:
  """--reevaluate: each selected row of --out whose winner this code lowers to another
  program, its winner compiled again (tune.evaluate, loop-corrected) and put in its place."""
  from resnorm_jax.hardware import tune

  for old in read(args.out):
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
    put_row(args.out, reevaluated(old, r))
    print(
      f"# {old['config']} on {old['topology']}: est step {old['est_step_s']} -> "
      f"{r.step_s:.4g} s, attributed bytes {old['attributed_bytes']} -> "
      f"{r.attributed_bytes:.4g}, program {old['program'] or '-'} -> {r.program} "
      f"({time.perf_counter() - start:.0f} s)",
      flush=True,
    )


def with_columns(path: str, fields: tuple[str, ...]) -> None:
  """Rewrite `path` with the columns `fields` where its header lacks some (a table written
  before a column existed): the old rows get them empty. The `program` column (the hash of
  the train step as lowered, tune_cache.program_hash) is empty for rows compiled before it."""
  if not os.path.exists(path):
    return
  rows = read(path)
  with open(path) as f:
    header = f.readline().strip().split(",")
  if header != list(fields):
    write_all(path, fields, [{k: r.get(k, "") for k in fields} for r in rows])


def write_all(path: str, fields, rows: list[dict]) -> None:
  """`rows` under the header `fields` in place of `path` (a temporary file, then renamed)."""
  tmp = f"{path}.tmp"
  with open_nofollow(tmp, "w", newline="") as f:
    w = csv.DictWriter(f, fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
  os.replace(tmp, path)


def put_row(path: str, out: dict) -> None:
  """Append `out` to `path`, or put it in place of the row of the same (config, topology)."""
  rows = read(path)
  keys = [(r["config"], r["topology"]) for r in rows]
  if (out["config"], out["topology"]) not in keys:
    with open(path, "a", newline="") as f:
      csv.DictWriter(f, FIELDS, lineterminator="\n").writerow(out)
    return
  rows[keys.index((out["config"], out["topology"]))] = out
  write_all(path, FIELDS, rows)


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
  c = tune.Candidate(mesh_name(r["mesh"]), r["remat"], r["attention"], r["xla_flags"])
  return config, tgt, c, tc.resolve_vocab(config, 0, "tpu")[0]


def current_program(r: dict[str, str]) -> str:
  """The program_hash of a row's winner as this code lowers it ("" where it is refused)."""
  from resnorm_jax.hardware import tune

  low, program = tune.lowered(*winner(r))
  return program if low is not None else ""


def mesh_name(label: str) -> str:
  """tune.MESHES' name of a row's mesh label ("fsdp16", "data8", "data4xfsdp4")."""
  axes = {part.rstrip("0123456789") for part in label.split("x")}
  return {frozenset({"data"}): "data", frozenset({"fsdp"}): "fsdp"}.get(
    frozenset(axes), "data_fsdp"
  )


def refresh_attribution(path: str, cache_path: str) -> None:
  """Recount the attributed-bytes columns of each row of `path` (tuned.csv or
  tuned_candidates.csv) whose count is stale (tune._stale: counted with older hlo_bytes rules,
  any program): its memory pass compiled again, its estimate kept (cached). A row whose
  estimate no longer matches the cache's is left as it is, with a line saying so. The file is
  rewritten after each row."""
  from resnorm_jax.hardware import tune

  rows = read(path)
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
    r.update(attributed(res))
    if "top_ops_by_bytes" in r:
      r["top_ops_by_bytes"] = "; ".join(res.top_ops)
    write_all(path, fields, rows)
    cpu = time.process_time() - start
    print(
      f"{r['config']} {r['topology']} {c.label}: {attributed(res)} [{cpu:.0f} s CPU]", flush=True
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
  with_columns(args.out, FIELDS)
  with_columns(args.candidates_out, CANDIDATE_FIELDS)
  done = set()  # rows not tuned again: any row, or with --replace a row of this code
  if os.path.exists(args.out):
    rows = read(args.out)
    if args.replace:
      rows = [r for r in rows if r["program"] and r["program"] == current_program(r)]
    done = {(r["config"], r["topology"]) for r in rows}
  else:
    with open_nofollow(args.out, "w", newline="") as f:
      csv.DictWriter(f, FIELDS, lineterminator="\n").writeheader()
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
        out = row(label, None, best, r, chips, untuned(label, topology), given)
        out["topology"] = tuned.target.name
      else:
        log = lambda s: print(s, flush=True)  # noqa: E731
        tuned = tune.tune(config, topology, cache_path=args.tune_cache, log=log, **kw)
        winners[(label, topology)] = tuned
        write_candidates(args.candidates_out, label, tuned)
        if tuned.best is None:
          continue
        r = tuned.results[tuned.best]
        out = row(label, tuned, tuned.best, r, chips, untuned(label, topology), label)
      put_row(args.out, out)
      print(" ".join(f"{k}={out[k]}" for k in FIELDS), flush=True)
      print(f"# {label} on {topology}: {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
  main()
