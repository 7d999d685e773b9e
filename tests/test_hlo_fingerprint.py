"""The lowered train step of four named configs hashes to tests/data/hlo_fingerprint.json.

A refactor that claims to move code without changing what it computes must leave the StableHLO
text of the jitted train step byte-identical (scripts/hlo_fingerprint.py). It is traced in a
process of its own with one CPU device and XLA's default flags, as when the hashes were recorded,
not under this suite's 8 fake devices. A change to the model, the optimizer or the loss moves
a hash: record it again (`--write`) only when the change is meant to compute something else.
"""

import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow  # a process of its own (about 10 s)
def test_the_train_step_hlo_of_the_recorded_configs_is_unchanged():
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env["JAX_PLATFORMS"] = "cpu"
  script = os.path.join(ROOT, "scripts", "hlo_fingerprint.py")
  proc = subprocess.run(
    [sys.executable, script, "--check"], cwd=ROOT, env=env, capture_output=True, text=True
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "4/4 train-step HLO hashes equal" in proc.stdout
