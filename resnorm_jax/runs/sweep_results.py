"""Sweep results: a row per run folder (its outcome, resolved depth and seed, escape and
divergence steps), over seeds, as results.csv, results.md and results_seeds.csv. The outcome
per run is resnorm_jax/runs/outcome.py's. No JAX here.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from resnorm_jax.data.fs import read_json
from resnorm_jax.files import csv_table
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.runs import record_files
from resnorm_jax.runs import status as run_status
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs.escape import stored_fields, vocab_size
from resnorm_jax.runs.outcome import STUCK_MARGIN, baseline, classify, is_finite_number
from resnorm_jax.runs.sweep_point import POINT_FILE

# stopped_early: ended by its stop rule (train.stop_when) at the rule's step, no verdict
STATUSES = (
  run_status.TRAINED,
  run_status.STUCK,
  run_status.DIVERGED,
  run_status.STOPPED_EARLY,
  run_status.INTERRUPTED,
  run_status.FAILED,
  "pending",
  "unknown",
)
Row = dict[str, Any]


def dotted(tree: Any, key: str) -> Any:
  """tree["a"]["b"] for key "a.b" (tree["a.b"] in a flat one: a checkpoint's config); None
  where a part is missing or not a mapping."""
  if isinstance(tree, Mapping) and key in tree:
    return tree[key]
  for part in key.split("."):
    if not isinstance(tree, Mapping) or part not in tree:
      return None
    tree = tree[part]
  return tree


def _variant(config_path: str, name: str) -> str:
  stem = os.path.splitext(os.path.basename(config_path.split(":")[0]))[0] if config_path else name
  return re.sub(r"_\d+L$", "", stem)


def run_row(workdir: str, margin: float = STUCK_MARGIN) -> Row:
  """One results row of a run folder (point info, resolved depth and seed, summary)."""
  point = read_json(os.path.join(workdir, POINT_FILE)) or {}
  summary = read_json(os.path.join(workdir, record_files.SUMMARY))
  config = read_json(os.path.join(workdir, record_files.CONFIG))
  if not isinstance(config, dict):  # lost: the config its newest checkpoint recorded
    config = workdir_lib.recorded_config(workdir)[0]
  status = classify(summary, margin, vocab_size(config))
  if status == "pending" and point.get("returncode") not in (None, 0):
    status = run_status.FAILED
  if config is None and isinstance(summary, dict):
    status = "unknown"  # a result whose config is recorded nowhere is no grid point's
  config = config or {}
  summary = summary or {}
  loss, plateau = summary.get("final_eval_loss"), baseline(summary)
  num_layers = dotted(config, "resolved_model.num_layers") or dotted(config, "model.num_layers")
  return {
    "name": os.path.basename(os.path.normpath(workdir)),
    "config": point.get("config", config.get("name", "")),
    "variant": _variant(point.get("config", ""), config.get("name", "")),
    "num_layers": num_layers,
    "seed": config.get("seed"),
    "outcome": status,
    "final_eval_loss": loss,
    "baseline": plateau,  # held-out unigram cross-entropy (train-split entropy if older)
    "gap": plateau - loss if is_finite_number(loss) and is_finite_number(plateau) else None,
    "unigram_entropy": summary.get("unigram_entropy"),
    "final_eval_tokens": summary.get("final_eval_tokens"),
    "best_eval_loss": summary.get("best_eval_loss"),
    "final_train_loss": summary.get("final_train_loss"),
    "steps": summary.get("steps"),
    # when the eval loss left the plateau for good / the run blew up (outcome.curve_fields)
    **stored_fields(workdir, summary),
    "wall_seconds": summary.get("wall_seconds"),
    "_index": point.get("index", 1 << 30),
    "_overrides": point.get("overrides", {}),
    "_config": config,
  }


def collect(sweep_dir: str, margin: float = STUCK_MARGIN) -> list[Row]:
  """Rows of every run folder under `sweep_dir`, in grid order; the grid's keys as columns.

  A column per override key of any run (model.num_layers and seed already have theirs), also
  when every run shares its value: a reader of several sweeps' tables (one per seed, say)
  needs each run's lr even where one folder holds a single point.
  """
  dirs = sorted(
    d
    for d in (os.path.join(sweep_dir, n) for n in os.listdir(sweep_dir))
    if os.path.isdir(d)
    and any(os.path.exists(os.path.join(d, f)) for f in (POINT_FILE, record_files.SUMMARY))
  )
  rows = sorted((run_row(d, margin) for d in dirs), key=lambda r: (r["_index"], r["name"]))
  keys: list[str] = []
  for r in rows:
    keys += [k for k in r["_overrides"] if k not in keys and k not in ("model.num_layers", "seed")]
  for r in rows:
    r.update({k: dotted(r["_config"], k) for k in keys})
  order = ["name", "config", "variant", "num_layers", "seed", *keys]
  return [
    {k: r[k] for k in order + [k for k in r if k not in order and k not in keys]} for r in rows
  ]


def seed_groups(rows: Sequence[Row]) -> list[Row]:
  """Mean and spread of the final eval loss over runs that differ only by seed (n >= 2)."""
  public = [k for k in rows[0] if not k.startswith("_")] if rows else []
  key_cols = [k for k in public[: public.index("outcome")] if k not in ("name", "seed")]
  groups: dict[tuple, list[Row]] = {}
  for r in rows:
    groups.setdefault(tuple(json.dumps(r[k]) for k in key_cols), []).append(r)
  out = []
  for members in groups.values():
    if len(members) < 2:
      continue
    losses = [r["final_eval_loss"] for r in members if is_finite_number(r["final_eval_loss"])]
    statuses = [r["outcome"] for r in members]
    out.append(
      {
        **{k: members[0][k] for k in key_cols},
        "n": len(members),
        "seeds": " ".join(str(r["seed"]) for r in members),
        "statuses": " ".join(f"{s}:{statuses.count(s)}" for s in STATUSES if s in statuses),
        "final_eval_mean": statistics.fmean(losses) if losses else None,
        "final_eval_std": statistics.stdev(losses) if len(losses) > 1 else None,
        "final_eval_min": min(losses, default=None),
        "final_eval_max": max(losses, default=None),
      }
    )
  return out


def format_cell(v: Any) -> str:
  """A value as a table cell: floats to 4 decimals, None as empty."""
  if isinstance(v, float):
    return f"{v:.4f}" if math.isfinite(v) else str(v)
  return "" if v is None else str(v)


def markdown_table(rows: Sequence[Row]) -> str:
  """A Markdown table of the rows' public columns."""
  cols = [k for k in rows[0] if not k.startswith("_")]
  lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
  lines += ["| " + " | ".join(format_cell(r[k]) for k in cols) + " |" for r in rows]
  return "\n".join(lines) + "\n"


def write_results(sweep_dir: str, rows: Sequence[Row]) -> list[str]:
  """results.csv, results.md (and results_seeds.csv when runs differ only by seed)."""
  if not rows:
    return []
  cols = [k for k in rows[0] if not k.startswith("_")]
  paths = [os.path.join(sweep_dir, "results.csv"), os.path.join(sweep_dir, "results.md")]
  csv_table.write_csv(paths[0], rows, cols, extrasaction="ignore")
  counts = ", ".join(f"{s} {sum(r['outcome'] == s for r in rows)}" for s in STATUSES)
  md = f"# {os.path.basename(os.path.normpath(sweep_dir))}\n\n{len(rows)} runs: {counts}\n\n"
  md += markdown_table(rows)
  groups = seed_groups(rows)
  if groups:
    paths.append(os.path.join(sweep_dir, "results_seeds.csv"))
    csv_table.write_csv(paths[-1], groups, list(groups[0]))
    md += "\n## Over seeds (final eval loss)\n\n" + markdown_table(groups)
  with open_nofollow(paths[1], "w") as f:
    f.write(md)
  return paths


def write_rows(rows: Sequence[dict[str, str]], path: str) -> str:
  """`rows` as one csv, the union of their columns in first-seen order; a symlink at `path`
  is replaced by the file, never written through."""
  columns = list(dict.fromkeys(k for r in rows for k in r))
  if os.path.islink(path):
    os.remove(path)
  return csv_table.write_csv(path, rows, columns or ["variant"])
