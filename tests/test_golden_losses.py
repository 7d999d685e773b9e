"""Every named config trains to the losses recorded in tests/data/golden_losses.json.

scripts/golden_losses.py records the file (the points are resnorm_jax/probes/golden_losses.py's):
6 steps of every named config at smoke scale (2 layers, width 32) and of the extra points (remat,
scan unroll, bfloat16, the nanoGPT shape), every logged train, eval and final-eval loss and
gradient norm. Here they are trained again in processes of their own, as when the file was
recorded (one CPU device and the module's XLA_FLAGS, LLVM without optimizations; not this
suite's 8 fake devices), and compared value by value: equal, or within TOLERANCE_ULPS float32
ulps of the recorded value. The default run trains CLASSIC (the papers' placements); the long
tier (`--long`) every point. Another machine's build of XLA can move a value by an ulp; a change
to the model, the data or the loop moves them by far more. To check a refactor bit for bit,
run `python scripts/golden_losses.py` where the file was recorded.
"""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from resnorm_jax.probes import golden_losses

TOLERANCE_ULPS = 4
# A bfloat16 point's values depend on the CPU's bfloat16 arithmetic (a native instruction or
# an emulation): on two 2-core CPUs of one project they differed by up to 1.4e-4 relative, a
# thousand float32 ulps. It is held to bfloat16's own scale: within BF16_RTOL of the recorded
# value (a change to the model moves it by far more).
BF16_RTOL = 1e-3
# Trains every argv[3]-th of the points of golden_losses.points() labelled in argv[4] (a JSON
# list) from the argv[2]-th on and writes {label: losses} to argv[1]: the points are shared
# among the children run at once.
CHILD = """
import json, sys
from absl import logging
from resnorm_jax.probes import golden_losses
logging.set_verbosity(logging.WARNING)
labels = json.loads(sys.argv[4])
points = [p for p in golden_losses.points() if p[0] in labels]
mine = points[int(sys.argv[2]) :: int(sys.argv[3])]
out = {label: golden_losses.losses(spec, o) for label, spec, o in mine}
with open(sys.argv[1], "w") as f:
  json.dump(out, f)
"""
PROCESSES = 2  # one per core of a 2-core machine: each point compiles its own model
# The default run trains the papers' three placements; the long tier every point.
CLASSIC = ("postnorm_96L:smoke", "prenorm_96L:smoke", "deepnorm_96L:smoke")


def _golden() -> dict:
  with open(golden_losses.GOLDEN) as f:
    return json.load(f)


def test_every_named_config_has_a_recorded_entry_and_every_entry_a_config():
  labels = [label for label, _, _ in golden_losses.points()]
  assert sorted(labels) == sorted(_golden())
  names = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "configs", "*.py"))}
  assert names - {"base", "__init__"} <= {label.split(":")[0] for label in labels}


def _off(now: dict, golden: dict, rtol: float = 0.0) -> list[str]:
  """'step key: now vs golden' for each value that differs by more than TOLERANCE_ULPS (and
  more than `rtol` relative)."""
  assert now.keys() == golden.keys()
  off = []
  for step, values in golden.items():
    assert now[step].keys() == values.keys(), step
    for key, want in values.items():
      got = now[step][key]
      ulp = float(np.spacing(np.float32(abs(want))))
      if got != want and not abs(got - want) <= max(TOLERANCE_ULPS * ulp, rtol * abs(want)):
        off.append(f"{step} {key}: {got!r} vs {want!r}")
  return off


def _train_and_compare(tmp_path, labels: list[str], processes: int):
  """Trains the points labelled `labels` in `processes` children and asserts that each value is
  its recorded one, within the tolerances above."""
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=golden_losses.XLA_FLAGS)
  outs = [tmp_path / f"losses{i}.json" for i in range(processes)]
  logs = [tmp_path / f"stderr{i}.txt" for i in range(processes)]
  procs = []
  for i, (out, log) in enumerate(zip(outs, logs, strict=True)):
    with open(log, "w") as err:  # a file, not a pipe: neither child waits on the other's reader
      argv = [sys.executable, "-c", CHILD, str(out), str(i), str(processes), json.dumps(labels)]
      procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err))
  for p, log in zip(procs, logs, strict=True):
    assert p.wait(timeout=3600) == 0, log.read_text()[-3000:]
  now = {}
  for out in outs:
    with open(out) as f:
      now.update(json.load(f))
  golden = {label: v for label, v in _golden().items() if label in labels}
  assert sorted(now) == sorted(golden) == sorted(labels)
  rtol = lambda label: BF16_RTOL if label.endswith("+bf16") else 0.0
  off = {label: _off(now[label], golden[label], rtol(label)) for label in golden}
  assert not any(off.values()), {label: o for label, o in off.items() if o}


@pytest.mark.slow  # a short training run per point, in one process
def test_the_classic_placements_train_to_their_golden_losses(tmp_path):
  _train_and_compare(tmp_path, list(CLASSIC), processes=1)


@pytest.mark.long  # a short training run per point of golden_losses.points() (38)
def test_every_named_config_trains_to_its_golden_losses(tmp_path):
  _train_and_compare(tmp_path, [label for label, _, _ in golden_losses.points()], PROCESSES)


def test_the_comparison_takes_an_ulp_and_refuses_more():
  golden = {"3": {"eval/loss": 5.868418216705322}, "summary": {"steps": 6}}
  ulp = float(np.spacing(np.float32(5.868418216705322)))
  near = {"3": {"eval/loss": 5.868418216705322 + ulp}, "summary": {"steps": 6}}
  far = {"3": {"eval/loss": 5.868418216705322 + 1e-5}, "summary": {"steps": 6}}
  assert _off(golden, golden) == [] and _off(near, golden) == []
  assert _off(far, golden) == ["3 eval/loss: 5.868428216705322 vs 5.868418216705322"]
  assert _off({"3": near["3"], "summary": {"steps": 5}}, golden) == ["summary steps: 5 vs 6"]
  # a bfloat16 point: this CPU's 5.862981796264648 against the recorded 5.863485336303711
  bf16 = {"3": {"eval/loss": 5.863485336303711}, "summary": {"steps": 6}}
  here = {"3": {"eval/loss": 5.862981796264648}, "summary": {"steps": 6}}
  assert _off(here, bf16, BF16_RTOL) == [] and _off(here, bf16) != []
  assert _off({"3": {"eval/loss": 5.87}, "summary": {"steps": 6}}, bf16, BF16_RTOL) != []
