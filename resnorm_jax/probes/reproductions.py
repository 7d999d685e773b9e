"""Drivers of the paper reproductions (experiments/grad_norms_at_init.py, model_update.py,
grad_flow.py):
rows as lists of dicts, and their CSV and PNG writers (the figures are reproduction_plots.py's).
The measurements are diagnostics.py's.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import ConfigDict

from resnorm_jax.data import batches as batches_lib
from resnorm_jax.data import corpora, sources
from resnorm_jax.data import vocab as vocab_lib
from resnorm_jax.model import model_def as mdl
from resnorm_jax.probes import reproduction_plots as plots
from resnorm_jax.runs import status
from resnorm_jax.train import run_setup
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.diagnostics import (
  check_groups,
  expected_grad_norms,
  layer_grad_norms,
  probe,
  reset_group,
  train_step_and_probe,
)

Batch = tuple[np.ndarray, np.ndarray]
Row = dict[str, Any]


def with_depth(config: ConfigDict, depth: int) -> ConfigDict:
  """A copy of `config` at `depth` layers (DeepNorm's alpha/beta follow unless set)."""
  c = copy.deepcopy(config)
  c.model.num_layers = depth
  return c


def _corpus(config: ConfigDict) -> corpora.Corpus:
  vocab = vocab_lib.resolve_vocab_size(config.data, config.model.vocab_size)  # 0: the data's
  return sources.load_corpus(config.data, vocab, config.train.seq_len)


def _train_batch(corpus: corpora.Corpus, config: ConfigDict, step: int) -> Batch:
  t = config.train
  return batches_lib.get_batch(
    corpus.train, seed=config.seed, step=step, batch_size=t.batch_size, seq_len=t.seq_len
  )


# ----------------------------------------------------------------------------------------
# Experiment drivers
# ----------------------------------------------------------------------------------------


model_def_for = run_setup.model_def_for  # one ModelDef per model: diagnostics compile once
jit_init_model = jax.jit(mdl.init_model, static_argnums=(0, 1))  # (cfg, seed) -> (params, state)


def grad_norms_at_init(config: ConfigDict, num_batches: int) -> dict[str, np.ndarray]:
  """expected_grad_norms of `config`'s model at init over its first K training batches."""
  mcfg = run_setup.model_config(config)
  model_def = model_def_for(mcfg)
  params, model_state = jit_init_model(mcfg, config.seed)
  corpus = _corpus(config)
  batches = [_train_batch(corpus, config, k) for k in range(num_batches)]
  return expected_grad_norms(model_def, params, model_state, batches)


def grad_norms_experiment(
  configs: Sequence[tuple[str, ConfigDict]], depths: Sequence[int], num_batches: int
) -> tuple[list[Row], list[Row]]:
  """(per-layer rows at each config's own depth, last-layer rows at each of `depths`)."""
  if num_batches < 1:
    raise ValueError(f"--num_batches={num_batches} must be >= 1")
  per_layer, vs_depth = [], []
  for label, config in configs:
    cache: dict[int, dict[str, np.ndarray]] = {}
    n = config.model.num_layers
    for depth in [n, *[d for d in depths if d != n]]:
      t0 = time.time()
      cache[depth] = grad_norms_at_init(with_depth(config, depth), num_batches)
      print(f"{label} L={depth}: K={num_batches} batches in {time.time() - t0:.1f}s", flush=True)
    for layer, (g1, g2) in enumerate(zip(cache[n]["w1"], cache[n]["w2"], strict=True)):
      per_layer.append(
        dict(config=label, num_layers=n, layer=layer, w1_grad_norm=g1, w2_grad_norm=g2)
      )
    for depth in depths:
      g = cache[depth]
      vs_depth.append(
        dict(
          config=label,
          depth=depth,
          last_w2_grad_norm=g["w2"][-1],
          last_w1_grad_norm=g["w1"][-1],
          first_w2_grad_norm=g["w2"][0],
        )
      )
  return per_layer, vs_depth


def _fresh_run(config: ConfigDict, steps: int):
  """(model_def, optimizer, TrainState at init, corpus, held-out batch 0) of `config`.

  The run's own setup on one device; the optimizer has the real run's schedule (its length
  is train.steps, or `steps` if longer).
  """
  run = run_setup.build(config, jax.devices()[:1], schedule_steps=max(config.train.steps, steps))
  state = run.init_state()
  corpus = _corpus(config)
  t = config.train
  batch = batches_lib.eval_batch(corpus.val, index=0, batch_size=t.batch_size, seq_len=t.seq_len)
  return run.model_def, run.optimizer, state, corpus, batch


def model_update_run(config: ConfigDict, steps: int) -> list[Row]:
  """Trains `steps` steps; per step (0 = init): the model update and norm-input RMS."""
  model_def, optimizer, state, corpus, (tokens, _) = _fresh_run(config, steps)
  probe_fn = jax.jit(functools.partial(probe, model_def))
  logits0, out0 = probe_fn(state.params, state.model_state, tokens, jnp.zeros(()))
  step_fn = jax.jit(functools.partial(train_step_and_probe, model_def, optimizer), donate_argnums=0)
  outs = [dict(out0, update=jnp.zeros(()), loss=jnp.nan, grad_norm=jnp.nan)]
  for step in range(steps):
    state, out = step_fn(state, _train_batch(corpus, config, step), tokens, logits0)
    outs.append(out)
  # Row t: after t updates; train_loss and grad_norm are those of update t (at theta_{t-1}).
  # update_per_lr: the update divided by the peak lr. At a small lr (the linear regime) it
  # does not depend on the lr: it measures how strongly the model's output answers a step.
  lr = float(config.opt.lr)
  return [
    {
      "step": t,
      "update": float(o["update"]),
      "update_per_lr": float(o["update"]) / lr,
      "norm_in_rms_mean": float(o["norm_in_rms_mean"]),
      "norm_in_rms_max": float(o["norm_in_rms_max"]),
      "train_loss": float(o["loss"]),
      "grad_norm": float(o["grad_norm"]),
    }
    for t, o in enumerate(jax.device_get(outs))
  ]


def model_update_experiment(
  configs: Sequence[tuple[str, ConfigDict]], depths: Sequence[int], steps: int
) -> list[Row]:
  """Rows (config, depth, step, update, norm_in_rms_mean/max, train_loss, grad_norm)."""
  if steps < 1:
    raise ValueError(f"--steps={steps} must be >= 1")
  rows = []
  for label, config in configs:
    for depth in depths or [config.model.num_layers]:
      t0 = time.time()
      run = model_update_run(with_depth(config, depth), steps)
      rows.extend({"config": label, "depth": depth, **r} for r in run)
      print(
        f"{label} L={depth}: {steps} steps in {time.time() - t0:.1f}s, update at step "
        f"{steps} {run[-1]['update']:.3g}, max norm-input RMS {run[-1]['norm_in_rms_max']:.3g}",
        flush=True,
      )
  return rows


def early_update(rows: Sequence[Row], early_steps: int) -> list[Row]:
  """Per (config, depth): the largest update over steps 1..early_steps, and the last one."""
  out: dict[tuple[str, int], Row] = {}
  for r in rows:
    key = (r["config"], r["depth"])
    o = out.setdefault(
      key, {"config": key[0], "depth": key[1], "early_update": 0.0, "early_update_per_lr": 0.0}
    )
    if 1 <= r["step"] <= early_steps and math.isfinite(r["update"]):
      o["early_update"] = max(o["early_update"], r["update"])
      o["early_update_per_lr"] = max(o["early_update_per_lr"], r.get("update_per_lr", 0.0))
    o["final_step"], o["final_update"] = r["step"], r["update"]
  return list(out.values())


def grad_flow_run(config: ConfigDict, steps: int, groups: Sequence[str]) -> list[Row]:
  """Per-layer gradient norms on one fixed batch: at init, after `steps` training steps, and
  after those steps with each parameter group of `groups` put back to its init values.

  Rows (state, layer, grad_norm); state is 'init', 'trained' or 'reset <group>'. Which reset
  brings the lower layers' gradient back says which parameters' drift cut the gradient flow.
  """
  model_def, optimizer, state, corpus, batch = _fresh_run(config, steps)
  params0, model_state = state.params, state.model_state
  norms = {"init": layer_grad_norms(model_def, params0, model_state, batch)}
  step_fn = jax.jit(functools.partial(ts.train_step, model_def, optimizer, per_layer=False))
  for step in range(steps):
    state, _ = step_fn(state, _train_batch(corpus, config, step))
  norms[status.TRAINED] = layer_grad_norms(model_def, state.params, state.model_state, batch)
  for group in groups:
    params = reset_group(state.params, params0, group)
    norms[f"reset {group}"] = layer_grad_norms(model_def, params, state.model_state, batch)
  return [
    {"state": name, "layer": layer, "grad_norm": float(g)}
    for name, values in norms.items()  # in measuring order (device_get would sort the keys)
    for layer, g in enumerate(np.asarray(values))
  ]


def grad_flow_experiment(
  configs: Sequence[tuple[str, ConfigDict]],
  depths: Sequence[int],
  steps: int,
  groups: Sequence[str],
) -> list[Row]:
  """Rows (config, depth, steps, state, layer, grad_norm) of grad_flow_run per config/depth."""
  if steps < 1:
    raise ValueError(f"--steps={steps} must be >= 1")
  check_groups(groups)  # before anything compiles
  rows = []
  for label, config in configs:
    for depth in depths or [config.model.num_layers]:
      t0 = time.time()
      run = grad_flow_run(with_depth(config, depth), steps, groups)
      rows.extend({"config": label, "depth": depth, "steps": steps, **r} for r in run)
      summary = ", ".join(f"{name} {ratio:.3g}" for name, ratio in grad_flow_ratios(run).items())
      print(f"{label} L={depth} ({time.time() - t0:.1f}s) last/first layer: {summary}", flush=True)
  return rows


def grad_flow_ratios(rows: Sequence[Row]) -> dict[str, float]:
  """Per state of one run: the last layer's gradient norm over the first layer's."""
  out = {}
  for (name,), rs in _by(rows, "state").items():
    g = [r["grad_norm"] for r in sorted(rs, key=lambda r: r["layer"])]
    out[name] = g[-1] / g[0] if g[0] > 0 else math.inf
  return out


# ----------------------------------------------------------------------------------------
# Writers
# ----------------------------------------------------------------------------------------


write_csv = plots.write_csv
_by = plots.by


def write_grad_norms(per_layer: Sequence[Row], vs_depth: Sequence[Row], outdir: str) -> list[str]:
  """grad_norms_per_layer.csv/.png and (with depths) grad_norms_vs_depth.csv/.png."""
  files = [write_csv(os.path.join(outdir, "grad_norms_per_layer.csv"), per_layer)]
  fig = plots.grad_norms_per_layer_figure(per_layer)
  files.append(plots.save(fig, os.path.join(outdir, "grad_norms_per_layer.png")))
  if vs_depth:
    files.append(write_csv(os.path.join(outdir, "grad_norms_vs_depth.csv"), vs_depth))
    fig = plots.grad_norms_vs_depth_figure(vs_depth)
    files.append(plots.save(fig, os.path.join(outdir, "grad_norms_vs_depth.png")))
  return files


def write_model_update(rows: Sequence[Row], early: Sequence[Row], outdir: str) -> list[str]:
  """model_update.csv/.png (update and norm-input RMS vs step), model_update_vs_depth.*."""
  files = [write_csv(os.path.join(outdir, "model_update.csv"), rows)]
  files.append(
    plots.save(plots.model_update_figure(rows), os.path.join(outdir, "model_update.png"))
  )
  files.append(write_csv(os.path.join(outdir, "model_update_vs_depth.csv"), early))
  fig = plots.early_update_figure(early)
  files.append(plots.save(fig, os.path.join(outdir, "model_update_vs_depth.png")))
  return files


def write_grad_flow(rows: Sequence[Row], outdir: str) -> list[str]:
  """grad_flow.csv and grad_flow.png (per-layer gradient norm, one panel per config/depth)."""
  files = [write_csv(os.path.join(outdir, "grad_flow.csv"), rows)]
  files.append(plots.save(plots.grad_flow_figure(rows), os.path.join(outdir, "grad_flow.png")))
  return files


# ----------------------------------------------------------------------------------------
# Command line
