"""A run folder's records, the same for a single run (loop.py) and a population member
(population/run.py): config.json (the config plus what the run resolved), whether a folder
holds a completed run, and summary.json (the run's results, its outcome and TensorBoard's
HParams)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.data.fs import read_json
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model import variants
from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.runs import escape, metrics_file, record_files
from resnorm_jax.runs import status as run_status
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.runs.outcome import classify
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import hparams as hparams_lib
from resnorm_jax.train import io_errors, provenance, resume_policy
from resnorm_jax.train.io_faults import RunFailed


def resolved_config(
  config: ConfigDict,
  mcfg: ModelConfig,
  data_split: dict | None = None,
  data_files: dict | None = None,
) -> dict:
  """The run's config plus the constants the model resolved (`mcfg`: alpha, beta, final norm,
  the vocabulary) and, when given, how the corpus was split (`data_split`: method and sizes
  of both splits) and what the data is (`data_files`: data_fingerprint.py). Sections the run
  adds are listed in same_experiment.RECORDED_NOT_CONFIG."""
  out = config.to_dict()
  out["resolved_model"] = vars(mcfg).copy()
  # What the variants record, e.g. Admin's profiled omegas (a pure function of the seed).
  out["resolved_model"].update(variants.record(mcfg, lambda: mdl.init_model(mcfg, config.seed)[0]))
  if data_split is not None:
    out["data_split"] = dict(data_split)
  if data_files:
    out["data_files"] = dict(data_files)
  out["provenance"] = provenance.collect()  # commit, package versions, host
  return json.loads(json.dumps(out, default=str))


def write_config(workdir: str, resolved: dict, start: int, *, warn_lost_rows: bool = True) -> None:
  """config.json; on a resume, a note if the code changed since it was written and (with
  `warn_lost_rows`) a warning for metrics lines the writer's truncation will drop. An I/O
  error is a RunFailed line."""
  try:
    if start > 0:  # resuming: say if the code changed since config.json was written
      recorded = read_json(epath.Path(workdir, record_files.CONFIG))
      recorded = recorded.get("provenance") if isinstance(recorded, dict) else None
      note = provenance.code_changed(recorded, resolved["provenance"])
      if note:
        print(note, flush=True)
    cli.write_json(os.path.join(workdir, record_files.CONFIG), resolved)
    if warn_lost_rows:
      _warn_lost_rows(workdir, start)
  except OSError as e:  # nothing trained yet: one line, no summary to write
    raise RunFailed(io_errors.describe_io_error(e, workdir, "writing config.json")) from e


def _warn_lost_rows(workdir: str, start: int) -> None:
  """Lines the writer's truncation drops without a word; rows up to the checkpoint are not
  trained again, so the curve keeps a gap there."""
  path = os.path.join(workdir, record_files.METRICS)
  lost = [s for s in metrics_file.unreadable_rows(path) if s is None or s < start] if start else []
  if lost:
    print(
      f"WARNING: {path} has {len(lost)} unreadable line(s) before the checkpoint's "
      f"step {start} (after the rows of steps {sorted({s or 0 for s in lost})}): "
      "dropped, the curve has a gap there",
      flush=True,
    )


def completed_run(config: ConfigDict, workdir: str) -> dict | None:
  """The summary of the run `config` completed in `workdir` (nothing to do), else None.

  Raises ValueError, before anything is written, when the workdir holds another experiment
  (its config.json or, when that is lost, the config its newest checkpoint recorded; names
  the differing keys), a completed run whose config is recorded nowhere (its result cannot
  be told to be this config's), a change of train.steps that is another experiment
  (resume_policy.check_run_length) or a completed run this one cannot continue.
  """
  config_dict = config.to_dict()
  workdir_lib.check_same_experiment(workdir, config_dict)
  has_checkpoint = bool(ckpt_lib.saved_steps(os.path.join(workdir, record_files.CHECKPOINTS)))
  recorded, where = workdir_lib.recorded_config(workdir)
  lost = lost_config_json(workdir)
  if lost and recorded is not None:
    print(
      f"WARNING: {lost}: this run is checked against the config its {where} recorded, "
      "and config.json is rebuilt from this run's config when it matches",
      flush=True,
    )
    resume_policy.check_same_run({"config": recorded}, config_dict, workdir)
  elif lost and _summary_status(workdir) == run_status.COMPLETED:
    raise ValueError(
      f"{lost} and no checkpoint records the config of the run completed there: its result "
      "cannot be told to be this config's; put its config.json back, or use a new --workdir"
    )
  elif lost and "cannot be read" in lost:
    print(f"WARNING: {lost} and there is no checkpoint to check this run against", flush=True)
  steps = config.train.steps
  done = workdir_lib.completed_summary(workdir, steps, has_checkpoint=has_checkpoint)
  if done is None:  # to train: never shortened, nor extended under a schedule of the total
    resume_policy.check_run_length(recorded, where, config, workdir)
  return done


def rebuild_lost_config(workdir: str, config: ConfigDict, mcfg, corpus, done: dict) -> None:
  """config.json again for a completed run whose config.json is lost (completed_run checked
  this config against the one its checkpoint recorded): this config resolved, as a resume
  writes it, with the run's own provenance (its summary's). Nothing when
  config.json is there; an I/O error is one warning line (the run's results stand)."""
  if lost_config_json(workdir) is None:
    return
  resolved = resolved_config(config, mcfg, corpus.split, corpus.fingerprint)
  resolved["provenance"] = done.get("provenance") or resolved["provenance"]
  path = os.path.join(workdir, record_files.CONFIG)
  try:
    cli.write_json(path, resolved)
  except OSError as e:
    print(f"WARNING: config.json not rebuilt: {e.strerror or e} (writing {path})", flush=True)
    return
  print(f"{path} rebuilt from this run's config (its checkpoint's matches)", flush=True)


def _summary_status(workdir: str) -> str | None:
  summary = read_json(os.path.join(workdir, record_files.SUMMARY))
  return summary.get("status") if isinstance(summary, dict) else None


def lost_config_json(workdir: str) -> str | None:
  """Why a workdir that holds a run has no usable config.json (`<path> is missing`, `<path>
  cannot be read (...)`), else None; a workdir that holds nothing yet has nothing to lose."""
  path = epath.Path(workdir, record_files.CONFIG)
  try:
    recorded = json.loads(path.read_text())
  except FileNotFoundError:
    held = any(
      epath.Path(workdir, n).exists()
      for n in (record_files.METRICS, record_files.SUMMARY, record_files.CHECKPOINTS)
    )
    return f"{path} is missing" if held else None
  except (OSError, ValueError) as e:
    return f"{path} cannot be read ({type(e).__name__}: {str(e)[:100]})"
  return None if isinstance(recorded, dict) else f"{path} cannot be read (not a JSON object)"


def summary(status: str, steps: int, log, config: ConfigDict, **kw) -> dict:
  """summary.json's fields of a run that ended `status` at `steps`: its RunLog's results and
  totals, kw's `baselines` (no-context losses), `short` (a short held-out split's note),
  `data_split`, `devices` and `provenance`, then the rest of kw (a population's size)."""
  baselines, short = kw.pop("baselines"), kw.pop("short", {})
  data_split, devices, prov = kw.pop("data_split"), kw.pop("devices"), kw.pop("provenance")
  return {
    "status": status,
    "steps": steps,
    **log.results(),
    **baselines,
    **short,
    "data_split": data_split,
    "tokens_per_second": log.tokens_per_second(),  # a member's: its share of the population's
    **log.totals(),  # wall, compile and checkpoint-blocking seconds of every segment
    "config_name": config.name,
    "devices": devices,
    "provenance": prov,
    **kw,
  }


def add_outcome(summary: dict, workdir: str, vocab: int) -> None:
  """The summary's outcome (trained | stuck | diverged | interrupted) and, from the whole
  curve (metrics.jsonl holds every segment of a resumed or extended run), when the eval loss
  left the plateau for good and when the run blew up; `escape_step_partial: true` (with
  `metrics_lost_from_step`) when the curve lost its first rows, so that both steps are
  computed from the rows left and escape_step may be later than the run's."""
  summary["outcome"] = classify(summary, vocab_size=vocab)
  path = os.path.join(workdir, record_files.METRICS)
  summary.update(escape.summary_fields(path, summary, vocab))
  # Rows lost from the start (metrics.jsonl deleted, then resumed): computed from what is left.
  config = read_json(os.path.join(workdir, record_files.CONFIG))
  lost = escape.first_row_lost(path, config, summary.get("steps"))
  if lost is not None:
    summary["escape_step_partial"] = True
    summary["metrics_lost_from_step"] = lost


def write_summary(workdir: str, config: ConfigDict, summary: Mapping, quiet: bool = False) -> None:
  """summary.json and TensorBoard's HParams (axes, outcome); `quiet`: HParams that cannot be
  written print no warning (the run has said its I/O fault in its error line)."""
  cli.write_json(os.path.join(workdir, record_files.SUMMARY), summary)
  hparams_lib.write_run(workdir, config, summary, quiet=quiet)
