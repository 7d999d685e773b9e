"""The paper-reproduction tools at tiny size: grad norms at init, model update, grad flow.

Sweeps and their plots are tests/test_sweep_grid.py, test_sweep_runner.py and
test_sweep_results.py.

The command-line runs start together in subprocesses (they mostly compile) while the pure
functions are checked here against independent computations.
"""

import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from resnorm_jax.config import cli as cli_lib
from resnorm_jax.data import batches as batches_lib
from resnorm_jax.data import sources
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.probes import reproductions as repro
from resnorm_jax.train import diagnostics as diag
from resnorm_jax.train import train_step as ts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POST = "configs/postnorm_96L.py:smoke"  # 2 layers, width 32, batch 8 x 32
PRE = "configs/prenorm_96L.py:smoke"
DEEP = "configs/deepnorm_96L.py:smoke"


def _start(args: list[str]) -> subprocess.Popen:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.Popen(
    [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
  )


def _finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str]:
  out, _ = proc.communicate(timeout=timeout)
  return proc.returncode, out.decode()


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
  """Every command-line run of this file, started at once; {name: (Popen, outdir)}."""
  out = tmp_path_factory.mktemp("cli")
  procs = {
    "grad": _start(
      ["-m", "experiments.grad_norms_at_init", f"--config={POST}", f"--compare={PRE}"]
      + ["--depths=2", "--num_batches=2", f"--outdir={out / 'grad'}"]
    ),
    "update": _start(
      ["-m", "experiments.model_update", f"--config={DEEP}", "--steps=3", "--early_steps=2"]
      + [f"--outdir={out / 'update'}"]
    ),
    "bad_key": _start(
      ["-m", "experiments.grad_norms_at_init", f"--config={POST}"] + ["--config.model.num_layerz=3"]
    ),
    "bad_steps": _start(["-m", "experiments.model_update", f"--config={POST}", "--steps=0"]),
    "flow": _start(
      ["-m", "experiments.grad_flow", f"--config={DEEP}", "--steps=2", "--reset=norm_bias,mlp"]
      + [f"--outdir={out / 'flow'}"]
    ),
    "bad_group": _start(["-m", "experiments.grad_flow", f"--config={POST}", "--reset=normz"]),
  }
  yield {name: (proc, out) for name, proc in procs.items()}
  for proc in procs.values():
    if proc.poll() is None:
      proc.kill()


# ------------------------------------------------------------------------------------------
# Pure diagnostics against independent computations
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def post_model():
  """The smoke Post-LN model at seed 0 and the K=2 training batches the CLI run uses."""
  config = cli_lib.load_config_file(POST)
  mcfg = model_config_from(config)
  corpus = sources.load_corpus(config.data, mcfg.vocab_size, config.train.seq_len)
  t = config.train
  batches = [
    batches_lib.get_batch(corpus.train, seed=0, step=k, batch_size=t.batch_size, seq_len=t.seq_len)
    for k in range(2)
  ]
  params, model_state = repro.jit_init_model(mcfg, 0)
  return repro.model_def_for(mcfg), params, model_state, batches


def _layer_norms(g_LxAxB) -> np.ndarray:
  return np.sqrt(np.sum(np.square(np.asarray(g_LxAxB, np.float64)), axis=(1, 2)))


@pytest.mark.slow  # cli fixture: the experiments' command lines in processes
@pytest.mark.long  # many seeds' gradients
def test_expected_grad_norms_is_the_norm_of_the_mean_gradient(cli, post_model, read_csv):
  """The CLI's per-layer norms (expected_grad_norms: a scan summing per-batch gradients of
  the FFN kernels) against a jax.grad of the whole model, computed here."""
  model_def, params, model_state, batches = post_model
  xs, ys = (jnp.asarray(a) for a in diag.stack_batches(batches))

  def loss(p, x, y):
    return ts.cross_entropy(model_def.apply(p, model_state, x, train=True)[0], y)

  @jax.jit
  def reference(p):
    mean_loss = lambda p: jnp.mean(jax.vmap(loss, in_axes=(None, 0, 0))(p, xs, ys))
    per_batch = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, xs, ys)  # [K, ...]
    return jax.grad(mean_loss)(p)["layers"]["mlp"], per_batch["layers"]["mlp"]

  of_mean, per_batch = reference(params)
  proc, out = cli["grad"]
  code, log = _finish(proc)
  assert code == 0, log[-3000:]
  rows = [
    r
    for r in read_csv(out / "grad" / "grad_norms_per_layer.csv")
    if r["config"] == "postnorm-smoke"
  ]
  for key, name in (("w1", "ffn_in"), ("w2", "ffn_out")):
    got = np.array([float(r[f"{key}_grad_norm"]) for r in rows])
    # The loss is linear in batch averaging: grad of the mean loss == mean of the grads.
    np.testing.assert_allclose(got, _layer_norms(of_mean[name]["kernel"]), rtol=1e-4)
    mean_grad = np.mean(np.asarray(per_batch[name]["kernel"]), axis=0)
    np.testing.assert_allclose(got, _layer_norms(mean_grad), rtol=1e-4)
    # ... and not the mean of per-batch norms, which batch noise makes strictly larger.
    norms_K = np.stack([_layer_norms(g) for g in np.asarray(per_batch[name]["kernel"])])
    assert np.all(norms_K.mean(axis=0) > got * (1 + 1e-3)), (norms_K, got)


def test_stack_batches_refuses_mixed_shapes():
  x = np.zeros((2, 4), np.int32)
  assert diag.stack_batches([(x, x), (x, x)])[0].shape == (2, 2, 4)
  with pytest.raises(ValueError, match="one shape"):
    diag.stack_batches([(x, x), (x[:1], x[:1])])


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_model_output_distance(post_model):
  model_def, params, model_state, batches = post_model
  tokens = batches[0][0]
  assert diag.model_output_distance(model_def, params, params, model_state, tokens) == 0.0
  moved = jax.tree.map(lambda x: x, params)
  moved["layers"]["mlp"]["ffn_out"]["kernel"] = params["layers"]["mlp"]["ffn_out"]["kernel"] * 1.5
  got = diag.model_output_distance(model_def, params, moved, model_state, tokens)
  a = np.asarray(diag._logits(model_def, moved, model_state, tokens), np.float64)
  b = np.asarray(diag._logits(model_def, params, model_state, tokens), np.float64)
  want = np.mean(np.linalg.norm(a - b, axis=-1))  # L2 over the vocab, mean over tokens
  assert got > 0 and math.isclose(got, want, rel_tol=1e-4)


def test_norm_input_summary():
  stats = {
    "attn_norm_in_rms": jnp.array([1.0, 2.0]),
    "ffn_norm_in_rms": jnp.array([3.0, 6.0]),
    "stream_rms": jnp.array([100.0, 100.0]),  # not a norm input
  }
  assert sorted(diag.norm_input_rms(stats)) == ["attn_norm_in_rms", "ffn_norm_in_rms"]
  mean, max_ = diag.norm_input_summary(stats)
  assert float(mean) == 3.0 and float(max_) == 6.0
  assert all(
    math.isnan(float(v)) for v in diag.norm_input_summary({"stream_rms": stats["stream_rms"]})
  )


def test_load_configs_applies_overrides_to_every_config():
  main = cli_lib.load_config_file(POST)
  main.model.num_layers = 1
  configs = cli_lib.load_configs(main, [PRE, POST], {"model.num_layers": 1})
  assert [label for label, _ in configs] == ["postnorm-smoke", "prenorm-smoke", "postnorm-smoke#2"]
  assert all(c.model.num_layers == 1 for _, c in configs)
  with pytest.raises(ValueError, match="not found"):
    cli_lib.load_configs(main, ["configs/nope.py"], {})
  with pytest.raises(ValueError, match="positive"):
    cli_lib.parse_depths(["6", "0"])


def test_early_update():
  rows = [
    {"config": "a", "depth": 2, "step": s, "update": u, "update_per_lr": u / 1e-3}
    for s, u in enumerate([0, 5, 3, 9])
  ]
  (row,) = repro.early_update(rows, early_steps=2)
  assert row["early_update"] == 5 and row["final_update"] == 9 and row["final_step"] == 3
  assert row["early_update_per_lr"] == pytest.approx(5e3)


# ------------------------------------------------------------------------------------------
# Command lines, end to end
# ------------------------------------------------------------------------------------------


@pytest.mark.slow  # the cli fixture's processes
@pytest.mark.long  # the cli fixture: each experiment command in a process
def test_grad_norms_at_init_cli(cli, read_csv):
  proc, out = cli["grad"]
  code, log = _finish(proc)
  assert code == 0, log[-3000:]
  rows = read_csv(out / "grad" / "grad_norms_per_layer.csv")
  assert [(r["config"], r["layer"]) for r in rows] == [
    ("postnorm-smoke", "0"),
    ("postnorm-smoke", "1"),
    ("prenorm-smoke", "0"),
    ("prenorm-smoke", "1"),
  ]
  depth = read_csv(out / "grad" / "grad_norms_vs_depth.csv")
  assert [(r["config"], r["depth"]) for r in depth] == [
    ("postnorm-smoke", "2"),
    ("prenorm-smoke", "2"),
  ]
  for r in rows + depth:
    values = [float(v) for k, v in r.items() if k.endswith("grad_norm")]
    assert values and all(math.isfinite(v) and v > 0 for v in values), r
  assert depth[0]["last_w2_grad_norm"] == rows[1]["w2_grad_norm"]
  for png in ("grad_norms_per_layer.png", "grad_norms_vs_depth.png"):
    assert os.path.getsize(out / "grad" / png) > 1000


@pytest.mark.slow  # the cli fixture's processes
@pytest.mark.long  # the cli fixture: each experiment command in a process
def test_model_update_cli(cli, read_csv):
  proc, out = cli["update"]
  code, log = _finish(proc)
  assert code == 0, log[-3000:]
  rows = read_csv(out / "update" / "model_update.csv")
  assert [(r["config"], r["depth"], r["step"]) for r in rows] == [
    ("deepnorm-smoke", "2", str(s)) for s in range(4)
  ]
  assert float(rows[0]["update"]) == 0.0
  for r in rows:
    for key in ("update", "norm_in_rms_mean", "norm_in_rms_max"):
      assert math.isfinite(float(r[key])), r
  assert all(float(r["update"]) > 0 and math.isfinite(float(r["train_loss"])) for r in rows[1:])
  (early,) = read_csv(out / "update" / "model_update_vs_depth.csv")
  assert float(early["early_update"]) == max(float(r["update"]) for r in rows[1:3])
  for r in rows:  # the update per unit of peak lr (every scale of deepnorm_96L: 1e-3)
    assert float(r["update_per_lr"]) == pytest.approx(float(r["update"]) / 1e-3, rel=1e-5)
  for png in ("model_update.png", "model_update_vs_depth.png"):
    assert os.path.getsize(out / "update" / png) > 1000


@pytest.mark.slow  # the cli fixture's processes
@pytest.mark.long  # the cli fixture: each experiment command in a process
def test_grad_flow_cli(cli, read_csv):
  proc, out = cli["flow"]
  code, log = _finish(proc)
  assert code == 0, log[-3000:]
  rows = read_csv(out / "flow" / "grad_flow.csv")
  states = ["init", "trained", "reset norm_bias", "reset mlp"]
  assert [(r["state"], r["layer"]) for r in rows] == [(s, str(i)) for s in states for i in (0, 1)]
  assert all(r["config"] == "deepnorm-smoke" and r["depth"] == "2" for r in rows)
  assert all(math.isfinite(float(r["grad_norm"])) and float(r["grad_norm"]) > 0 for r in rows)
  norms = {s: [float(r["grad_norm"]) for r in rows if r["state"] == s] for s in states}
  assert norms["trained"] != norms["init"] and norms["reset mlp"] != norms["trained"]
  assert os.path.getsize(out / "flow" / "grad_flow.png") > 1000


def test_reset_group_puts_back_only_that_group(post_model):
  model_def, params, model_state, batches = post_model
  moved = jax.tree.map(lambda x: x + 1.0, params)
  back = diag.reset_group(moved, params, "norm_bias")
  paths = []
  for (path, b), m, p in zip(
    jax.tree_util.tree_leaves_with_path(back),
    jax.tree.leaves(moved),
    jax.tree.leaves(params),
    strict=True,
  ):
    key = jax.tree_util.keystr(path)
    is_bias = "['norms']" in key and key.endswith("['bias']")
    np.testing.assert_array_equal(b, p if is_bias else m)
    paths += [key] * is_bias
  assert paths and all("['layers']['norms']" in k for k in paths)
  # The per-layer gradient norm is that of the layer's whole gradient, one value per layer.
  g = diag.layer_grad_norms(model_def, params, model_state, batches[0])
  assert g.shape == (model_def.cfg.num_layers,) and bool(jnp.all(g > 0))
  with pytest.raises(ValueError, match="norm_bias"):
    diag.reset_group(params, params, "normz")


def test_grad_flow_ratios():
  rows = [
    dict(state=s, layer=i, grad_norm=g)
    for s, gs in (("a", (2.0, 8.0)), ("b", (4.0, 1.0)))
    for i, g in enumerate(gs)
  ]
  assert repro.grad_flow_ratios(rows) == {"a": 4.0, "b": 0.25}


@pytest.mark.slow  # the cli fixture's processes
@pytest.mark.long  # the cli fixture: each experiment command in a process
def test_experiment_cli_bad_input_exits_2(cli):
  for name, msg in (("bad_key", "num_layerz"), ("bad_steps", "--steps=0"), ("bad_group", "normz")):
    code, log = _finish(cli[name][0])
    assert code == 2 and msg in log and "Traceback" not in log, log[-2000:]
