"""Compiling for NVIDIA GPUs without one (resnorm_jax/hardware/gpu_target.py): the spec, the
usable memory, and, where the CUDA PJRT plugin is installed, the train step compiled for 8
H100s with its memory analysis."""

import math

import pytest

from resnorm_jax.hardware import gpu_target

needs_plugin = pytest.mark.skipif(
  not gpu_target.plugin_installed(),
  reason="the CUDA PJRT plugin (requirements-gpu-compile.txt) is not installed",
)


@pytest.mark.parametrize(
  "spec, expected",
  [("h100:1", ("h100", 1, "1x1x1")), ("h100:8", ("h100", 8, "1x1x8")),
   ("h100:4", ("h100", 4, "1x1x4")), ("h100:32", ("h100", 32, "1x4x8"))],
)  # fmt: skip
def test_a_spec_is_gpus_on_hosts_of_eight(spec, expected):
  assert gpu_target.is_gpu(spec)
  assert gpu_target.topology(spec) == expected


@pytest.mark.parametrize("spec", ["h100:0", "h100:12", "h100", "h100:x", "a100:8"])
def test_a_bad_spec_is_refused_naming_the_forms(spec):
  if spec.startswith("a100"):
    assert not gpu_target.is_gpu(spec)
  with pytest.raises(ValueError, match="NAME:N with N in 1..8"):
    gpu_target.topology(spec)


def test_usable_memory_is_the_default_preallocation_or_the_fraction_set(monkeypatch):
  monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
  assert gpu_target.usable_bytes("h100") == int(84942979072 * 0.75)
  monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")
  assert gpu_target.usable_bytes("h100") == int(84942979072 * 0.9)


def test_no_plugin_is_one_message_naming_the_requirements(monkeypatch):
  monkeypatch.setattr(gpu_target, "plugin_installed", lambda: False)
  with pytest.raises(ValueError, match="requirements-gpu"):
    gpu_target.chip_devices("h100:8")


@needs_plugin
def test_eight_h100s_from_the_description():
  chip, devices = gpu_target.chip_devices("h100:8")
  assert len(devices) == 8 and {d.device_kind for d in devices} == {chip.kind}
  assert chip.kind == "NVIDIA H100 80GB HBM3" and chip.hbm_bytes == 84942979072
  assert len(gpu_target.chip_devices("h100:16")[1]) == 16


@needs_plugin
def test_the_smoke_train_step_compiles_for_eight_h100s_with_its_memory():
  from configs import smoke
  from resnorm_jax.hardware import target_compile, target_report

  config = smoke.get_config()
  r = target_compile.compile_for(config, "h100:8", eval_step=False)
  assert r.chips == 8 and r.chip.name == "h100" and r.topology == "h100:8"
  assert math.prod(r.mesh.values()) == 8
  # memory only: the GPU compiler gives no cost model, so no loop correction and no time
  assert r.fits and 0 < r.train.memory["total"] < r.hbm_limit
  assert r.hbm_limit == gpu_target.usable_bytes("h100") and not r.cost and r.step_seconds is None
  lines = target_report.describe(r)
  assert any("FITS on h100:8" in line for line in lines)
  assert not any("cost-model estimate" in line for line in lines)


def test_cudnn_attention_without_the_cudnn_library_is_one_line_naming_the_wheel():
  """JAX asks the cuDNN library for its version while tracing cuDNN's attention, even for a
  compile-only H100: without the library the step fails in a traceback ("cuDNN not found");
  the compile says which wheel to install instead. Other errors pass through."""
  from resnorm_jax.hardware import target_compile as tc
  from resnorm_jax.hardware.tpu_target import TargetError

  class Run:
    def __init__(self, error):
      self.error = error

    def lower_step(self):
      raise self.error

  with pytest.raises(TargetError, match=r"h100:8: .*cudnn.* \(cuDNN not found\.\): pip install "
                     r"--no-deps nvidia-cudnn-cu12==9\.28\.0\.42") as e:  # fmt: skip
    tc.lower_step(Run(RuntimeError("cuDNN not found.")), "h100:8")
  assert "\n" not in str(e.value)
  with pytest.raises(RuntimeError, match="something else"):
    tc.lower_step(Run(RuntimeError("something else")), "h100:8")
  pins = open("requirements-gpu-compile.txt").read()
  assert tc.CUDNN_WHEEL in pins  # the message names the pinned wheel
