"""A named experiment's expected outcome: when it speaks for a run, and what the end says."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from resnorm_jax.runs import end_line
from resnorm_jax.runs import expected as expected_lib
from resnorm_jax.runs.expected import Expected

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XIONG = Expected("stuck", "as Xiong et al. 2020 report for Post-LN without warmup at depth")


def test_it_applies_only_to_the_config_as_named():
  assert expected_lib.applies(None, {}) and expected_lib.applies("", {})
  # logging, speed and memory keep the experiment
  assert expected_lib.applies(None, {"train.log_every": 5, "model.remat": "none", "diag.x": 1})
  for arg in ("smoke", "paper", "wide"):  # another scale is another experiment
    assert not expected_lib.applies(arg, {})
  for key in ("opt.warmup_steps", "model.num_layers", "seed", "train.steps", "data.path"):
    assert not expected_lib.applies(None, {key: 1}), key
  assert not expected_lib.applies(None, {"train.log_every": 5, "opt.lr": 2e-3})
  assert not expected_lib.applies(None, {"diagnostic": 1})  # a prefix, not a section


def test_the_record_and_the_line_say_whether_it_held():
  held = expected_lib.record(XIONG, "stuck")
  assert held == {"outcome": "stuck", "because": XIONG.because, "reproduced": True}
  assert expected_lib.line(held, "stuck") == f"  expected: stuck, {XIONG.because}: reproduced"
  missed = expected_lib.record(XIONG, "trained")
  assert missed["reproduced"] is False
  assert expected_lib.line(missed, "trained").endswith(": NOT reproduced (this run: trained)")
  for status in ("interrupted", "failed", None):  # no verdict: neither held nor missed
    rec = expected_lib.record(XIONG, status)
    assert rec["reproduced"] is None and "no verdict yet" in expected_lib.line(rec, status)
  with pytest.raises(ValueError, match="'unstable' is not one of trained, stuck, diverged"):
    Expected("unstable", "nowhere")


def test_the_end_message_prints_it_after_the_result_line():
  summary = {"status": "completed", "outcome": "stuck", "steps": 200}
  assert "expected:" not in end_line.end_message(summary, "runs/x", None)
  summary["expected"] = expected_lib.record(XIONG, "stuck")
  lines = end_line.end_message(summary, "runs/x", None).splitlines()
  assert lines[1] == f"  expected: stuck, {XIONG.because}: reproduced"
  assert lines[2] == "  summary: runs/x/summary.json"


MAIN_JOBS = [("postnorm_96L", "stuck"), ("prenorm_96L", "trained"), ("deepnorm_96L", "trained")]


@pytest.mark.parametrize("name,outcome", MAIN_JOBS)
def test_the_main_jobs_declare_what_the_committed_runs_show(name, outcome):
  """Each declared expectation is the outcome of the named config's committed run."""
  declared, arg = expected_lib.for_config_file(os.path.join(ROOT, "configs", f"{name}.py"))
  assert (declared.outcome, arg) == (outcome, "")
  run = os.path.join(ROOT, "docs", "runs", name)
  summary = json.load(open(os.path.join(run, "summary.json")))
  baseline = summary.get("heldout_unigram_entropy", summary["unigram_entropy"])
  learned = summary["final_eval_loss"] <= baseline - 0.1  # the verdict's margin
  assert learned == (outcome == "trained"), (name, summary["final_eval_loss"], baseline)
  config = json.load(open(os.path.join(run, "config.json")))
  assert config["name"] == name and config["opt"]["warmup_steps"] == 0


def _train(config_path, workdir, *overrides):
  return subprocess.run(
    [sys.executable, "-m", "experiments.train", f"--config={config_path}", f"--workdir={workdir}"]
    + list(overrides),
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS="cpu"),
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.mark.slow  # two training processes
@pytest.mark.long  # two named runs in processes
def test_a_named_run_reports_its_expectation_and_an_overridden_one_does_not(tmp_path):
  config = tmp_path / "tiny_expected.py"
  config.write_text(
    textwrap.dedent(
      f"""
      import sys
      sys.path.insert(0, {ROOT!r})
      from configs import smoke
      from resnorm_jax.runs.expected import Expected

      EXPECTED = Expected("diverged", "as nothing reports for a 20-step smoke model")

      def get_config():
        return smoke.get_config()
      """
    )
  )
  named = _train(config, tmp_path / "named", "--config.train.log_every=10")
  assert named.returncode == 0, named.stderr[-2000:]
  summary = json.load(open(tmp_path / "named" / "summary.json"))
  assert summary["expected"] == {
    "outcome": "diverged",
    "because": "as nothing reports for a 20-step smoke model",
    "reproduced": False,
  }
  line = "  expected: diverged, as nothing reports for a 20-step smoke model: NOT reproduced"
  assert f"{line} (this run: {summary['outcome']})" in named.stdout.splitlines()
  other = _train(config, tmp_path / "other", "--config.opt.lr=2e-3")
  assert other.returncode == 0, other.stderr[-2000:]
  assert "expected:" not in other.stdout
  assert "expected" not in json.load(open(tmp_path / "other" / "summary.json"))
