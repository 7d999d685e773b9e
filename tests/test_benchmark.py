"""The benchmark scripts (benchmark.py, bench_matmuls.py, bench_norms.py, compare_steps.py,
gpu_check.sh) end to end on tiny configs: their JSON holds finite positive numbers.

No timing assertions: timings on a shared CPU mean nothing in a test.
"""

import itertools
import json
import math
import os

import pytest

from resnorm_jax.config import cli
from resnorm_jax.hardware import bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The smallest model the scripts run: 1 layer of width 16, 16 tokens (of smoke.py, or of the
# config a script picks itself, as gpu_check.sh does).
TINY_SHAPE = [
  "--config.model.num_layers=1",
  "--config.model.d_model=16",
  "--config.model.d_ff=16",
  "--config.train.seq_len=16",
  "--config.model.max_seq_len=16",
]
TINY = ["--config=configs/smoke.py", *TINY_SHAPE]


@pytest.mark.long  # the benchmark script end to end
def test_benchmark_writes_finite_positive_numbers(tmp_path, run_script):
  out = tmp_path / "bench.json"
  proc = run_script(
    [
      "scripts/benchmark.py",
      *TINY,
      "--config.diag.per_layer=false",
      "--steps=2",
      "--warmup=1",
      "--matmul_size=64",
      f"--out={out}",
    ]
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "tokens/s" in proc.stdout and "MFU" in proc.stdout
  r = json.loads(out.read_text())
  for value in (
    r["compile"]["total_s"],
    r["loop_step_s"]["median"],
    r["loop_step_s"]["p10"],
    r["loop_step_s"]["p90"],
    r["sync_step_s"]["median"],
    r["data_s"]["median"],
    r["tokens_per_second"],
    r["flops"]["train"],
    r["achieved_flops_per_s"],
    r["matmul"]["best_flops_per_s"],
    r["mfu"],
    r["memory"]["peak_rss_bytes"],
    r["memory"]["aot_bytes"]["total"],
    r["final_loss"],
  ):
    assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, value
  assert r["tokens_per_step"] == 8 * 16 and r["params"] > 0


def _variant_defaults(m: type) -> None:
  """Every variant key at its default on a stand-in model config (features read their keys)."""
  from resnorm_jax.model import variants

  for name, key in variants.keys().items():
    if not hasattr(m, name):
      setattr(m, name, key.default)


def test_flops_per_token_formula():
  """6 N_mm + 12 L T d, counted by hand for a 2-layer gelu model and a swiglu one."""

  class M:
    d_model, d_ff, num_layers, vocab_size = 8, 32, 2, 10
    ffn_activation, block, residual = "gelu", "sequential", "add"

  _variant_defaults(M)

  per_layer = 4 * 64 + 2 * 8 * 32
  n_mm = 2 * per_layer + 8 * 10
  f = bench.flops_per_token(M, seq_len=5)
  assert f["matmul_params"] == n_mm
  assert f["train"] == 6 * n_mm + 12 * 2 * 5 * 8 == 3 * f["forward"]
  M.ffn_activation = "swiglu"
  assert bench.flops_per_token(M, 5)["matmul_params"] == n_mm + 2 * 8 * 32


def test_bench_matmuls_step_dots_count_the_models_flops():
  """The dots listed for one step sum to flops_per_token's train count x tokens, per variant."""
  from resnorm_jax.hardware import matmul_floor as bench_matmuls

  for act, block, residual, heads in (
    ("gelu", "sequential", "add", 4),
    ("swiglu", "sequential", "add", 2),
    ("gelu", "sequential", "gated", 4),
    ("gelu", "parallel", "gated", 1),
  ):

    class M:
      d_model, d_ff, num_layers, vocab_size, num_heads = 16, 40, 3, 11, heads
      ffn_activation = act

    _variant_defaults(M)

    M.block, M.residual = block, residual
    batch, seq = 2, 7
    dots = bench_matmuls.step_dots(M, batch, seq)
    total = sum(d.flops * d.count for d in dots)
    assert total == bench.flops_per_token(M, seq)["train"] * batch * seq, (act, block, residual)


def test_bench_matmuls_runs_end_to_end(tmp_path, run_script):
  out = tmp_path / "mm.json"
  proc = run_script(
    [
      "scripts/bench_matmuls.py",
      "--config=configs/smoke.py",
      "--reps=2",
      "--copies=2",
      "--no_torch",
      f"--out={out}",
    ]
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "whole step's dots" in proc.stdout
  r = json.loads(out.read_text())
  assert r["shapes"] and all(row["xla_s"]["median"] > 0 for row in r["shapes"])
  assert r["step"]["flops"] > 0 and math.isfinite(r["step"]["xla_s"]["median"])


@pytest.mark.long  # every step of the GPU check script
def test_gpu_check_script_runs_through_on_cpu(tmp_path, run_script):
  """scripts/gpu_check.sh end to end with its GPU checks skipped and a tiny shape: each remat
  policy and attention path writes its JSON and the summary reads them (the keys it reads
  exist). On a machine without a GPU this is the only run the script gets."""
  out = tmp_path / "gpu"
  tiny = [
    *TINY_SHAPE,
    "--config.model.num_heads=2",
    "--config.train.batch_size=2",
    "--steps=2",
    "--warmup=1",
    "--nosync",
    "--matmul_size=64",
  ]
  proc = run_script(
    ["bash", "scripts/gpu_check.sh", str(out), *tiny],
    timeout=300,
    GPU_CHECK_ON_CPU="1",
    REMATS="none full",  # dots_no_batch runs on a GPU; here two policies show the loop
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  runs = {"dense": "dense", "fused": "xla"}  # fused is the XLA implementation on a CPU
  for (attention, resolved), remat in itertools.product(runs.items(), ("none", "full")):
    r = json.loads((out / f"gpu_{attention}_{remat}.json").read_text())
    assert r["model"]["remat"] == remat and r["model"]["dtype"] == "bfloat16"
    assert r["model"]["attention"] == resolved
    assert r["matmul"]["dtype"] == "bfloat16" and r["mfu"] > 0
  assert len(list(out.glob("gpu_*.json"))) == 4
  table = proc.stdout[proc.stdout.index("attention ") :]
  assert "xla" in table and "dense" in table
  summary = proc.stdout[proc.stdout.index("best MFU") :]
  assert "target >= 35%" in summary


def test_bench_norms_times_both_norms_from_a_random_output_gradient():
  import jax.numpy as jnp

  from resnorm_jax.hardware import norm_bench as bench_norms

  fn, (x, params, dy) = bench_norms.norm_step("rmsnorm", 8, 4, "float32")
  y, (dx, dparams) = fn(x, params, dy)
  assert y.shape == dx.shape == dy.shape == (8, 4)
  # The output gradient is not a constant (the old sum-loss timing let XLA fold it away).
  assert float(jnp.std(dy)) > 0.1
  assert jnp.allclose(dparams["scale"], jnp.sum(dy * y / params["scale"], axis=0), atol=1e-5)
  both = bench_norms.time_norms(("layernorm", "rmsnorm"), tokens=16, d=8, dtype="float32", reps=2)
  assert all(math.isfinite(r["median"]) and r["median"] > 0 for r in both.values())


def test_compare_steps_variant_overrides_typed_and_refused_with_the_key():
  base = cli.load_config_file("configs/smoke.py")
  before = base.to_dict()
  spec = "model.norm=rmsnorm,train.batch_size=4,diag.per_layer=false"
  v = cli.apply_variant(base, spec)
  assert (v.model.norm, v.train.batch_size, v.diag.per_layer) == ("rmsnorm", 4, False)
  assert base.to_dict() == before  # a copy: the main config is untouched
  for spec, needle in (
    ("model.nrom=rmsnorm", "model.nrom"),
    ("train.batch_size=four", "train.batch_size=four"),
    ("diag.per_layer=yes", "true or false"),
    ("model.norm", "not k=v"),
  ):
    with pytest.raises(ValueError, match=needle):
      cli.apply_variant(base, spec)


@pytest.mark.long  # the script end to end
def test_compare_steps_runs_variants_interleaved(tmp_path, run_script):
  out = tmp_path / "cmp.json"
  proc = run_script(
    [
      "scripts/compare_steps.py",
      *TINY,
      "--variant=model.norm=rmsnorm",
      "--steps=3",
      "--block=2",
      "--warmup=1",
      f"--out={out}",
    ]
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  results = json.loads(out.read_text())["results"]
  assert [r["label"] for r in results][1] == "model.norm=rmsnorm" and len(results) == 2
  assert results[0]["vs_first"] == 1.0
  for r in results:
    assert r["step_s"]["n"] == 4 and r["step_s"]["median"] > 0 and math.isfinite(r["final_loss"])
  # A bad variant value is refused before anything compiles: exit 2, the key named.
  bad = run_script(["scripts/compare_steps.py", *TINY, "--variant=model.norm=rms"])
  assert bad.returncode == 2 and "model.norm" in bad.stderr and "rmsnorm" in bad.stderr


def test_memory_limit_is_the_flag_else_the_devices_memory_else_16_gib_on_cpu():
  class Device:
    def __init__(self, platform, stats):
      self.platform, self._stats = platform, stats

    def memory_stats(self):
      if isinstance(self._stats, Exception):
        raise self._stats
      return self._stats

  gib = 2**30
  h200 = Device("gpu", {"bytes_limit": 140 * gib, "bytes_in_use": 0})
  assert bench.memory_limit_bytes(h200, 0.0) == 140 * gib  # not the CPU's 16 GiB
  assert bench.memory_limit_bytes(h200, 2.5) == int(2.5 * gib)
  assert bench.memory_limit_bytes(Device("cpu", None), 0.0) == 16 * gib
  assert bench.memory_limit_bytes(Device("tpu", None), 0.0) is None
  assert bench.memory_limit_bytes(Device("gpu", RuntimeError("no stats")), 0.0) is None
