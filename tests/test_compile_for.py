"""Deviceless compiles for TPU topologies (resnorm_jax/hardware/target_compile.py): libtpu's
compiler on this host, no TPU. Skipped where libtpu (requirements-dev.txt) is not installed."""

import os
import subprocess
import sys

import pytest

from resnorm_jax.config import cli
from resnorm_jax.hardware import target_compile as tc
from resnorm_jax.hardware import target_report, tpu_target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_libtpu = pytest.mark.skipif(
  not tpu_target.importlib.util.find_spec("libtpu"),
  reason="libtpu (the TPU compiler) is not installed: pip install -r requirements-dev.txt",
)


def _smoke(**overrides):
  return tc.with_overrides(cli.load_config_file("configs/smoke.py"), overrides)


def _cli(*args):
  # without JAX_PLATFORMS or libtpu's TPU_* settings: the command chooses its platform itself
  drop = ("JAX_PLATFORMS", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES")
  env = {k: v for k, v in os.environ.items() if k not in drop}
  return subprocess.run(
    [sys.executable, "-m", "experiments.compile_for", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
    env=env,
  )


@pytest.mark.parametrize(
  "spec, name",
  [
    ("v5e:2x2", "v5e:2x2"),
    ("v5litepod-16", "v5e:4x4"),
    ("v5litepod-64", "v5e:8x8"),
    ("v6e-32", "v6e:4x8"),
    ("v5p-8", "v5p:2x2x1"),  # v5p and v4 accelerator types count TensorCores: 4 chips
    ("v5p-16", "v5p:2x2x2"),
    ("v5p-256", "v5p:4x4x8"),
    ("v4-32", "v4:2x2x4"),
    ("v4-128", "v4:4x4x4"),
  ],
)
def test_topology_names_and_accelerator_types(spec, name):
  assert tpu_target.topology_name(spec)[1] == name


@pytest.mark.parametrize("spec", ["v9:2x2", "v5e:2x2x2x2", "v5p:4x4", "v5litepod-12", "tpu", ""])
def test_bad_topology_names_are_refused(spec):
  with pytest.raises(tpu_target.TargetError):
    tpu_target.topology_name(spec)


def test_no_libtpu_is_one_line(monkeypatch):
  monkeypatch.setattr(tpu_target.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(tpu_target.TargetError, match="libtpu is not installed"):
    tpu_target.topology_devices("v5e:2x2")


def test_loop_correction_is_arithmetic():
  one, two = {"flops": 10.0, "optimal_seconds": 1.0}, {"flops": 13.0, "optimal_seconds": 1.5}
  assert tc.loop_corrected(one, two, 96) == {"flops": 10 + 95 * 3, "optimal_seconds": 48.5}
  # three layers per iteration: the extra two cost 13 - 10, a layer 1.5
  assert tc.loop_corrected(one, two, 9, unroll=3)["flops"] == 10 + 8 * 1.5
  with pytest.raises(ValueError, match="does not divide"):
    tc.loop_corrected(one, two, 9)


@pytest.mark.parametrize("layers, unroll", [(2, 2), (96, 2), (1000, 2), (3, 3), (9, 3), (25, 5)])
def test_the_second_compile_unrolls_a_divisor_of_the_depth(layers, unroll):
  assert tc.correction_unroll(layers) == unroll


def _report(flops_per_chip, chips=64, model_flops=1e12, corrected=True, scanned=True):
  memory = {"argument": 1, "output": 1, "alias": 0, "temp": 1, "generated_code": 0, "total": 3}
  train = target_report.Compiled(memory, "", {"flops": flops_per_chip}, 1.0, 1.0)
  cost = {"flops": flops_per_chip, "optimal_seconds": 1.0}
  return target_report.Report(
    "m", "v5e:8x8", tpu_target.CHIPS["v5e"], chips, {"data": 1, "fsdp": chips, "tensor": 1}, "full",
    (256, 512), 10, 256, 16 * tpu_target.GIB, train, None, cost, corrected, model_flops,
    seconds=1.0, seconds_source="optimal_seconds", scanned=scanned,
  )  # fmt: skip


def test_compiled_over_analytic_flops_is_reported_and_flagged_past_the_limit():
  """The :paper rows' estimates were of a step doing 13-27x the model's FLOPs (results.csv
  before flops_ratio): the ratio is a column and a warning past FLOPS_RATIO_LIMIT."""
  fine, repeated = _report(1.3e12 / 64), _report(13.4e12 / 64)
  assert fine.flops_ratio == pytest.approx(1.3) and not fine.flops_warning
  assert repeated.flops_ratio == pytest.approx(13.4) and "13.4x" in repeated.flops_warning
  assert target_report.csv_row(repeated, "m")["flops_ratio"] == "13.40"
  text = "\n".join(target_report.describe(repeated))
  assert "compiled / analytic FLOPs 13.40" in text and "WARNING: the compiled step" in text
  # A scanned stack without the loop correction counts one layer: no ratio, no verdict.
  uncorrected = _report(0.1e12 / 64, corrected=False)
  assert (
    uncorrected.flops_ratio is None and target_report.csv_row(uncorrected, "m")["flops_ratio"] == ""
  )
  assert _report(1.3e12 / 64, corrected=False, scanned=False).flops_ratio == pytest.approx(1.3)


def test_a_step_counting_less_than_the_models_flops_is_flagged_unless_splash_left_it_out():
  """Post-LN 96 :paper on v5e:4x4 counted 0.78x: the windowed einsums' loops counted once."""
  under = _report(0.78e12 / 64)
  assert "0.78x the analytic model FLOPs" in under.flops_warning
  assert "windowed einsums" in under.flops_warning
  under.notes.append("the splash attention kernel is not in the cost model")
  assert not under.flops_warning  # its attention counts 0: a low ratio is expected
  assert not _report(1.0e12 / 64).flops_warning


def test_candidates_go_remat_then_fsdp_then_batch():
  c = _smoke(**{"model.remat": "dots", "train.batch_size": 64})
  labels = [label for label, _ in tc.candidates(c, 4)]
  assert labels[:3] == ["model.remat=dots_no_batch", "model.remat=full", labels[2]]
  assert labels[2].startswith("mesh.data=1 mesh.fsdp=-1")
  assert all("train.batch_size" in label for label in labels[3:]) and len(labels) == 6


@pytest.mark.slow  # compiles for a TPU
@needs_libtpu
def test_smoke_fits_on_v5e_2x2_with_positive_memory_and_flops():
  r = tc.compile_for(_smoke(), "v5e:2x2")
  assert r.fits and r.chips == 4 and r.chip.name == "v5e"
  assert r.train.memory["total"] > 0 and r.eval.memory["total"] > 0
  assert r.cost["flops"] > 0 and r.step_seconds > 0 and 0 < r.mfu < 1
  assert (
    15 * tpu_target.GIB < r.hbm_limit <= 16 * tpu_target.GIB
  )  # the compiler's own limit (15.75 GiB)
  text = "\n".join(target_report.describe(r))
  assert "FITS on v5e:2x2" in text and target_report.ESTIMATE in text


@pytest.mark.slow  # two TPU compiles of a 24-layer stack (about 20 s)
@pytest.mark.long  # the arithmetic: test_loop_correction_is_arithmetic
@needs_libtpu
@pytest.mark.parametrize("layers", [8, 9])
def test_loop_correction_matches_the_unrolled_stack(layers):
  """The scanned stack's cost counts its loop body once; one + (L-1) x (two - one) recovers
  the cost of the same stack compiled without a loop (every layer in line). At an odd depth
  the second compile's unroll divides it (9: three per iteration); with two per iteration
  the remainder ran outside the loop and a 3-layer stack's estimate was 1.6x its cost."""
  c = _smoke(**{"model.num_layers": layers, "model.d_model": 128, "model.d_ff": 512})
  scanned = tc.compile_for(c, "v5e:2x2", eval_step=False)
  unrolled = tc.compile_for(
    tc.with_overrides(c, {"model.scan_unroll": layers}),
    "v5e:2x2",
    eval_step=False,
    correct_loop=False,
  )
  assert scanned.corrected and not unrolled.corrected
  assert scanned.cost["flops"] == pytest.approx(unrolled.cost["flops"], rel=0.02)
  loop_once = tc.compile_for(c, "v5e:2x2", eval_step=False, correct_loop=False)
  assert loop_once.cost["flops"] < 0.5 * unrolled.cost["flops"]  # what the correction is for


@needs_libtpu
@pytest.mark.long  # a TPU compile
def test_v4_compiles_one_device_per_chip_and_its_cores_make_a_mesh():
  from jax.experimental import topologies

  from resnorm_jax.train import sharding

  chip, name, devices = tpu_target.topology_devices("v4:2x2x1")
  assert (chip.name, len(devices)) == ("v4", 4)  # megacore: 4 chips, not 8 cores
  r = tc.compile_for(_smoke(), "v4-8", eval_step=False, correct_loop=False)
  assert r.fits and r.mesh == {"data": 4, "fsdp": 1, "tensor": 1}
  cores = topologies.get_topology_desc("v4:2x2x1", "tpu").devices  # libtpu's default: per core
  assert len(cores) == 8
  mesh = sharding.make_mesh(_smoke().mesh, cores)  # jax.make_mesh alone refuses these
  assert mesh.devices.size == 8


@needs_libtpu
def test_a_mesh_that_does_not_divide_the_chips_is_refused_before_compiling():
  with pytest.raises(tpu_target.TargetError, match="v5e:2x2: mesh"):
    tc.compile_for(_smoke(**{"mesh.data": 3}), "v5e:2x2")


@needs_libtpu
@pytest.mark.slow  # a child process: JAX's start-up and three compiles
@pytest.mark.long  # a TPU compile past the chip's memory and one that fits; the order of the
# recommendations: test_candidates_go_remat_then_fsdp_then_batch
def test_cli_refuses_a_config_too_big_for_the_chip_and_names_one_that_fits():
  # Logits of 16,384 x 32 tokens x 32,768 ids per step, a quarter per chip (rows split over
  # 4 chips): 16.08 GiB of temporaries per v5e chip (15.75 GiB allowed); half the batch fits.
  # One layer of width 16 (the refusal takes 2 s of CPU; the half batch that fits, 76 s).
  big = ["--config.model.vocab_size=32768", "--config.train.batch_size=16384",
         "--config.model.remat=full", "--config.mesh.data=1", "--config.mesh.fsdp=-1",
         "--config.model.num_layers=1", "--config.model.d_model=16",
         "--config.model.d_ff=16"]  # fmt: skip
  proc = _cli("--config=configs/smoke.py", "--topology=v5e:2x2", "--noeval", *big)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "DOES NOT FIT on v5e:2x2" in proc.stdout
  assert "recommendation: train.batch_size=" in proc.stdout, proc.stdout
  assert "does not fit on v5e:2x2" in proc.stderr.splitlines()[-1]


@needs_libtpu
@pytest.mark.parametrize(
  "topology, message", [("v9:2x2", "unknown TPU"), ("v5e:2x3", "not divisible")]
)
def test_cli_bad_topology_is_one_line_and_exit_2(topology, message):
  proc = _cli("--config=configs/smoke.py", f"--topology={topology}")
  assert proc.returncode == 2 and "FITS" not in proc.stdout
  # one line and nothing else: v5e:2x3 loads libtpu, whose start-up lines off a TPU VM
  # ("unexpected worker hostname", "Unable to initialize backend 'tpu'") are not printed
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr


def test_a_target_compile_runs_jax_on_the_cpu_and_tells_libtpu_it_is_no_tpu_vm(monkeypatch):
  for name in ("JAX_PLATFORMS", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES"):
    monkeypatch.delenv(name, raising=False)
  tc.use_cpu_host()
  assert os.environ["JAX_PLATFORMS"] == "cpu"
  import jax

  assert jax.config.jax_platforms == "cpu"
  assert tpu_target.accelerator_type(*tpu_target.topology_name("v5e:2x2")) == "v5litepod-4"
  assert tpu_target.accelerator_type(*tpu_target.topology_name("v5p-16")) == "v5p-16"
  assert tpu_target.accelerator_type(*tpu_target.topology_name("v4-32")) == "v4-32"
  assert tpu_target.accelerator_type(*tpu_target.topology_name("v6e:4x8")) == "v6e-32"


def _small(**overrides):
  """d 128, 4 heads, FFN 512, 2 layers in line (no loop), 128 tokens, 32 sequences: the
  :paper layer's structure at a width a 16-chip compile takes seconds for."""
  shape = {
    "model.num_layers": 2, "model.scan_unroll": 2, "model.d_model": 128,
    "model.num_heads": 4, "model.d_ff": 512, "model.max_seq_len": 128,
    "train.seq_len": 128, "train.batch_size": 32, "model.remat": "full",
    "model.dtype": "bfloat16", "diag.per_layer": False,
  }  # fmt: skip
  return _smoke(**shape, **overrides)


@pytest.mark.slow  # compiles for a TPU
@needs_libtpu
@pytest.mark.long  # a TPU compile; fsdp's share: the next test
def test_data_parallel_step_does_its_share_of_the_model_flops():
  r = tc.compile_for(_small(), "v5e:4x4", vocab_size=256, eval_step=False)
  assert r.mesh["data"] == 16 and not r.corrected and not r.scanned
  assert 1.0 < r.flops_ratio < target_report.FLOPS_RATIO_LIMIT and not r.flops_warning


@pytest.mark.slow  # compiles for a TPU
@needs_libtpu
def test_fsdp_step_does_its_share_of_the_model_flops():
  """With the weights sharded over fsdp on 'embed', the stream must stay split by rows
  (resnorm_jax/model/stream_sharding.py): without the constraint the partitioner split it on
  d_model and every chip ran the whole global batch (13x the model's FLOPs)."""
  fsdp = {"mesh.data": 1, "mesh.fsdp": -1}
  r = tc.compile_for(_small(**fsdp), "v5e:4x4", vocab_size=256, eval_step=False)
  assert r.mesh["fsdp"] == 16
  assert r.flops_ratio < target_report.FLOPS_RATIO_LIMIT, "\n".join(target_report.describe(r))


def test_the_libtpu_settings_do_not_outlive_the_topology_lookup(monkeypatch):
  """TPU_WORKER_HOSTNAMES left set would tell every later training process it is on a TPU
  cluster (jax.distributed.initialize: 'coordinator_address should be defined')."""
  for name in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES"):
    monkeypatch.delenv(name, raising=False)
  tpu_target.topology_devices("v5e:2x2")
  assert "TPU_WORKER_HOSTNAMES" not in os.environ and "TPU_ACCELERATOR_TYPE" not in os.environ


_HLO = """HloModule m

%fused (param_0: bf16[16,8,512,64]) -> bf16[16,8,512,512] {
  %param_0 = bf16[16,8,512,64]{3,2,1,0} parameter(0)
  ROOT %dot.9 = bf16[16,8,512,512]{3,2,1,0} dot(%param_0, %param_0), lhs_contracting_dims={3}
}

%body (p.1: (s32[], f32[16,512,512])) -> (s32[], f32[16,512,512]) {
  %p.1 = (s32[], f32[16,512,512]{2,1,0}) parameter(0)
  %x = f32[16,512,512]{2,1,0} get-tuple-element(%p.1), index=1
  %tanh.1 = f32[16,512,512]{2,1,0} tanh(%x), metadata={op_name="jit(f)/jvp()/while/body/tanh"}
  %i = s32[] get-tuple-element(%p.1), index=0
  ROOT %t = (s32[], f32[16,512,512]{2,1,0}) tuple(%i, %tanh.1)
}

%cond (p.2: (s32[], f32[16,512,512])) -> pred[] {
  %p.2 = (s32[], f32[16,512,512]{2,1,0}) parameter(0)
  %i.2 = s32[] get-tuple-element(%p.2), index=0
  %c = s32[] constant(6)
  ROOT %lt = pred[] compare(%i.2, %c), direction=LT
}

ENTRY %main (a: bf16[16,8,512,64], w: f32[4096,4096]) -> bf16[16,512,512] {
  %a = bf16[16,8,512,64]{3,2,1,0} parameter(0)
  %w = f32[4096,4096]{1,0} parameter(1)
  %fusion.1 = bf16[16,8,512,512]{3,2,1,0} fusion(%a), kind=kOutput, calls=%fused
  %init = (s32[], f32[16,512,512]{2,1,0}) tuple(%fusion.1, %fusion.1)
  %while.1 = (s32[], f32[16,512,512]{2,1,0}) while(%init), condition=%cond, body=%body
  %y = f32[16,512,512]{2,1,0} get-tuple-element(%while.1), index=1
  ROOT %convert.3 = bf16[16,512,512]{2,1,0} convert(%y), metadata={op_name="jit(f)/convert"}
}
"""


def test_tune_reads_the_largest_ops_from_the_hlo_text_and_picks_the_fastest_fit():
  from resnorm_jax.hardware import tune, tune_compile

  # Parameters are inputs, not ops: left out; the loop's tanh runs 6 times (32 MiB in and out).
  top = tune_compile.top_ops_by_bytes(_HLO)
  assert top == ["tanh f32[16,512,512] x6 0.19 GiB (forward: tanh)",
                 "fusion bf16[16,8,512,512] x1 0.07 GiB (unnamed: (none))",
                 "convert bf16[16,512,512] x1 0.02 GiB (update: convert)"]  # fmt: skip
  assert tune.mesh_overrides("data_fsdp", 16) == {"mesh.data": 4, "mesh.fsdp": 4, "mesh.tensor": 1}
  assert tune.mesh_overrides("data_fsdp", 8)["mesh.fsdp"] == 2
  with pytest.raises(ValueError, match="one of data, fsdp, data_fsdp"):
    tune.mesh_overrides("tensor", 8)
  a, b, c = (tune.Candidate(m, "none") for m in tune.MESHES)
  results = {
    a: tune.Result(fits=True, step_s=2.0, corrected=True),
    b: tune.Result(fits=False, step_s=None),
    c: tune.Result(fits=True, step_s=1.0, corrected=True),
  }
  assert tune.winner(results) == c
  results[c] = tune.Result(fits=True, step_s=None)  # memory pass only: no estimate to rank
  assert tune.winner(results) == a
  # the config as it is is always compiled: the :paper configs' fsdp, full remat, dense
  paper = cli.load_config_file("configs/postnorm_96L.py:paper")
  assert tune.own_candidate(paper, 8) == tune.Candidate("fsdp", "full", "dense")
  assert tune.own_candidate(_smoke(), 4) == tune.Candidate("data", "none", "dense")


@needs_libtpu
def test_tune_refuses_bad_input_before_compiling():
  from resnorm_jax.hardware import tune

  with pytest.raises(tpu_target.TargetError, match="needs a TPU topology"):
    tune.tune(_smoke(), "h100:8")
  with pytest.raises(tpu_target.TargetError, match="does not split over v5e:4x4's 16 chips"):
    tune.tune(_smoke(), "v5e:4x4")  # 8 sequences


@pytest.mark.slow  # four TPU compiles of the smoke model (about 20 s of CPU)
@needs_libtpu
@pytest.mark.long  # a tune's TPU compiles
def test_tune_lines_and_winner_agree_and_a_rerun_is_cached(tmp_path):
  from resnorm_jax.hardware import tune

  kwargs = dict(meshes=("data", "fsdp"), attentions=("dense",), flag_sets=("default",))
  lines: list[str] = []
  c = cli.load_config_file("configs/prenorm_96L.py:smoke")
  t = tune.tune(c, "v5e:2x2", cache_path=str(tmp_path / "c.json"), log=lines.append, **kwargs)
  fits = {k: r for k, r in t.results.items() if r.fits}
  assert set(fits) == {tune.Candidate("data", "none"), tune.Candidate("fsdp", "none")}
  assert t.best in fits and t.results[t.best].step_s == min(r.step_s for r in fits.values())
  for k, r in fits.items():  # one line per candidate with its estimate, MFU and bound
    [text] = [s for s in lines if s.strip().startswith(k.label)]
    assert f"est {r.step_s:.4g} s" in text and f"MFU {r.mfu:6.1%}" in text
    assert f"{r.bound}-bound" in text and len(r.top_ops) == 3 and r.corrected
    assert r.bound in ("FLOPs", "bytes") and 0 < r.mfu < 1
  assert lines[-1].startswith(f"winner: {t.best.label}: ")
  again: list[str] = []
  t2 = tune.tune(c, "v5e:2x2", cache_path=str(tmp_path / "c.json"), log=again.append, **kwargs)
  assert t2.best == t.best and all(r.cached for r in t2.results.values())
  assert again[-1] == lines[-1]


def test_tune_flag_sets_compose_by_name_and_a_bad_name_is_refused():
  from resnorm_jax.hardware import tune, xla_flags

  c = tune.Candidate("fsdp", "full", "splash", "maxtext")
  assert tune.flag_parts("default") == () and tune.flags_of("default") == {}
  both = tune.with_flags(c, "no_windowed")
  assert both.flags == "no_windowed+maxtext" and tune.with_flags(both, "maxtext") == both
  assert tune.flags_of(both.flags) == {**xla_flags.NO_WINDOWED_EINSUM, **xla_flags.MAXTEXT_FLAGS}
  one = {"xla_tpu_enable_windowed_einsum_for_all_gather": "false"}
  assert tune.flags_of("no_windowed+maxtext", accepted=one) == one  # what libtpu refused: left out
  with pytest.raises(ValueError, match="'fast' .* one of default, no_windowed, maxtext"):
    tune.flag_parts("maxtext+fast")


def test_a_stale_cached_attribution_of_a_splash_program_is_counted_again(tmp_path, monkeypatch):
  """A splash candidate cached with the attribution that stopped at the kernel's multi-line
  attributes (hlo_bytes.VERSION 1) gets its memory pass compiled again; its corrected estimate
  stands and only its attributed roofline is redone from the new count. A dense candidate
  counted with older rules (the nested-fusion rule of VERSION 3, HBM only in 4) is counted
  again too; one counted with this version is kept."""
  from resnorm_jax.hardware import tune

  config = tc.with_overrides(_smoke(), {"model.attention": "splash"})
  tgt = tune.Target(tpu_target.CHIPS["v5e"], "v5e:2x2", [None] * 4, 16 * tpu_target.GIB, {})
  c = tune.Candidate("data", "none", "splash")
  cache = tune.Cache(str(tmp_path / "c.json"))
  # each candidate's program as lowered: a name of its own (no devices here to lower for)
  monkeypatch.setattr(tune, "lowered", lambda config, tgt, c, vocab: (object(), c.attention))
  old = tune.Result(fits=True, per_chip_bytes=1e9, raw_cost={"flops": 1.0}, attributed_bytes=1e6)
  two = tune.Result(
    **{**old.__dict__, "corrected": True, "step_s": 0.5, "mfu": 0.2, "flops": 1e12, "bytes": 4e11}
  )
  cache.put(tune.cache_key("splash", tgt.name, {}, False), old)
  cache.put(tune.cache_key("splash", tgt.name, {}, True), two)
  from resnorm_jax.hardware import hlo_bytes

  now = hlo_bytes.VERSION
  fresh = tune.Result(**{**old.__dict__, "attributed_bytes": 8e10, "attribution": now})
  calls = []
  monkeypatch.setattr(tune, "_memory_pass", lambda *a: calls.append(a) or fresh)
  monkeypatch.setattr(tune, "_corrected", lambda *a: pytest.fail("the estimate is recompiled"))
  r = tune.evaluate(cache, config, tgt, c, 256, corrected=True)
  assert len(calls) == 1 and r.attribution == now and r.attributed_bytes == 8e10
  assert (r.step_s, r.mfu, r.flops) == (0.5, 0.2, 1e12)  # the estimate as it was
  chip = tgt.chip
  assert r.attributed_step_s > max(1e12 / chip.bf16_flops, 8e10 / chip.hbm_bandwidth)  # + kernel
  again = tune.evaluate(tune.Cache(str(tmp_path / "c.json")), config, tgt, c, 256, corrected=True)
  assert len(calls) == 1 and again.attributed_bytes == 8e10  # counted once: cached now
  dense = tune.Candidate("data", "none", "dense")
  cache.put(
    tune.cache_key("dense", tgt.name, {}, False),
    tune.Result(**{**old.__dict__, "attribution": now - 1}),
  )
  assert tune.evaluate(cache, config, tgt, dense, 256, corrected=False).attributed_bytes == 8e10
  assert len(calls) == 2  # counted with older rules: counted again
  cache.put(
    tune.cache_key("dense", tgt.name, {}, False),
    tune.Result(**{**old.__dict__, "attribution": now}),
  )
  assert tune.evaluate(cache, config, tgt, dense, 256, corrected=False).attributed_bytes == 1e6
  assert len(calls) == 2  # this version's count: kept


def test_the_tune_caches_key_is_the_program_as_lowered(monkeypatch):
  """A compile is cached under the train step as lowered: the same config and candidate lower
  to the same program (its key); a change to what the model's code computes (here its softmax
  written another way, the same values) is another program, so it is compiled again instead
  of read as the new code's; so is another config value. The compile options are a key's too."""
  import jax

  from resnorm_jax.hardware import tune
  from resnorm_jax.model import attention as attention_lib

  config = _smoke()
  tgt = tune.target("v5e:2x2", lambda s: None)
  c = tune.Candidate("data", "none", "dense")
  low, program = tune.lowered(config, tgt, c, 256)
  assert low is not None and tune.lowered(config, tgt, c, 256)[1] == program
  key = tune.cache_key(program, tgt.name, {}, False)
  assert key != tune.cache_key(program, tgt.name, {}, True)
  assert key != tune.cache_key(program, tgt.name, tune.flags_of("maxtext"), False)
  other = tc.with_overrides(config, {"model.norm_eps": 1e-6})
  assert tune.lowered(other, tgt, c, 256)[1] != program
  monkeypatch.setattr(attention_lib, "softmax", lambda x: jax.nn.softmax(x, axis=-1))
  assert tune.lowered(config, tgt, c, 256)[1] != program
  refused = tune.Candidate("data", "none", "splash")  # the smoke sequence is not the kernel's
  low, why = tune.lowered(config, tgt, refused, 256)
  assert low is None and "multiple of 128" in why
