"""model.attention=splash (JAX's Pallas splash kernel, model/splash.py) equals the dense path.

The kernel is built for a TPU; here it runs in Pallas interpret mode (splash.INTERPRET, which
only tests set) at the smallest shape it takes: a sequence of 128 (one 128 x 128 tile), batch
2, 2 heads of 16 channels. Loss and gradients of a 2-layer model, with and without the
variants the kernel takes itself (sinks, logit softcap) and with RoPE and QK-norm; the
kernel under shard_map on a 2-device data mesh (what a step with a batch-sharded stream
traces); and the one-line refusals off a TPU.
"""

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec, SingleDeviceSharding

from configs import base
from resnorm_jax.model import attention as attention_lib
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model import splash, stream_sharding
from resnorm_jax.model.config_types import model_config_from, resolve_attention
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.train import train_step as ts

T = 128  # the kernel's smallest tile: a sequence is a multiple of it
SHAPE = dict(vocab_size=16, num_layers=2, d_model=32, num_heads=2, d_ff=32, max_seq_len=T)
TOKENS = jnp.asarray(np.random.default_rng(0).integers(0, 16, size=(2, T + 1)), jnp.int32)


@pytest.fixture
def interpret(monkeypatch):
  monkeypatch.setattr(splash, "INTERPRET", True)


def _config(attention: str, **model):
  c = base.get_config()
  c.model.update(SHAPE)
  c.model.update(model)
  c.model.attention = attention
  return c


def _loss_and_grads(cfg):
  model_def = mdl.make_model_def(cfg)
  params, model_state = mdl.init_model(cfg, 0)

  def loss_fn(p):
    logits, _, _ = model_def.apply(p, model_state, TOKENS[:, :-1], train=True)
    return ts.cross_entropy(logits, TOKENS[:, 1:])

  loss, grads = jax.jit(jax.value_and_grad(loss_fn))(params)
  return float(loss), grads


def _close(a, b):
  """Equal up to float32 summation order: relative, or absolute at 1e-5 of the tensor's
  largest entry (a near-zero entry of a large gradient)."""
  b = np.asarray(b)
  np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))


CASES = {
  "post": dict(norm_position="post"),
  # The variants the kernel takes itself, and the q, k transforms before it.
  "pre-sinks-softcap-rope-qk_norm": dict(
    norm_position="pre", attn_sinks=True, attn_softcap=5.0, position="rope", qk_norm=True
  ),
  # a module on [B, T, H, K] between the projections: the kernel on swapped axes
  "pre-attngate-rope": dict(norm_position="pre", attn_gate="elementwise", position="rope"),
}


@pytest.mark.slow  # the kernel in interpret mode
@pytest.mark.parametrize("name", list(CASES))
def test_splash_equals_dense_in_loss_and_gradients(interpret, name):
  dense = model_config_from(_config("dense", **CASES[name]))
  flash = model_config_from(_config("splash", **CASES[name]))  # platform: cpu, interpreted
  assert flash.attention == "splash"
  assert dataclasses.replace(flash, attention="dense") == dense
  loss_d, grads_d = _loss_and_grads(dense)
  loss_s, grads_s = _loss_and_grads(flash)
  np.testing.assert_allclose(loss_s, loss_d, rtol=1e-6)
  jax.tree.map(_close, grads_s, grads_d)
  attn = grads_s["layers"]["attn"]
  if "sinks" in name:  # the sinks' gradient comes from the kernel's backward pass
    assert float(np.abs(attn["sink"]["logits"]).min()) > 0


def _attention(implementation: str, **model):
  cfg = dataclasses.replace(model_config_from(_config("dense", **model)), attention=implementation)
  with nnx.use_eager_sharding(False):
    return attention_lib.Attention(cfg, InitRule("xavier", 2, 32), nnx.Rngs(params=0))


@pytest.mark.parametrize(
  "model, heads_major",
  [
    ({}, True),
    (dict(position="rope", qk_norm=True, attn_sinks=True), True),
    (dict(attn_gate="elementwise"), False),
    (dict(norm_position="hybridnorm"), False),
  ],
)
def test_splash_takes_the_kernels_layout_unless_a_module_needs_the_rows(model, heads_major):
  assert _attention("splash", **model).heads_major == heads_major
  assert not _attention("dense", **model).heads_major


def test_splash_on_the_kernels_layout_moves_fewer_bytes_on_a_tpu():
  """Deviceless for a v5e chip, one attention's forward and backward in bfloat16: projected
  straight to [B, H, T, K] (and the scale folded into q's kernel) the compiled program has
  fewer layout copies and moves fewer HBM bytes than the same module with its axes swapped
  around the kernel (measured 7 against 19 copies; 6.06e6 against 6.32e6 bytes in HBM, 3.11e7
  against 3.95e7 counting VMEM's too, as hlo_bytes did before its rules version 4)."""
  from resnorm_jax.hardware import hlo_bytes
  from resnorm_jax.hardware import target_compile as tc

  tc.use_cpu_host()
  one = SingleDeviceSharding(tc.target_devices("v5e:2x2")[2][0])
  counted = {}
  for heads_major in (True, False):
    attn = _attention("splash")
    attn.heads_major = heads_major
    graphdef, state = nnx.split(attn)

    def loss(state, x, graphdef=graphdef):
      return jnp.sum(nnx.merge(graphdef, state)(x).astype(jnp.float32) ** 2)

    abstract = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=one)
    x = jax.ShapeDtypeStruct((8, 512, 32), jnp.bfloat16, sharding=one)
    step = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(jax.tree.map(abstract, state), x)
    ops = hlo_bytes.op_bytes(step.compile().as_text())
    counted[heads_major] = (
      sum(o.step_bytes for o in ops),
      sum(o.opcode in ("copy", "transpose") for o in ops),
    )
  (bytes_major, copies_major), (bytes_swapped, copies_swapped) = counted[True], counted[False]
  assert copies_major < copies_swapped
  assert bytes_major < 0.98 * bytes_swapped


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_splash_under_shard_map_on_a_data_mesh_equals_dense(interpret):
  """A batch-sharded stream: the kernel runs on each device's rows under shard_map; the
  sinks' gradient (replicated) is summed over the devices."""
  mesh = jax.make_mesh((2,), ("data",), (AxisType.Auto,), devices=jax.devices()[:2])
  rows = NamedSharding(mesh, PartitionSpec("data"))
  x = jnp.asarray(np.random.default_rng(1).normal(size=(4, T, 32)), jnp.float32)
  results = {}
  for impl in ("dense", "splash"):
    graphdef, state = nnx.split(_attention(impl, attn_sinks=True))

    def loss(state, x, graphdef=graphdef):
      y = nnx.merge(graphdef, state)(x)
      return jnp.sum(y * jnp.cos(y)), y

    fn = stream_sharding.constrained(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True), rows)
    x_rows = jax.device_put(x, rows)
    assert ("shard_map" in str(jax.make_jaxpr(fn)(state, x_rows))) == (impl == "splash")
    (value, y), grads = jax.jit(fn)(state, x_rows)
    results[impl] = (value, y, grads)
  (v_d, y_d, g_d), (v_s, y_s, g_s) = results["dense"], results["splash"]
  np.testing.assert_allclose(y_s, y_d, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(v_s, v_d, rtol=1e-5)
  jax.tree.map(_close, g_s, g_d)


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_splash_bfloat16_close_to_dense(interpret):
  x = jnp.asarray(np.random.default_rng(2).normal(size=(2, T, 32)), jnp.bfloat16)
  y_d = np.asarray(_attention("dense")(x), np.float32)
  y_s = np.asarray(_attention("splash")(x), np.float32)
  assert np.all(np.isfinite(y_s))
  assert np.abs(y_s - y_d).max() < 0.03 * np.abs(y_d).max()


def test_splash_resolves_on_a_tpu_only():
  assert resolve_attention("splash", "tpu", "bfloat16", 64) == "splash"
  assert resolve_attention("fused", "tpu", "bfloat16", 64) == "xla"  # not splash: by name
  for platform, use in (("cpu", "'dense' or 'fused'"), ("gpu", "'cudnn' or 'fused'")):
    with pytest.raises(ValueError) as e:
      resolve_attention("splash", platform, "bfloat16", 64)
    assert str(e.value) == (
      f"model.attention='splash' (the Pallas splash kernel) runs on a TPU only; here "
      f"platform={platform!r}. Use model.attention={use}"
    )
    assert "\n" not in str(e.value)


def test_splash_on_this_cpu_is_refused_before_the_model_is_built():
  assert not splash.INTERPRET
  with pytest.raises(ValueError, match=r"model.attention='splash'.*TPU only.*'cpu'"):
    model_config_from(_config("splash"))


def test_splash_refuses_a_sequence_that_is_not_a_multiple_of_its_tile(interpret):
  x = jnp.zeros((1, 96, 32), jnp.float32)
  with pytest.raises(ValueError, match=r"multiple of 128.*got 96.*train.seq_len=128"):
    _attention("splash")(x)
  assert [splash.block_size(n) for n in (128, 256, 384, 512, 1024)] == [128, 256, 128, 512, 512]


needs_libtpu = pytest.mark.skipif(
  not importlib.util.find_spec("libtpu"),
  reason="libtpu (the TPU compiler) is not installed: pip install -r requirements-dev.txt",
)


@pytest.mark.slow  # a TPU compile
@needs_libtpu
def test_splash_compiles_for_a_tpu_and_the_cost_model_counts_it_as_nothing():
  """Deviceless: the smoke model with splash (sequence 128) compiles for v5e:2x2 through
  Mosaic; the kernel alone costs 0 FLOPs in the TPU cost model, and compile_for says the
  estimate leaves it out (docs/tpu_compile/README.md)."""
  from resnorm_jax.config import cli
  from resnorm_jax.hardware import target_compile as tc

  smoke = cli.load_config_file("configs/smoke.py")
  c = tc.with_overrides(
    smoke, {"model.attention": "splash", "train.seq_len": T, "model.max_seq_len": T}
  )
  r = tc.compile_for(c, "v5e:2x2", eval_step=False, correct_loop=False)
  assert r.fits and r.step_seconds > 0
  assert r.seconds_source.endswith("; splash kernel not counted")
  assert any("splash attention kernel is not in the cost model" in n for n in r.notes)

  device = tc.target_devices("v5e:2x2")[2][0]
  arg = jax.ShapeDtypeStruct((2, T, 128), jnp.bfloat16, sharding=SingleDeviceSharding(device))
  kernel = splash._kernel(2, T, None, False)
  compiled = jax.jit(lambda q, k, v: kernel(q, k, v)).lower(arg, arg, arg).compile()
  assert "tpu_custom_call" in compiled.as_text()
  cost = compiled.cost_analysis()
  assert float((cost[0] if isinstance(cost, list) else cost).get("flops", 0.0)) == 0.0


def _kernel_calls(jaxpr, out: list[str]) -> list[str]:
  """The names of the Pallas calls in a jaxpr, its sub-jaxprs' included, in order."""
  from jax.extend import core as jex_core

  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "pallas_call":
      name = eqn.params["name"]
      out.append(getattr(name, "name", name))
    for p in eqn.params.values():
      for sub in p if isinstance(p, (tuple, list)) else (p,):
        if isinstance(sub, jex_core.ClosedJaxpr):
          _kernel_calls(sub.jaxpr, out)
        elif isinstance(sub, jex_core.Jaxpr):
          _kernel_calls(sub, out)
  return out


@pytest.mark.slow  # the kernel in interpret mode
def test_splash_under_full_remat_writes_no_residuals_in_the_forward_pass(interpret):
  """Under a checkpoint that keeps nothing (remat=full), the forward pass runs the kernel
  without residuals (no logsumexp written) and the backward pass's run of the layer keeps
  them; the gradients are those of the call without remat."""
  rng = np.random.default_rng(0)
  q, k, v = (jnp.asarray(rng.normal(size=(2, 2, T, 16)), jnp.float32) for _ in range(3))

  def f(q, k, v):
    return jnp.sum(splash.heads_major(q, k, v) ** 2)

  full = jax.checkpoint(f, policy=jax.checkpoint_policies.nothing_saveable)
  calls = {
    name: _kernel_calls(jax.make_jaxpr(jax.grad(g, argnums=(0, 1, 2)))(q, k, v).jaxpr, [])
    for name, g in (("none", f), ("full", full))
  }
  backward = ["splash_mha_dkv_no_residuals", "splash_mha_dq_no_residuals"]
  assert calls["none"] == ["splash_mha_fwd_residuals", *backward]
  assert calls["full"] == ["splash_mha_fwd_no_residuals", "splash_mha_fwd_residuals", *backward]
  for a, b in zip(
    jax.grad(full, argnums=(0, 1, 2))(q, k, v), jax.grad(f, argnums=(0, 1, 2))(q, k, v), strict=True
  ):
    _close(a, b)
