"""The width axis: the failure-kind diagnostics every run logs (the largest
attention logit, the output logits' RMS) against NumPy on a tiny model; the grid file; and
scripts/width.py on a tree of fake run folders."""

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from conftest import tiny_config, write_run_folder
from resnorm_jax.model import model_def as mdl
from resnorm_jax.train import train_step as ts

TOKENS = np.array([[3, 7, 1, 6, 2, 0], [0, 5, 5, 2, 4, 1]], np.int32)
TARGETS = np.roll(TOKENS, -1, axis=1)


def _np_layernorm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
  x = x.astype(np.float64)
  return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _params(cfg, qk_gain: float):
  """Seed 0's params with q and k scaled by `qk_gain`: logits far from 0, distinct per layer."""
  params, model_state = mdl.init_model(cfg, 0)
  attn = params["layers"]["attn"]
  for name, gain in (("q", qk_gain), ("k", qk_gain * 1.5)):
    attn[name]["kernel"] = attn[name]["kernel"] * gain
  return params, model_state


def _numpy_reference(cfg, params, model_state, pre: bool):
  """(per-layer max scaled logit [L], output-logit RMS): q, k, the causal logits and the
  tied head in NumPy; each layer's input stream from the model's own Block."""
  md = mdl.make_model_def(cfg)
  model = nnx.merge(md.train_graph, params, model_state)
  graphdef, state = nnx.split(model.layers)
  t = TOKENS.shape[1]
  embed = np.asarray(params["embed"]["embedding"], np.float64)
  with jax.disable_jit():
    x = model.embed_tokens(jnp.asarray(TOKENS))  # scaled token rows plus positions
  h_dim = cfg.d_model // cfg.num_heads
  causal = np.tril(np.ones((t, t), bool))
  maxima = []
  for i in range(cfg.num_layers):
    xi = np.asarray(x, np.float64)
    h = _np_layernorm(xi) if pre else xi  # the LayerNorm's gain 1 and bias 0 at init
    wq = np.asarray(params["layers"]["attn"]["q"]["kernel"][i], np.float64)
    wk = np.asarray(params["layers"]["attn"]["k"]["kernel"][i], np.float64)
    q = (h @ wq).reshape(*h.shape[:2], cfg.num_heads, h_dim)
    k = (h @ wk).reshape(*h.shape[:2], cfg.num_heads, h_dim)
    logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(h_dim)
    maxima.append(logits[:, :, causal].max())
    layer = nnx.merge(graphdef, jax.tree.map(lambda a, i=i: a[i], state))
    with jax.disable_jit():
      x, _ = layer(x)
  out = np.asarray(x, np.float64)
  out = _np_layernorm(out) if pre else out  # Pre-LN's final norm, Post-LN has none
  logits = out @ embed.T
  return np.array(maxima), float(np.sqrt(np.mean(logits**2)))


@pytest.mark.parametrize("position", ["post", pytest.param("pre", marks=pytest.mark.slow)])
def test_attention_logit_max_and_output_logit_rms_match_numpy(position):
  cfg = tiny_config(num_layers=3, norm_position=position)
  params, model_state = _params(cfg, qk_gain=3.0)
  want_L, want_rms = _numpy_reference(cfg, params, model_state, pre=position == "pre")
  assert want_L.max() > 1.0 and len(set(np.round(want_L, 3))) == 3  # far from 0, distinct
  md = mdl.make_model_def(cfg)
  state = ts.TrainState(jnp.zeros((), jnp.int32), params, optax.sgd(0.0).init(params), model_state)
  batch = (jnp.asarray(TOKENS), jnp.asarray(TARGETS))
  step = jax.jit(ts.train_step, static_argnums=(0, 1), static_argnames=("per_layer",))
  _, m = step(md, optax.sgd(0.0), state, batch, per_layer=False)
  # every run logs the max over layers and the RMS; per-layer arrays only under per_layer
  assert {"attn_logit_max", "output_logit_rms"} <= set(m)
  assert "attn_logit_max_layer" not in m and "stream_rms" not in m
  np.testing.assert_allclose(float(m["attn_logit_max"]), want_L.max(), rtol=2e-5)
  np.testing.assert_allclose(float(m["output_logit_rms"]), want_rms, rtol=2e-5)
  _, m = step(md, optax.sgd(0.0), state, batch, per_layer=True)
  np.testing.assert_allclose(np.asarray(m["attn_logit_max_layer"]), want_L, rtol=2e-5)
  np.testing.assert_allclose(float(m["attn_logit_max"]), want_L.max(), rtol=2e-5)
  assert "attn_logit_max" not in {k for k in m if np.ndim(m[k]) == 1}


def test_masked_future_logits_do_not_count():
  """On a batch whose largest logit toward any key is toward a future one, the stat is the
  largest over the causal positions: the mask comes before the max."""
  cfg = tiny_config(num_layers=1)
  params, model_state = _params(cfg, qk_gain=3.0)
  md = mdl.make_model_def(cfg)
  model = nnx.merge(md.train_graph, params, model_state)
  wq, wk = (np.asarray(params["layers"]["attn"][n]["kernel"][0], np.float64) for n in "qk")
  hd = cfg.d_model // cfg.num_heads
  causal = np.tril(np.ones((TOKENS.shape[1],) * 2, bool))
  rng = np.random.default_rng(0)
  for _ in range(200):  # the first random batch where a future logit is the largest
    tokens = rng.integers(0, cfg.vocab_size, TOKENS.shape).astype(np.int32)
    with jax.disable_jit():
      h = np.asarray(model.embed_tokens(jnp.asarray(tokens)), np.float64)
    q, k = ((h @ w).reshape(*h.shape[:2], cfg.num_heads, hd) for w in (wq, wk))
    logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(hd)
    want, unmasked = logits[:, :, causal].max(), logits.max()
    if unmasked > want + 0.1:
      break
  else:
    pytest.fail("no batch with a larger future logit")
  _, stats, _ = md.apply(params, model_state, jnp.asarray(tokens), train=True)
  np.testing.assert_allclose(float(stats["layers"]["attn_logit_max"][0]), want, rtol=2e-5)


@pytest.mark.slow  # trains
@pytest.mark.long  # a run
def test_fused_attention_logs_no_logit_max_but_still_trains():
  cfg = tiny_config(attention="xla")
  params, model_state = _params(cfg, qk_gain=1.0)
  md = mdl.make_model_def(cfg)
  state = ts.TrainState(jnp.zeros((), jnp.int32), params, optax.sgd(0.0).init(params), model_state)
  batch = (jnp.asarray(TOKENS), jnp.asarray(TARGETS))
  _, m = ts.train_step(md, optax.sgd(0.0), state, batch, per_layer=True)
  assert "attn_logit_max" not in m and "attn_logit_max_layer" not in m
  assert np.isfinite(float(m["output_logit_rms"]))


# ---------------------------------------------------------------------------------------
# The grid and scripts/width.py
# ---------------------------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = 3.2


def test_grid_names_carry_every_axis_and_width_128_comes_first():
  from resnorm_jax.sweeps import grid as sweep_grid

  points = sweep_grid.load_grid(os.path.join(ROOT, "configs", "sweeps", "width.py"))
  names = [p.name for p in points]
  assert len(names) == len(set(names))
  mup = [p for p in points if p.overrides.get("model.width_param") == "mup"]
  sp = [p for p in points if p not in mup]
  assert points == sp + mup  # the muP tier last
  for tier in (sp, mup):  # every 128 point before any 256 point
    widths = [p.overrides["model.d_model"] for p in tier]
    assert widths == sorted(widths)
  for p in points:
    o, d = p.overrides, p.overrides["model.d_model"]
    tag = "-mup" if p in mup else ""
    variant = p.config.split("/")[1][:-7]
    assert p.name == f"{variant}-L12-d{d}{tag}-lr{o['opt.lr']:g}-s{o['seed']}"
    assert (o["model.num_heads"], o["model.d_ff"]) == (d // 16, 4 * d)
    assert (o["train.steps"], o["train.eval_every"], o["opt.warmup_steps"]) == (1000, 50, 0)
    if p in mup:
      assert o["model.base_width"] == 64 and variant in ("postnorm", "prenorm")
  # muP: 5 lrs at 64 and 128, 3 at 256, for Post-LN and Pre-LN
  count = {(v, d): 0 for v in ("postnorm", "prenorm") for d in (64, 128, 256)}
  for p in mup:
    count[(p.config.split("/")[1][:-7], p.overrides["model.d_model"])] += 1
  assert count == {k: 3 if k[1] == 256 else 5 for k in count}
  seed0_128 = [p for p in sp if p.overrides["seed"] == 0 and p.overrides["model.d_model"] == 128]
  assert names[: len(seed0_128)] == [p.name for p in seed0_128]  # tier 1 first
  for variant in ("postnorm", "prenorm", "deepnorm"):
    assert len([p for p in seed0_128 if p.name.startswith(variant)]) >= 5


def fake_run(
  root, variant, d_model, lr, seed, loss, *, outcome_loss=None, logit_max=(2.0, 9.0), mup=False
):
  """A finished width run folder as the sweep leaves it, with the diagnostics logged; `mup`:
  under model.width_param=mup (else no width_param key, as in configs from before it)."""
  run = os.path.join(root, f"{variant}-L12-d{d_model}{'-mup' if mup else ''}-lr{lr:g}-s{seed}")
  os.makedirs(run)
  diverged = outcome_loss == "nan"
  model = {"num_layers": 12, "d_model": d_model, "num_heads": d_model // 16, "vocab_size": 256}
  if mup:
    model.update(width_param="mup", base_width=64)
  files = {
    "sweep_point": {
      "config": f"configs/{variant}_96L.py",
      "index": 0,
      "overrides": {"opt.lr": lr, "model.d_model": d_model},
    },
    "config": {
      "name": f"{variant}_96L",
      "seed": seed,
      "model": model,
      "resolved_model": model,
      "opt": {"lr": lr, "warmup_steps": 0, "schedule": "constant"},
      "train": {"steps": 100},
      "data": {"source": "stdlib", "path": ""},
    },
    "summary": {
      "status": "diverged" if diverged else "completed",
      "steps": 60 if diverged else 100,
      "final_eval_loss": math.nan if diverged else loss,
      "heldout_unigram_entropy": BASE,
      "unigram_entropy": 3.25,
    },
  }
  rows = [
    {"step": 10, "train/loss": 3.5, "attn_logit_max": logit_max[0], "output_logit_rms": 1.0},
    {
      "step": 50,
      "train/loss": 3.4,
      "eval/loss": 3.4,
      "attn_logit_max": logit_max[1],
      "output_logit_rms": 4.0,
    },
    {
      "step": 100,
      "train/loss": loss,
      "eval/loss": loss,
      "attn_logit_max": [1.0, 3.0],
      "output_logit_rms": float("nan"),
    },
  ]
  return write_run_folder(run, rows, **files)


def test_width_rows_keep_one_width_parametrization(tmp_path):
  from resnorm_jax.analysis import width

  fake_run(tmp_path, "prenorm", 128, 4e-3, 0, 1.9)
  fake_run(tmp_path, "prenorm", 128, 4e-3, 0, 1.8, mup=True)
  fake_run(tmp_path, "prenorm", 64, 4e-3, 0, 1.85, mup=True)
  sp = width.run_rows(str(tmp_path))
  mup = width.run_rows(str(tmp_path), "mup")
  assert [r["name"] for r in sp] == ["prenorm-L12-d128-lr0.004-s0"]
  assert sorted((r["d_model"], r["final_eval_loss"]) for r in mup) == [(64, 1.85), (128, 1.8)]
  assert "muP" in width.axis("mup").title and "standard" in width.axis().title


def test_a_best_lr_at_the_smallest_lr_run_is_told_from_a_bracketed_one():
  from resnorm_jax.analysis import width

  rows = [
    {"variant": "postnorm", "d_model": 128, "opt.lr": lr} for lr in (5e-4, 1.25e-4, 2.5e-4)
  ] + [{"variant": "postnorm", "d_model": "256", "opt.lr": "0.00025"}]
  assert width.lowest_lrs(rows) == {("postnorm", 128): 1.25e-4, ("postnorm", 256): 2.5e-4}
  table = [
    {"variant": "postnorm", "d_model": 128, "best_lr": 2.5e-4, "failing_lr": 5e-4},
    {"variant": "postnorm", "d_model": 256, "best_lr": 2.5e-4, "failing_lr": None},
  ]
  fig = width.draw_edges(table, lowest=width.lowest_lrs(rows))
  best = [line.get_marker() for line in fig.axes[0].lines if line.get_marker() in ("s", "v")]
  assert best == ["s", "v"]  # bracketed at 128, at the smallest lr run at 256
  labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
  assert labels[0] == "Post-LN" and "best at the smallest lr run" in labels


def _reference_csv(path):
  """A loss-vs-lr results.csv: Post-LN at 12 layers (the d_model-64 column) and 24 (not)."""
  from resnorm_jax.analysis import lr_sweep_rows
  from resnorm_jax.files import csv_table

  rows = []
  for n, lr, loss, outcome in [
    (12, 2.5e-4, 2.3, "trained"),
    (12, 5e-4, 2.4, "trained"),
    (12, 1e-3, 3.25, "stuck"),
    (24, 1e-3, 3.25, "stuck"),
  ]:
    rows.append(
      {
        "name": f"postnorm-L{n}-lr{lr:g}-s0",
        "variant": "postnorm",
        "num_layers": n,
        "opt.lr": lr,
        "opt.warmup_steps": 0,
        "opt.schedule": "constant",
        "seed": 0,
        "train.steps": 1000,
        "steps": 1000,
        "data": "stdlib bytes",
        "final_eval_loss": loss,
        "baseline": BASE,
        "capped_loss": min(loss, BASE),
        "outcome": outcome,
      }
    )
  csv_table.write_csv(path, rows, lr_sweep_rows.RESULT_COLUMNS, extrasaction="ignore")


@pytest.mark.slow  # a child process draws two figures
def test_width_script_on_fake_runs(tmp_path, run_script, read_csv):
  from resnorm_jax.analysis import lr_sweep_rows, width

  runs = tmp_path / "runs"
  for lr, loss in [(1.25e-4, 2.5), (2.5e-4, 2.35), (5e-4, 3.25)]:
    fake_run(runs, "postnorm", 128, lr, 0, loss)
  fake_run(runs, "postnorm", 128, 5e-4, 1, 3.0, outcome_loss="nan", logit_max=(2.0, 40.0))
  fake_run(runs, "postnorm", 256, 2.5e-4, 0, 3.25, outcome_loss="nan")
  fake_run(runs, "postnorm", 256, 1.25e-4, 0, 2.45)
  running = runs / "postnorm-L12-d256-lr6.25e-05-s0"  # no summary: left out
  running.mkdir()
  _reference_csv(tmp_path / "ref.csv")
  out = tmp_path / "out"
  r = run_script(
    [
      "scripts/width.py",
      f"--runs={runs}",
      f"--reference={tmp_path / 'ref.csv'}",
      f"--out_dir={out}",
    ]
  )
  assert r.returncode == 0, r.stderr
  rows = read_csv(out / "results.csv")
  assert tuple(rows[0]) == (
    *lr_sweep_rows.RESULT_COLUMNS,
    "d_model",
    "num_heads",
    "attn_logit_max_first",
    "attn_logit_max_peak",
    "output_logit_rms_first",
    "output_logit_rms_peak",
  )
  assert [(r["d_model"], r["opt.lr"], r["seed"]) for r in rows] == [
    ("64", "0.00025", "0"),
    ("64", "0.0005", "0"),
    ("64", "0.001", "0"),
    ("128", "0.000125", "0"),
    ("128", "0.00025", "0"),
    ("128", "0.0005", "0"),
    ("128", "0.0005", "1"),
    ("256", "0.000125", "0"),
    ("256", "0.00025", "0"),
  ]
  by_name = {r["name"]: r for r in rows}
  run = by_name["postnorm-L12-d128-lr0.0005-s1"]
  assert run["outcome"] == "diverged" and run["num_heads"] == "8"
  # first logged value and the largest over the run (a per-layer list by its largest layer;
  # the NaN of the last row left out)
  assert float(run["attn_logit_max_first"]) == 2.0 and float(run["attn_logit_max_peak"]) == 40.0
  assert float(run["output_logit_rms_peak"]) == 4.0
  assert by_name["postnorm-L12-lr0.001-s0"]["attn_logit_max_peak"] == ""  # not logged at 64
  edges = {int(e["d_model"]): e for e in read_csv(out / "edges.csv")}
  assert float(edges[64]["best_lr"]) == 2.5e-4 and float(edges[64]["failing_lr"]) == 1e-3
  assert edges[64]["failure"] == "stuck"
  # at 128 the failing lr's two seeds: one stuck, one diverged
  assert float(edges[128]["failing_lr"]) == 5e-4 and edges[128]["failure"] == "1 diverged, 1 stuck"
  assert float(edges[256]["best_lr"]) == 1.25e-4 and edges[256]["failure"] == "diverged"
  assert edges[256]["lr_sensitivity"] == ""  # 2 lrs: not computed
  for name in ("curves.png", "edges.png"):
    assert (out / name).stat().st_size > 10_000
  # the muP runs alone, their own d_model-64 column (no reference rows), into their folder;
  # the sp tables above never saw them
  fake_run(runs, "postnorm", 64, 2.5e-4, 0, 2.4, mup=True)
  fake_run(runs, "postnorm", 128, 2.5e-4, 0, 2.3, mup=True)
  assert "-mup-" not in (out / "results.csv").read_text()
  r = run_script(
    ["scripts/width.py", f"--runs={runs}", "--width_param=mup", f"--out_dir={out}/mup"]
  )
  assert r.returncode == 0, r.stderr
  mup_rows = read_csv(out / "mup" / "results.csv")
  assert [(r["name"], r["d_model"]) for r in mup_rows] == [
    ("postnorm-L12-d64-mup-lr0.00025-s0", "64"),
    ("postnorm-L12-d128-mup-lr0.00025-s0", "128"),
  ]
  assert width.diagnostics(str(running)) == {
    "attn_logit_max_first": None,
    "attn_logit_max_peak": None,
    "output_logit_rms_first": None,
    "output_logit_rms_peak": None,
  }
