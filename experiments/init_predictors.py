"""Scores of a run at init, for each (init seed, data seed) of a factorial cell: can the first
forward-backward pass tell a run that will escape Post-LN's plateau from one that will not?
(docs/early_warning/init_or_data.md; the factorial is configs/sweeps/init_or_data.py.)

For each pair, the model at init (seed) and the first training batch of the data seed
(data.seed), one train step with every per-layer diagnostic, plus one finite-difference probe:
  grad_norm            the gradient's global norm at init
  grad_first_over_last the first layer's gradient norm over the last's (Xiong et al. 2020)
  attn_entropy         attention entropy at init, mean over layers (nats)
  attn_sink_mass       attention on the first token at init, mean over layers
  stream_max           the stream's largest activation at init, max over layers
  update_ratio         the first step's update over the parameters, mean over layers
  input_sensitivity    how far the logits move per unit move of the token embeddings: ||f(E
                       + eps v) - f(E)|| / (eps ||v||) for a random unit-RMS direction v (a
                       Jacobian norm along one direction, in the spirit of RKSP's score from
                       one pass at init, arXiv 2602.22988)
  loss                 the first batch's loss at init
Writes one CSV row per pair. Seconds on a CPU: one compile, one step per pair.

python -m experiments.init_predictors --grid=configs/sweeps/init_or_data.py \
    --out=docs/early_warning/init_predictors.csv
"""

from __future__ import annotations

import os
import sys

from absl import flags

from resnorm_jax.config import cli

_GRID = flags.DEFINE_string("grid", "configs/sweeps/init_or_data.py", "the factorial's grid")
_OUT = flags.DEFINE_string("out", "docs/early_warning/init_predictors.csv", "the CSV written")
_EPS = flags.DEFINE_float("eps", 1e-3, "the embedding perturbation's size (relative RMS)")

COLUMNS = (
  "name", "seed", "data_seed", "loss", "grad_norm", "grad_first_over_last", "attn_entropy",
  "attn_sink_mass", "stream_max", "update_ratio", "input_sensitivity",
)  # fmt: skip


def scores(run, state, batch, eps: float) -> dict[str, float]:
  """The scores of one (state at init, first batch): see the module's docstring."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  _, metrics = run.step_fn(jax.tree.map(jnp.copy, state), batch)
  m = jax.device_get(metrics)
  layers = m["grad_norm_layer"]
  params = state.params
  emb = params["embed"]["embedding"]
  v = jax.random.normal(jax.random.key(0), emb.shape, emb.dtype)
  rms = jnp.sqrt(jnp.mean(jnp.square(emb)))
  step = eps * rms * v  # a move of eps times the table's RMS per entry

  def logits(p):
    out, _, _ = run.model_def.apply(p, state.model_state, batch[0], train=False)
    return out.astype(jnp.float32)

  moved = {**params, "embed": {**params["embed"], "embedding": emb + step}}
  f0, f1 = jax.jit(logits)(params), jax.jit(logits)(moved)
  sens = float(jnp.linalg.norm(f1 - f0) / jnp.linalg.norm(step))
  return {
    "loss": float(m["loss"]),
    "grad_norm": float(m["grad_norm"]),
    "grad_first_over_last": float(layers[0] / layers[-1]),
    "attn_entropy": float(np.mean(m["attn_entropy"])),
    "attn_sink_mass": float(np.mean(m["attn_sink_mass"])),
    "stream_max": float(np.max(m["stream_max"])),
    "update_ratio": float(np.mean(m["update_ratio_layer"])),
    "input_sensitivity": sens,
  }


def main(argv: list[str]) -> None:
  del argv
  import jax

  from resnorm_jax.sweeps.grid import load_grid
  from resnorm_jax.train import run_setup

  points = load_grid(_GRID.value)
  if not points:
    cli.fail(f"--grid={_GRID.value}: no points")
  rows, corpus = [], None
  for point in points:
    config = cli.load_config_file(point.config)
    for key, value in point.overrides.items():
      node = config
      *parents, leaf = key.split(".")
      for p in parents:
        node = node[p]
      node[leaf] = value
    config.diag.per_layer = config.diag.mechanism = True
    run = run_setup.build(config, jax.devices()[:1])
    batches = run_setup.batches(run, corpus)
    corpus = batches.corpus  # the same corpus for every point: loaded once
    state = run.init_state()
    row = {"name": point.name, "seed": config.seed, "data_seed": run_setup.data_seed(config)}
    row.update(scores(run, state, batches.train(0), _EPS.value))
    rows.append(row)
    print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
  os.makedirs(os.path.dirname(os.path.abspath(_OUT.value)), exist_ok=True)
  from resnorm_jax.files import csv_table

  fixed = [{k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows]
  csv_table.write_csv(_OUT.value, fixed, COLUMNS, lineterminator="\n")
  print(f"{len(rows)} pairs -> {_OUT.value}", file=sys.stderr)


if __name__ == "__main__":
  from absl import app

  app.run(main, flags_parser=cli.parse_flags_or_exit)
