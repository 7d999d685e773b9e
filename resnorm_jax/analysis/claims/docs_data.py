"""The committed data the README's claims read (CSV files, run folders under docs/) and how a
claim writes its numbers: an lr, seeds, a step, tokens per parameter. Paths are relative to the
checkout (ROOT). No JAX."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import resnorm_jax
from resnorm_jax.analysis.style import lr_label
from resnorm_jax.files import csv_table
from resnorm_jax.runs import record_files

ROOT = resnorm_jax.ROOT
MAIN = ("postnorm", "prenorm", "deepnorm")
RESULTS_MD_NAME = "results.md"  # a fact stated in docs/results.md's prose


@dataclasses.dataclass(frozen=True)
class Claim:
  """One claim of Results, in full and in a few words, both from one computation on the data.

  docs/results.md's table states it in full (`full()`: the claim, what the runs show, the
  budget, seeds and corpus, the figure and data); the README's table in short (`short()`):
  the claim, the result as a headline, its seeds and budget, and the data files `links`
  cites (beside a link to the full row). A row function builds both from the same numbers,
  so neither types a number the other computes."""

  claim: str
  result: str  # what the runs show, in full
  budget: str  # budget, seeds, corpus, in full
  links: str  # '[figure](docs/...png), `docs/.../results.csv`': the data in backticks
  headline: str  # the result in a few words (about 20 at most)
  seeds: str  # its seeds and budget in a few words

  def full(self) -> list[str]:
    return [self.claim, self.result, self.budget, self.links]

  def short(self) -> list[str]:
    return [self.claim, self.headline, self.seeds]

  def data(self) -> list[str]:
    """The data files and folders the row cites: `links`' backticked docs/ paths."""
    return re.findall(r"`(docs/[^`]+)`", self.links)


def exists(path: str) -> bool:
  """Whether a file under ROOT exists."""
  return os.path.exists(os.path.join(ROOT, path))


def optional(path: str) -> list[dict[str, str]]:
  """A CSV's rows, none when the file is not there (a sweep not run yet)."""
  return read(path) if exists(path) else []


def run_summary(run: str) -> dict:
  """A run folder's summary.json."""
  with open(os.path.join(ROOT, run, record_files.SUMMARY)) as f:
    return json.load(f)


def read(path: str) -> list[dict[str, str]]:
  """A CSV's rows, `path` from the repository root."""
  return csv_table.read_csv(os.path.join(ROOT, path))


def lr_text(lr: float) -> str:
  """1.25e-4, 5e-4, 3.125e-5: a learning rate as the docs write it (4 significant digits)."""
  return lr_label(lr, digits=4)


def seeds_text(seeds: list[int]) -> str:
  """'0-4' for consecutive seeds, '0, 2' otherwise."""
  seeds = sorted(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}-{seeds[-1]}"
  return ", ".join(map(str, seeds))


def step_text(step: int | None) -> str:
  return "none" if step is None else f"{int(step):,}"


def dense_params(model: dict) -> int:
  """The parameters of the plain decoder a config.json's `model` describes (Pre-LN's shape:
  attention 4 d^2, FFN 2 d d_ff (3 with swiglu), two norms per layer and a final one, token
  and learned position embeddings, a head only when untied); a variant's extra scalars and
  gates are not counted (under 1% at these shapes). tests/test_claims.py checks it against the
  model's own count."""
  d, ff, n = int(model["d_model"]), int(model["d_ff"]), int(model["num_layers"])
  ffn = (3 if model.get("ffn_activation") == "swiglu" else 2) * d * ff
  layer = 4 * d * d + ffn + 4 * d
  vocab = int(model.get("vocab_size") or 256)  # 0: from the data (bytes: 256)
  embed = vocab * d * (1 if model.get("tie_embeddings", True) else 2)
  pos = int(model["max_seq_len"]) * d if model.get("position", "learned") == "learned" else 0
  return n * layer + embed + pos + 2 * d


def tokens_note(run: str) -> str:
  """'6.4 tokens/param at 6 layers': the training tokens per parameter of a claim's deepest
  (largest) model, from its run folder's config.json (CompleteP's paper trains at 20)."""
  path = os.path.join(ROOT, run, record_files.CONFIG)
  if not os.path.isfile(path):
    return f"tokens/param unknown ({run} missing)"
  with open(path) as f:
    config = json.load(f)
  train, model = config["train"], config["model"]
  tokens = int(train["steps"]) * int(train["batch_size"]) * int(train["seq_len"])
  ratio = tokens / dense_params(model)
  wide = f", d_model {model['d_model']}" if int(model["d_model"]) != 64 else ""
  if ratio < 0.1:  # '1 token per 12 params', not a 3-decimal number a reader takes for a loss
    return f"1 token per {1 / ratio:.0f} params at {model['num_layers']} layers{wide}"
  text = f"{ratio:.2g}" if ratio < 10 else f"{ratio:.0f}"
  return f"{text} tokens/param at {model['num_layers']} layers{wide}"


SEED_SPAN = re.compile(r"^(?P<prefix>.+-s)(?P<first>\d+)\.\.(?P<last>\d+)$")


def final_loss(run: str) -> float | None:
  """A run folder's final eval loss; None when it has none (not run, or not finished)."""
  if not exists(os.path.join(run, record_files.SUMMARY)):
    return None
  value = run_summary(run).get("final_eval_loss")
  return float(value) if value is not None else None


def seed_losses(span: str) -> list[float] | None:
  """The final eval losses of `<run prefix>-s<first>..<last>`, in seed order; None when the
  name is no span or a seed's run is missing."""
  m = SEED_SPAN.match(span)
  if not m or int(m["first"]) > int(m["last"]):
    return None
  runs = [f"{m['prefix']}{s}" for s in range(int(m["first"]), int(m["last"]) + 1)]
  losses = [final_loss(r) for r in runs]
  return None if any(v is None for v in losses) else losses


def loss_fact(kind: str, digits: int, target: str) -> str | None:
  """The facts read off final eval losses, `digits` decimals: `loss=4:<run>` ('1.7646'),
  `range=4:<prefix>-s0..2` (the seeds' lowest and highest, '1.7680-1.7790'),
  `seeds=4:<prefix>-s0..2` (each seed's, in seed order: '1.7646, 1.7566 and 1.7552'),
  `vs=4:<run>:<other run>` (the first's against the second's: '0.0494 above', '0.0193 below',
  'level' when equal at `digits`); None when a run is missing."""
  fmt = lambda v: f"{v:.{digits}f}"  # noqa: E731
  if kind == "loss":
    value = final_loss(target)
    return None if value is None else fmt(value)
  if kind in ("range", "seeds"):
    losses = seed_losses(target)
    if not losses:
      return None
    if kind == "range":
      return f"{fmt(min(losses))}-{fmt(max(losses))}"
    texts = [fmt(v) for v in losses]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]
  run, _, other = target.partition(":")
  a, b = final_loss(run), final_loss(other)
  if a is None or b is None:
    return None
  delta = round(a, digits) - round(b, digits)
  if round(abs(delta), digits) == 0:
    return "level"
  return f"{fmt(abs(delta))} {'above' if delta > 0 else 'below'}"


def run_fact(name: str) -> str | None:
  """A fact named by the run folder it reads: `escape:<run>` (its escape step, 'none' when it
  never escaped), `loss:<run>` (its final eval loss, 3 decimals; `loss=4:<run>` 4, and the
  other loss facts of loss_fact), `gap:<run>` (its last periodic eval minus that eval set's
  no-context loss, signed, 4 decimals: survival.py's final_eval_gap), and the survival
  protocol's reading of its eval curve (survival.run_record): `passage:<run>` (the first eval
  0.1 or more below the no-context loss, 'none'; `passage=0.05:<run>` at another margin of
  survival.MARGINS), `relapse:<run>` (each eval back above that after being below: '800 and
  1,275', 'none'), `mingap:<run>` (the lowest eval minus the no-context loss, signed, 4
  decimals), `trend:<run>` (the late trend: falling, flat or rising); None for other names."""
  kind, _, run = name.partition(":")
  kind, _, option = kind.partition("=")
  if kind in ("loss", "range", "seeds", "vs"):
    if option and not (option.isdigit() and 0 < int(option) <= 6):
      return None
    return loss_fact(kind, int(option or 3), run)
  kinds = ("escape", "gap", "passage", "relapse", "mingap", "trend")
  if kind not in kinds or (option and kind != "passage"):
    return None
  if not exists(os.path.join(run, record_files.SUMMARY)):
    return None
  if kind == "escape":
    return step_text(run_summary(run).get("escape_step"))
  from resnorm_jax.analysis import survival

  record = survival.run_record(os.path.join(ROOT, run))
  if kind == "passage":
    column = f"first_passage_m{float(option):g}" if option else "first_passage"
    return step_text(record[column]) if column in record else None
  if kind == "relapse":
    steps = [int(x) for x in str(record.get("relapse_steps") or "").split()]
    return " and ".join(step_text(x) for x in steps) if steps else "none"
  if kind == "trend":
    return record.get("late_trend")
  value = record.get("final_eval_gap" if kind == "gap" else "min_eval_gap")
  return None if value is None else f"{value:+.4f}"
