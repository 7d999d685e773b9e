"""The docs pages whose run numbers are all facts stay so: a number typed by hand into their
prose or a hand table (3-4 decimals, or a count 'k of n', outside a fact, a generated section
and a code block) fails here, naming the line, unless it is listed below as not a run's."""

import os

import pytest

from resnorm_jax.analysis import doc_sections

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# page -> the lines' substrings that state numbers read off no run folder, and why
NOT_RUN_NUMBERS = {
  "docs/results.md": (
    "stdlib-L12-constant-lr{0.0005-w0,",  # a folder name's lr
    "| deepnorm | **0.001** (0.002 fails)",  # the Shakespeare boundary table: lrs
    "| postnorm | **0.002** (0.004 fails)",
    "| prenorm | - | >= 0.008 (every lr tried trained) | - |",
    "**3.434 stuck** (step 150",  # an eval of a curve.jsonl excerpt, which no fact reads
  ),
  "docs/stabilizers/README.md": (),
  "docs/width/README.md": (
    "(`step_d64_metrics_overhead.json`): 0.247",  # a benchmark's JSON, not a run folder
    "`scripts/benchmark.py` (loop-style wall median",  # the same
  ),
  "docs/second_corpus/README.md": (),
  "docs/depth_transfer/README.md": (),
  "docs/lr_sensitivity/mhc_divided_sinkhorn/README.md": (),
}


@pytest.mark.parametrize("page", sorted(NOT_RUN_NUMBERS))
def test_a_pages_run_numbers_are_facts(page):
  with open(os.path.join(ROOT, page)) as f:
    text = f.read()
  allowed = NOT_RUN_NUMBERS[page]
  typed = [
    f"{page}:{n}: {line.strip()[:120]}"
    for n, line in doc_sections.untagged_numbers(text)
    if not any(a in line for a in allowed)
  ]
  assert not typed, "numbers typed by hand (make each a fact: CONTRIBUTING.md):\n" + "\n".join(
    typed
  )
  # each allowance still matches a line: a stale one would hide a new number
  for a in allowed:
    assert a in text, f"{page}: NOT_RUN_NUMBERS entry {a!r} matches no line"


def test_untagged_numbers_skips_facts_sections_and_code():
  text = "\n".join([
    "ends at 1.7646 and 2 of 3 kept",
    "ends at <!-- fact:loss=4:r -->1.7646<!-- /fact -->",
    "<!-- t: written by scripts/claims.py -->",
    "| 1.7646 |",
    "<!-- end of t -->",
    "```",
    "loss 1.7646",
    "```",
    "| hand | 1.7646 |",
    "lr 1.6e-2, 1,000 steps, 0.05 margin",
  ])  # fmt: skip
  assert [n for n, _ in doc_sections.untagged_numbers(text)] == [1, 9]
