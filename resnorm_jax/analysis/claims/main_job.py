"""The README's sample output of the main job (Quickstart), printed from the committed run of
it (docs/runs/postnorm_96L: `python -m experiments.train --config=configs/postnorm_96L.py`,
its config.json, metrics.jsonl and summary.json) by the lines the run itself prints
(resnorm_jax/runs/end_line.py), so the sample is that run's, never typed. What depends on the
machine (its folder, the corpus's path and size) is elided with '...'. No JAX."""

from __future__ import annotations

import json
import os

from resnorm_jax.analysis.claims.docs_data import ROOT, run_summary
from resnorm_jax.data import stdlib_source
from resnorm_jax.runs import record_files
from resnorm_jax.runs.end_line import end_message, progress_line

RUN = "docs/runs/postnorm_96L"
WORKDIR = "runs/postnorm_96L"  # the README's command's --workdir
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- main job sample: written by scripts/claims.py from docs/runs/postnorm_96L -->"
END = "<!-- end of main job sample -->"


def _first_row(run: str) -> dict:
  with open(os.path.join(ROOT, run, record_files.METRICS)) as f:
    return json.loads(next(line for line in f if line.strip()))


def setup_line(config: dict, summary: dict) -> str:
  """The run's setup line as it prints it (train/banner.py), the machine's parts elided."""
  m, split = config["model"], summary["data_split"]
  python, files = summary["provenance"]["python"], split["train_files"] + split["val_files"]
  # the fingerprint of the results' corpus (stdlib_source.RESULTS_CORPUS), where it is this one
  want = stdlib_source.RESULTS_CORPUS
  same = (python, files) == (want["python"], want["files"])
  corpus = f"stdlib of Python {python}, " + (f"fingerprint {want['fingerprint']}, " if same else "")
  return (
    f"{config['name']}: {m['num_layers']} layers, norm={m['norm']} "
    f"position={m['norm_position']} residual={m['residual']} ... unigram entropy "
    f"{summary['unigram_entropy']:.3f} nats (held-out {summary['heldout_unigram_entropy']:.3f}); "
    f"{corpus}... ({files} files; {split['val_files']} held out): ..."
  )


def render() -> str:
  """The sample between BEGIN and END: the setup line, the first progress line and the end
  lines of the committed run."""
  with open(os.path.join(ROOT, RUN, record_files.CONFIG)) as f:
    config = json.load(f)
  summary = run_summary(RUN)
  row, steps = _first_row(RUN), config["train"]["steps"]
  eta = (steps - row["step"]) * row["step_seconds"]  # the rate of the one interval so far
  first = progress_line(row["step"], steps, row["train/loss"], row.get("eval/loss"), row["lr"],
                        row["tokens_per_second"], eta)  # fmt: skip
  return "\n".join(
    [
      BEGIN,
      "```",
      setup_line(config, summary),
      first,
      end_message(summary, WORKDIR, None),
      "```",
      END,
    ]  # fmt: skip
  )


DOC_SECTIONS = ((README, BEGIN, END, render),)
