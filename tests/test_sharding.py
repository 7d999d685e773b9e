"""Sharding: logical names on every weight, the declared shardings, equivalence with 1 device.

Runs on the 8 fake CPU devices of conftest.py. The equivalence test trains a tiny model for
a few steps on one device and on 8 devices under pure data parallel, pure FSDP and a mixed
data x fsdp x tensor mesh, with the same global batch, and compares the losses.
"""

import functools
import types

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from configs import base
from resnorm_jax.data import batches as batches_lib
from resnorm_jax.data import sources
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.model.transformer import Transformer
from resnorm_jax.train import sharding as shard_lib
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer

STEPS = 3
# float32: sharded matmuls and all-reduces sum in another order than one device; observed
# relative differences ~1e-7.
LOSS_RTOL = 1e-5
PARAM_ATOL = 1e-5


def tiny_config(**model):
  c = base.get_config()
  c.model.num_layers, c.model.d_model, c.model.num_heads = 2, 32, 2
  c.model.d_ff, c.model.max_seq_len = 64, 16
  c.train.batch_size, c.train.seq_len, c.train.steps = 8, 16, STEPS
  c.diag.per_layer = False
  for key, value in model.items():
    setattr(c.model, key, value)
  return c


VARIANTS = {
  "postnorm": {},
  "everything": dict(  # every optional weight: qk norms, gates, untied head, swiglu
    norm="rmsnorm",
    norm_position="peri",
    residual="gated",
    ffn_activation="swiglu",
    qk_norm=True,
    tie_embeddings=False,
    position="rope",
  ),
  "layerscale_dyt": dict(norm="dyt", norm_position="pre", residual="layerscale"),
  "rezero": dict(norm="none", norm_position="none", residual="rezero"),
  "batchnorm": dict(norm="batchnorm", norm_position="pre"),
}


@pytest.mark.parametrize(
  "variant",
  [v for v in sorted(VARIANTS)],
)
def test_every_weight_has_logical_names(variant):
  """Every variable (params and batch stats) declares names of its rank, all in the rules."""
  c = tiny_config(**VARIANTS[variant])
  cfg = model_config_from(c)
  model = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  rules = dict(c.mesh.rules)
  flat = nnx.to_flat_state(nnx.state(model))
  assert len(flat) >= 8
  for path, v in flat:
    names = v.get_metadata().get("out_sharding")
    where = ".".join(map(str, path))
    assert names is not None, f"{where} has no logical axis names"
    shape = v.get_raw_value().shape
    assert len(names) == len(shape), f"{where}: names {names} for shape {shape}"
    assert all(n is None or n in rules for n in names), f"{where}: {names} not in mesh.rules"
    if path[0] == "layers":
      assert names[0] == "layers", f"{where}: the stacked axis is not named 'layers'"
  # And what the train step uses (ModelDef.param_specs) agrees with the shapes.
  model_def = mdl.make_model_def(cfg)
  shapes = jax.eval_shape(lambda: mdl.init_model(cfg, 0))
  for specs, tree in ((model_def.param_specs, shapes[0]), (model_def.model_state_specs, shapes[1])):
    flat_specs = jax.tree.leaves(specs, is_leaf=lambda x: isinstance(x, tuple))
    flat_shapes = jax.tree.leaves(tree)
    assert [len(s) for s in flat_specs] == [x.ndim for x in flat_shapes]


def test_unknown_logical_name_and_bad_mesh_are_refused():
  rules = base.get_config().mesh.rules
  with pytest.raises(ValueError, match="emebd"):
    shard_lib.logical_to_spec(("layers", "emebd"), rules)
  with pytest.raises(ValueError, match="mesh axes"):
    shard_lib.logical_to_spec(("embed",), (("embed", "model"),))
  m = base.get_config().mesh
  assert shard_lib.mesh_shape(m, 8) == (8, 1, 1)
  m.data, m.fsdp, m.tensor = 2, -1, 2
  assert shard_lib.mesh_shape(m, 8) == (2, 2, 2)
  m.data = 3
  with pytest.raises(ValueError, match="does not divide"):
    shard_lib.mesh_shape(m, 8)


def _train(c, devices, steps: int = STEPS, init=None):
  """Trains `steps` steps on a mesh over `devices` the way loop.run does.

  `init`: a host copy of an initial state to place by the shardings (saves a compile);
  None initializes under jit with out_shardings, as the loop does. Returns (losses, grad
  norms, initial state on host, final state, state shardings, mesh).
  """
  mesh = shard_lib.make_mesh(c.mesh, devices)
  cfg = model_config_from(c)
  optimizer = make_optimizer(c.opt, c.train.steps)
  model_def = mdl.make_model_def(cfg)
  init_fn = functools.partial(ts.init_state, model_def, optimizer, c.seed)
  abstract = jax.eval_shape(init_fn)
  shardings = shard_lib.state_shardings(abstract, model_def, optimizer, mesh, c.mesh.rules)
  if init is None:
    state = jax.jit(init_fn, out_shardings=shardings).lower().compile()()
  else:
    state = jax.device_put(init, shardings)
  initial = jax.device_get(state)
  bsh = shard_lib.batch_sharding(mesh, c.mesh.rules)
  step = shard_lib.jit_train_step(
    functools.partial(ts.train_step, model_def, optimizer, per_layer=False), shardings, bsh
  )
  corpus = _corpus(c.train.seq_len)
  losses, gnorms, compiled = [], [], None
  for i in range(steps):
    x, y = batches_lib.get_batch(
      corpus.train, seed=c.seed, step=i, batch_size=c.train.batch_size, seq_len=c.train.seq_len
    )
    batch = (shard_lib.global_batch(x, bsh), shard_lib.global_batch(y, bsh))
    compiled = compiled or step.lower(state, batch).compile()
    state, metrics = compiled(state, batch)
    losses.append(float(metrics["loss"]))
    gnorms.append(float(metrics["grad_norm"]))
  return np.array(losses), np.array(gnorms), initial, state, shardings, mesh


@functools.cache
def _corpus(seq_len: int):
  return sources.load_corpus(base.get_config().data, 256, seq_len)


def mesh_config(name: str):
  c = tiny_config(tie_embeddings=False)  # an untied head: one more sharded weight
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = MESHES[name]
  return c


MESHES = {"one_device": (1, 1, 1), "data8": (8, 1, 1), "fsdp8": (1, 8, 1), "mixed2x2x2": (2, 2, 2)}


@pytest.fixture(scope="module")
def reference():
  """The 1-device run every mesh is compared with."""
  return _train(mesh_config("one_device"), jax.devices()[:1])


@pytest.fixture(scope="module")
def mixed():
  """data=2 x fsdp=2 x tensor=2, initialized sharded under jit (as loop.run does)."""
  return _train(mesh_config("mixed2x2x2"), jax.devices())


@pytest.mark.slow  # compiles one step per mesh
@pytest.mark.parametrize(
  "name", ["data8", "fsdp8", pytest.param("mixed2x2x2", marks=pytest.mark.long)]
)
def test_mesh_matches_one_device(name, reference, request):
  ref_losses, ref_gnorms, ref_init, ref_state, _, _ = reference
  if name == "mixed2x2x2":
    run = request.getfixturevalue("mixed")
  else:  # the reference's initial state, placed by this mesh's shardings
    run = _train(mesh_config(name), jax.devices(), init=ref_init)
  losses, gnorms, init, state, shardings, mesh = run
  print(f"\n{name}: losses {losses.tolist()}\n  1 device: {ref_losses.tolist()}")
  assert tuple(mesh.shape.values()) == MESHES[name] and mesh.size == 8
  jax.tree.map(np.testing.assert_array_equal, init, ref_init)  # sharded init = 1-device init
  assert losses[-1] < losses[0] - 0.1  # it trains (else equal losses would prove little)
  np.testing.assert_allclose(losses, ref_losses, rtol=LOSS_RTOL)
  np.testing.assert_allclose(gnorms, ref_gnorms, rtol=1e-4)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=PARAM_ATOL),
    state.params,
    ref_state.params,
  )
  # The arrays live where they were declared: params, Adam's mu and nu, and the step.
  _assert_placed(state, shardings)


def _assert_placed(state, shardings):
  def same(path, x, s):
    assert x.sharding.is_equivalent_to(s, x.ndim), (jax.tree_util.keystr(path), x.sharding, s)

  jax.tree.map_with_path(same, state, shardings)


def _adam(opt_state):
  """The ScaleByAdamState inside the optax chain (mu and nu shaped like the params)."""
  found = [
    s for s in jax.tree.leaves(opt_state, is_leaf=lambda x: hasattr(x, "mu")) if hasattr(s, "mu")
  ]
  assert len(found) == 1
  return found[0]


@pytest.mark.long  # a mixed mesh's program; the meshes' losses: test_mesh_matches_one_device
def test_declared_shardings_on_mixed_mesh(mixed):
  """Under the default rules on data=2 x fsdp=2 x tensor=2, by leaf, with Adam's moments."""
  _, _, _, state, _, mesh = mixed
  expected = {
    ("embed", "embedding"): P("tensor", "fsdp"),  # vocab, embed
    ("pos_embed", "embedding"): P(None, "fsdp"),
    ("head", "kernel"): P("fsdp", "tensor"),
    ("layers", "attn", "q", "kernel"): P(None, "fsdp", "tensor"),  # layers, embed, heads
    ("layers", "attn", "out", "kernel"): P(None, "tensor", "fsdp"),
    ("layers", "mlp", "ffn_in", "kernel"): P(None, "fsdp", "tensor"),  # [L, D, F]
    ("layers", "mlp", "ffn_out", "kernel"): P(None, "tensor", "fsdp"),  # [L, F, D]
    ("layers", "norms", "attn", "scale"): P(None, "fsdp"),
  }
  adam = _adam(state.opt_state)
  for path, spec in expected.items():
    get = lambda tree, path=path: functools.reduce(lambda t, k: t[k], path, tree)
    for tree in (state.params, adam.mu, adam.nu):
      x = get(tree)
      assert x.sharding.spec == spec, (path, x.sharding.spec, spec)
      assert x.sharding.mesh.shape == mesh.shape
  ffn = state.params["layers"]["mlp"]["ffn_in"]["kernel"]  # [2, 32, 64]: 16 x 32 per device
  assert {s.data.shape for s in ffn.addressable_shards} == {(2, 16, 32)}
  # Adam's moments mirror every param's sharding; its count and the step are replicated.
  for moments in (adam.mu, adam.nu):
    jax.tree.map(lambda p, m: _same_spec(p.sharding, m.sharding), state.params, moments)
  assert adam.count.sharding.is_fully_replicated and state.step.sharding.is_fully_replicated


def _same_spec(a, b):
  assert a.spec == b.spec and a.mesh.shape == b.mesh.shape, (a, b)


@pytest.mark.slow  # runs experiments.aot_memory
def test_aot_memory_reports_sharded_state_without_allocating():
  """experiments.aot_memory on 4 CPU devices, fsdp=4: per-device argument bytes are the
  state's shards plus the batch's, the donated state aliases the output, nothing allocated."""
  import os
  import re
  import subprocess
  import sys

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  overrides = ["--config.mesh.data=1", "--config.mesh.fsdp=-1", "--config.diag.per_layer=false"]
  proc = subprocess.run(
    [sys.executable, "-m", "experiments.aot_memory", "--config=configs/smoke.py", *overrides,
     "--fake_devices=4"],
    cwd=root, capture_output=True, text=True, timeout=180,
    env={**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=0"},
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr[-3000:]
  print(proc.stdout)
  got = {
    k: int(v.replace(",", ""))
    for k, v in re.findall(r"^ *(\w+): .*\(([\d,]+) bytes\)", proc.stdout, re.M)
  }
  assert "allocated while compiling: 0 bytes" in proc.stdout
  # The same config's shardings, computed here (no compile): bytes of one device's shards.
  from configs import smoke

  c = smoke.get_config()
  c.mesh.data, c.mesh.fsdp = 1, -1
  mesh = shard_lib.make_mesh(c.mesh, jax.devices()[:4])
  model_def = mdl.make_model_def(model_config_from(c))
  optimizer = make_optimizer(c.opt, c.train.steps)
  abstract = jax.eval_shape(functools.partial(ts.init_state, model_def, optimizer, c.seed))
  shardings = shard_lib.state_shardings(abstract, model_def, optimizer, mesh, c.mesh.rules)
  shard_bytes = lambda x, s: int(np.prod(s.shard_shape(x.shape))) * x.dtype.itemsize
  state_total = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(abstract))
  state_dev = sum(jax.tree.leaves(jax.tree.map(shard_bytes, abstract, shardings)))
  batch_dev = 2 * (c.train.batch_size // 4) * c.train.seq_len * 4  # inputs, targets: int32
  assert got["state"] == state_total and state_dev < state_total / 3  # fsdp shards the state
  assert got["argument"] == state_dev + batch_dev
  assert got["alias"] == state_dev  # the donated state is updated in place
  assert got["total"] == got["argument"] + got["output"] - got["alias"] + got["temp"]


def test_device_info_names_platform_kind_and_counts():
  info = shard_lib.device_info()
  assert info == {
    "platform": "cpu",
    "device_kind": jax.devices()[0].device_kind,
    "device_count": 8,
    "process_count": 1,
  }
  assert shard_lib.describe_devices(info) == f"cpu: 8 x {info['device_kind']} in 1 process"
  # A 2-host GPU job as its devices describe it.
  fake = [
    types.SimpleNamespace(platform="gpu", device_kind="NVIDIA H100", process_index=i // 4)
    for i in range(8)
  ]
  assert shard_lib.describe_devices(shard_lib.device_info(fake)) == (
    "gpu: 8 x NVIDIA H100 in 2 processes"
  )


def _step_flops_per_device(monkeypatch=None, **mesh) -> float:
  """The compiled train step's FLOPs per device (XLA:CPU cost model) on the 8 fake devices."""
  from configs import smoke
  from resnorm_jax.train import run_setup

  c = smoke.get_config()
  c.diag.per_layer = False
  c.model.d_model, c.model.num_heads, c.model.d_ff = 64, 4, 256
  c.train.batch_size, c.train.seq_len, c.model.max_seq_len = 64, 64, 64
  for key, value in mesh.items():
    c.mesh[key] = value
  run = run_setup.build(c, jax.devices()[:8])
  tokens = jax.ShapeDtypeStruct((64, 64), np.int32, sharding=run.batch_sharding)
  return run.step_fn.lower(run.abstract, (tokens, tokens)).compile().cost_analysis()["flops"]


@pytest.mark.slow  # two sharded compiles (about 11 s)
def test_fsdp_step_splits_the_batch_like_data_parallel(monkeypatch):
  """Each device's share of the model under fsdp is data parallel's: the residual stream is
  pinned to the batch's rows (resnorm_jax/model/stream_sharding.py). Without the pin the
  partitioner splits the stream on d_model and every device runs the attention on the whole
  global batch (measured here: 1.9x the FLOPs per device; 13x on a 64-chip TPU slice)."""
  from resnorm_jax.model import stream_sharding

  data = _step_flops_per_device(data=8, fsdp=1)
  fsdp = _step_flops_per_device(data=1, fsdp=8)
  assert fsdp / data < 1.1, (fsdp, data)
  monkeypatch.setattr(stream_sharding, "constrained", lambda fn, sharding: fn)
  unpinned = _step_flops_per_device(data=1, fsdp=8)
  assert unpinned / data > 1.5, (unpinned, data)


def test_the_stream_is_pinned_only_where_the_batch_is_split():
  from resnorm_jax.model import stream_sharding

  rules = base.get_config().mesh.rules
  one = shard_lib.make_mesh(types.SimpleNamespace(data=1, fsdp=1, tensor=1), jax.devices()[:1])
  tensor = shard_lib.make_mesh(types.SimpleNamespace(data=1, fsdp=1, tensor=8), jax.devices())
  fsdp = shard_lib.make_mesh(types.SimpleNamespace(data=2, fsdp=4, tensor=1), jax.devices())
  assert shard_lib.stream_rows(shard_lib.batch_sharding(one, rules)) is None
  assert shard_lib.stream_rows(shard_lib.batch_sharding(tensor, rules)) is None
  rows = shard_lib.stream_rows(shard_lib.batch_sharding(fsdp, rules))
  assert rows.spec == P(("data", "fsdp"))
  x = np.ones((8, 4, 2), np.float32)
  assert stream_sharding.constrain(x) is x  # outside a traced step: the identity
  pinned = jax.jit(stream_sharding.constrained(stream_sharding.constrain, rows))(x)
  assert pinned.sharding.spec == P(("data", "fsdp"))


def _tune_candidate(mesh: str, remat: str):
  """mesh_config's tiny model run as `compile_for --tune` would run it (hardware/tune.py)."""
  from resnorm_jax.hardware import tune

  c = mesh_config("one_device")
  for key, value in {**tune.mesh_overrides(mesh, 8), "model.remat": remat}.items():
    section, name = key.split(".")
    setattr(getattr(c, section), name, value)
  return c


@pytest.mark.parametrize(
  "mesh, remat",
  [("data", "full"), ("fsdp", "none"), pytest.param("fsdp", "dots", marks=pytest.mark.long),
   pytest.param("fsdp", "dots_no_batch", marks=pytest.mark.long), ("data_fsdp", "full")],
)  # fmt: skip
def test_tune_candidates_give_the_reference_losses(mesh, remat, reference):
  """The meshes and remat policies compile_for --tune chooses between are one experiment:
  the same losses as the 1-device run without remat, within LOSS_RTOL."""
  ref_losses, ref_gnorms, ref_init, _, _, _ = reference
  c = _tune_candidate(mesh, remat)
  assert c.model.remat == remat and mesh_config("one_device").model.remat == "none"
  losses, gnorms, _, _, _, run_mesh = _train(c, jax.devices(), init=ref_init)
  assert run_mesh.size == 8 and losses[-1] < losses[0] - 0.1
  np.testing.assert_allclose(losses, ref_losses, rtol=LOSS_RTOL)
  np.testing.assert_allclose(gnorms, ref_gnorms, rtol=1e-4)
