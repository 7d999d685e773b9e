"""The tuned table's rows as the tuner writes them (docs/tpu_compile/tuned.csv,
tuned_candidates.csv): their columns, a winner's row beside its untuned row of results.csv, a
row compiled again with this code, a row put in place of the one of the same (config,
topology), and a table written before a column existed given it. est_*, bound and speedup
are the TPU compiler's cost-model estimates (loop-corrected), not measurements.
tuned_table.py reads the table back for a launch; scripts/tpu_tune_table.py tunes and writes it.
"""

from __future__ import annotations

import os

from resnorm_jax.files import csv_table
from resnorm_jax.hardware import tune

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
  rows = [
    {
      "config": label, "topology": tuned.target.name, "mesh": c.mesh, "remat": c.remat,
      "attention": c.attention, "xla_flags": c.flags, "fits": "yes" if r.fits else "no",
      "per_chip_gib": f"{r.per_chip_bytes / tune.GIB:.2f}" if r.per_chip_bytes else "",
      "hbm_gib": f"{r.hbm_limit / tune.GIB:.2f}",
      "est_step_s": f"{r.step_s:.4g}" if r.step_s else "",
      "est_step_source": r.source if r.step_s else "",
      "est_mfu": f"{r.mfu:.3f}" if r.mfu else "", "bound": r.bound,
      "top_ops_by_bytes": "; ".join(r.top_ops), "compile_cpu_s": f"{r.cpu_s:.0f}",
      "refused": r.error, **attributed(r), "program": r.program,
    }
    for c, r in tuned.results.items()
  ]  # fmt: skip
  csv_table.write_csv(path, rows, CANDIDATE_FIELDS, lineterminator="\n", append=True)


def attributed(r) -> dict[str, str]:
  """The attributed-bytes columns of a result (empty where it was compiled before them)."""
  return {
    "attributed_bytes": f"{r.attributed_bytes:.4g}" if r.attributed_bytes else "",
    "est_step_attributed_s": f"{r.attributed_step_s:.4g}" if r.attributed_step_s else "",
    "est_mfu_attributed": f"{r.attributed_mfu:.3f}" if r.attributed_mfu else "",
  }


def read(path: str) -> list[dict[str, str]]:
  return csv_table.read_csv(path)


def row(label: str, tuned, best, r, chips: int, base: dict[str, str], on: str) -> dict:
  """One tuned.csv row: the winner `best` (its result `r`) beside the untuned `base`."""
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


def with_columns(path: str, fields: tuple[str, ...]) -> None:
  """Rewrite `path` with the columns `fields` where its header lacks some (a table written
  before a column existed): the old rows get them empty. The `program` column (the hash of
  the train step as lowered, tune_cache.program_hash) is empty for rows compiled before it."""
  if not os.path.exists(path):
    return
  rows = read(path)
  if csv_table.read_header(path) != list(fields):
    write_all(path, fields, [{k: r.get(k, "") for k in fields} for r in rows])


def write_all(path: str, fields, rows: list[dict]) -> None:
  """`rows` under the header `fields` in place of `path` (a temporary file, then renamed)."""
  tmp = f"{path}.tmp"
  csv_table.write_csv(tmp, rows, fields, lineterminator="\n")
  os.replace(tmp, path)


def put_row(path: str, out: dict) -> None:
  """Append `out` to `path`, or put it in place of the row of the same (config, topology)."""
  rows = read(path)
  keys = [(r["config"], r["topology"]) for r in rows]
  if (out["config"], out["topology"]) not in keys:
    csv_table.write_csv(path, [out], FIELDS, lineterminator="\n", append=True)
    return
  rows[keys.index((out["config"], out["topology"]))] = out
  write_all(path, FIELDS, rows)


def mesh_name(label: str) -> str:
  """tune.MESHES' name of a row's mesh label ("fsdp16", "data8", "data4xfsdp4")."""
  axes = {part.rstrip("0123456789") for part in label.split("x")}
  return {frozenset({"data"}): "data", frozenset({"fsdp"}): "fsdp"}.get(
    frozenset(axes), "data_fsdp"
  )
