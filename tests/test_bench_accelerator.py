"""scripts/bench_accelerator.py and resnorm_jax/hardware/accelerator.py: a step timed on this
host's chips beside the cost model's estimate of the same program. On this CPU: the script at
the smallest smoke shape, the chip lookup, and the estimate's plumbing with a stand-in chip.

No timing assertions: timings on a shared CPU mean nothing in a test.
"""

import dataclasses
import json
import math

import jax
import pytest

from resnorm_jax.config import cli
from resnorm_jax.hardware import accelerator, bench, gpu_target, tpu_target
from resnorm_jax.hardware import target_compile as tc
from resnorm_jax.train import run_setup

TINY = {
  "model.d_model": 16,
  "model.d_ff": 16,
  "train.seq_len": 16,
  "model.max_seq_len": 16,
  "diag.per_layer": False,
}


@pytest.mark.parametrize(
  "kind, name",
  [("TPU v5 lite", "v5e"), ("TPU v5", "v5p"), ("TPU v6 lite", "v6e"), ("TPU v4", "v4")]
  + [("NVIDIA H100 80GB HBM3", "h100"), ("cpu", None), ("NVIDIA A100-SXM4-40GB", None)],
)
def test_the_local_chip_is_found_by_its_device_kind(kind, name):
  chip = accelerator.local_chip(kind)
  assert (chip.name if chip else None) == name
  if chip:
    known = tpu_target.CHIPS.get(name) or gpu_target.GPUS[name][1]
    assert chip.bf16_flops == known.bf16_flops


@pytest.mark.slow  # two TPU compiles
def test_the_estimate_is_the_loop_corrected_compile_of_the_same_run():
  """On the devices given (here one CPU device and a stand-in v5e with unbounded bandwidth,
  so the roofline is FLOP-bound): the target compile's loop-corrected cost, not the loop body
  counted once, and the MFU of docs/tpu_compile/README.md. The loop correction itself is
  checked against unrolled stacks on TPU compiles (test_compile_for.py)."""
  config = tc.with_overrides(
    cli.load_config_file("configs/smoke.py"), {**TINY, "model.num_layers": 4}
  )
  chip = dataclasses.replace(tpu_target.CHIPS["v5e"], hbm_bandwidth=math.inf)
  devices = jax.devices()[:1]
  est = accelerator.estimate(config, chip, devices, "cpu")
  report = tc.compile_on(config, "v5e", chip, devices, "cpu", eval_step=False)
  once = tc.compile_on(config, "v5e", chip, devices, "cpu", eval_step=False, correct_loop=False)
  assert report.corrected and est.source == "roofline of FLOPs and bytes"
  assert est.seconds == report.step_seconds == report.cost["flops"] / chip.bf16_flops
  assert est.seconds * chip.bf16_flops > 1.5 * once.cost["flops"]
  t = config.train
  per_token = bench.flops_per_token(run_setup.model_config(config), t.seq_len)["train"]
  model_flops = per_token * t.batch_size * t.seq_len
  assert est.mfu == pytest.approx(model_flops / (est.seconds * chip.bf16_flops))


@pytest.mark.long  # the script end to end; its arithmetic: this file's other tests
def test_bench_accelerator_runs_at_smoke_scale_on_cpu(tmp_path, run_script):
  out = tmp_path / "bench.json"
  shape = [f"--config.{k}={v}".replace("False", "false") for k, v in TINY.items()]
  argv = ["scripts/bench_accelerator.py", "--config=configs/smoke.py", "--steps=2"]
  proc = run_script([*argv, "--warmup=1", "--config.model.num_layers=1", *shape, f"--out={out}"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "measured" in proc.stdout and accelerator.NO_ESTIMATE["cpu"] in proc.stdout
  r = json.loads(out.read_text())
  m = r["measured"]
  assert m["step_s"] == r["loop_step_s"]["median"] > 0
  assert m["tokens_per_second"] == pytest.approx(r["tokens_per_step"] / m["step_s"])
  assert m["mfu"] == pytest.approx(
    r["flops"]["per_step"] / m["step_s"] / r["matmul"]["best_flops_per_s"]
  )
  assert "measured here" in m["mfu_against"]
  assert r["estimate"]["seconds"] is None and r["estimate"]["mfu"] is None


def test_bench_accelerator_refuses_bad_steps_in_one_line(run_script):
  proc = run_script(["scripts/bench_accelerator.py", "--config=configs/smoke.py", "--steps=0"])
  assert proc.returncode != 0
  assert proc.stderr.strip().count("\n") == 0 and "--steps" in proc.stderr
