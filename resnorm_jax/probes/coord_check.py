"""Coordinate checks across depth (microsoft/mup's coord_check; CompleteP's Fig. 7).

For each depth parametrization (model.depth_param), depth and seed: train `steps` steps of
the config's own optimizer and batches, and after every step measure on one fixed held-out
batch the RMS of each role's activation and of its change since init (the "update"):

  embed     the stack's input (embeddings, plus positions)
  stream    the residual stream after each layer (layer 0..L-1; `last` is layer L-1)
  attn_out  each layer's attention branch output F, before the branch multiplier
  ffn_out   each layer's MLP branch output F, before the branch multiplier
  logits    the output logits

(RMS over batch, time and channels, float32; mean |x| is a fixed multiple of it for
Gaussian-like coordinates.) Under a parametrization that transfers across depth the curves
are flat in depth; under sp a Pre-LN stream's update grows with it. `spread` is the largest
over the smallest value across depths, per parametrization, role and step.

With `widths`, every point is also run at each d_model under muP (model.width_param=mup,
width_param.py; `width_param="sp"` for the baseline; d_ff kept at the config's ratio, the head
count fixed): rows carry `width`, and `spread(..., over="width")` is the largest over the
smallest across widths per depth.
"""

from __future__ import annotations

import copy
import functools
import os
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from ml_collections import ConfigDict

from resnorm_jax.data import batches as batches_lib
from resnorm_jax.data import corpora, sources
from resnorm_jax.data import vocab as vocab_lib
from resnorm_jax.files import csv_table
from resnorm_jax.files.nofollow import open_nofollow
from resnorm_jax.model import variants
from resnorm_jax.model.attention import rope_tables
from resnorm_jax.model.norms import rms
from resnorm_jax.train import run_setup
from resnorm_jax.train import train_step as ts

Row = dict[str, Any]
ROLES = ("embed", "stream", "attn_out", "ffn_out", "logits")


def activations(model_def, params, model_state, tokens_BxT) -> dict[str, jax.Array]:
  """{role: tensor}: embed [B,T,D], stream [L,B,T,D], attn_out/ffn_out RMS [L], logits."""
  model = nnx.merge(model_def.eval_graph, params, model_state)
  cfg = model.cfg
  x = model.embed_tokens(tokens_BxT)
  t = tokens_BxT.shape[1]
  rope = rope_tables(t, cfg.head_dim) if cfg.position == "rope" else None

  def body(h, layer, index):
    h, stats = layer(h, rope, index)
    return h, (h, stats)

  scan = nnx.scan(body, in_axes=(nnx.Carry, 0, 0), out_axes=(nnx.Carry, 0))
  h0 = variants.residual(cfg.residual).stream_in(x, cfg)
  _, (streams, stats) = scan(h0, model.layers, jnp.arange(cfg.num_layers, dtype=jnp.int32))
  logits, _ = model(tokens_BxT)
  return {
    "embed": x.astype(jnp.float32),
    "stream": streams.astype(jnp.float32),
    "attn_out": stats.get("attn_branch_rms"),
    "ffn_out": stats.get("ffn_branch_rms"),
    "logits": logits,
  }


def _rms_per_layer(a_LxBxTxD: jax.Array) -> jax.Array:
  return jax.vmap(rms)(a_LxBxTxD)


def measure(now: dict, init: dict) -> dict[str, np.ndarray]:
  """{role: (rms [n], update [n])} with n = 1, or L for per-layer roles."""
  out = {}
  for role in ROLES:
    a, a0 = now[role], init[role]
    if a is None:
      continue
    if role == "stream":
      out[role] = (_rms_per_layer(a), _rms_per_layer(a - a0))
    elif role in ("attn_out", "ffn_out"):  # RMS already; no update (F itself is not kept)
      out[role] = (a, jnp.full_like(a, jnp.nan))
    else:
      out[role] = (rms(a)[None], rms(a - a0)[None])
  return jax.device_get(out)


def _corpus(config: ConfigDict) -> corpora.Corpus:
  vocab = vocab_lib.resolve_vocab_size(config.data, config.model.vocab_size)  # 0: the data's
  return sources.load_corpus(config.data, vocab, config.train.seq_len)


def run_seeds(config: ConfigDict, seeds: Sequence[int], steps: int, corpus) -> list[Row]:
  """Rows (seed, step, role, layer, rms, update): `config` trained `steps` steps per seed
  (init and batches from the seed), compiled once."""
  run = run_setup.build(config, jax.devices()[:1], schedule_steps=max(config.train.steps, steps))
  t = config.train
  tokens, _ = batches_lib.eval_batch(
    corpus.val, index=0, batch_size=t.batch_size, seq_len=t.seq_len
  )
  probe = jax.jit(functools.partial(activations, run.model_def))
  step_fn = jax.jit(functools.partial(ts.train_step, run.model_def, run.optimizer, per_layer=False))
  init_fn = jax.jit(functools.partial(ts.init_state, run.model_def, run.optimizer))
  rows = []
  for seed in seeds:
    state = init_fn(seed)
    init = probe(state.params, state.model_state, tokens)
    for step in range(steps + 1):
      if step:
        batch = batches_lib.get_batch(
          corpus.train, seed=seed, step=step - 1, batch_size=t.batch_size, seq_len=t.seq_len
        )
        state, _ = step_fn(state, batch)
      now = probe(state.params, state.model_state, tokens) if step else init
      for role, (values, updates) in measure(now, init).items():
        for layer, (v, u) in enumerate(zip(np.ravel(values), np.ravel(updates), strict=True)):
          rows.append(
            dict(seed=seed, step=step, role=role, layer=layer, rms=float(v), update=float(u))
          )
  return rows


def at_width(config: ConfigDict, width: int | None, width_param: str = "mup") -> ConfigDict:
  """`config` at d_model=width under `width_param` (d_ff at the config's ratio); None: as it
  is."""
  c = copy.deepcopy(config)
  if width is not None:
    m = c.model
    if width < 1 or width % m.num_heads:
      raise ValueError(f"--widths: {width} is not a positive multiple of {m.num_heads} heads")
    m.d_ff, m.d_model = max(1, round(m.d_ff * width / m.d_model)), width
    m.width_param = width_param
  return c


def experiment(
  config: ConfigDict,
  params: Sequence[str],
  depths: Sequence[int],
  seeds: Sequence[int],
  steps: int,
  widths: Sequence[int] | None = None,
  width_param: str = "mup",
) -> list[Row]:
  """Rows (depth_param, width, depth, seed, step, role, layer, rms, update) over the grid;
  `widths`: each d_model under `width_param` (at_width), else the config's width alone."""
  if steps < 1:
    raise ValueError(f"--steps={steps} must be >= 1")
  corpus = _corpus(config)
  rows = []
  for name in params:
    for width in widths or [None]:
      for depth in depths:
        c = at_width(config, width, width_param)
        c.model.depth_param, c.model.num_layers = name, depth
        t0 = time.time()
        point = dict(
          depth_param=name, width_param=c.model.width_param, width=c.model.d_model, depth=depth
        )
        rows += [dict(**point, **r) for r in run_seeds(c, seeds, steps, corpus)]
        print(
          f"{name} d={c.model.d_model} L={depth}: {len(seeds)} seeds x {steps} steps in "
          f"{time.time() - t0:.1f}s"
        )
  return rows


def summarize(rows: Sequence[Row]) -> list[Row]:
  """Per (depth_param, width, depth, step, role): the seed mean of each role's RMS and update,
  with per-layer roles as the mean over layers, and the stream also at its last layer."""
  groups: dict[tuple, list[tuple[float, float]]] = {}
  last_layer = {}
  key_of = lambda r: (r["depth_param"], r.get("width"), r["depth"], r["step"], r["role"])
  for r in rows:
    key = key_of(r)
    last_layer[key] = max(last_layer.get(key, 0), r["layer"])
  for r in rows:
    key = key_of(r)
    groups.setdefault(key, []).append((r["rms"], r["update"]))
    if r["role"] == "stream" and r["layer"] == last_layer[key]:
      groups.setdefault(key[:4] + ("stream_last",), []).append((r["rms"], r["update"]))
  out = []
  for (name, width, depth, step, role), values in groups.items():
    v = np.asarray(values, np.float64)
    out.append(
      dict(
        depth_param=name,
        width=width,
        depth=depth,
        step=step,
        role=role,
        rms=float(np.mean(v[:, 0])),
        update=float(np.mean(v[:, 1])) if np.all(np.isfinite(v[:, 1])) else float("nan"),
      )
    )
  return out


def spread(summary: Sequence[Row], step: int, over: str = "depth") -> list[Row]:
  """Per (depth_param, the other axis, role) at `step`: each depth's (over="width": each
  width's) value and largest / smallest."""
  other, prefix = ("width", "L") if over == "depth" else ("depth", "d")
  table: dict[tuple, dict[int, Row]] = {}
  for r in summary:
    if r["step"] == step:
      table.setdefault((r["depth_param"], r.get(other), r["role"]), {})[r.get(over)] = r
  out = []
  for (name, fixed, role), by_depth in table.items():
    depths = sorted(by_depth)
    for quantity in ("rms", "update"):
      values = np.asarray([by_depth[d][quantity] for d in depths], np.float64)
      if not np.all(np.isfinite(values)) or np.min(np.abs(values)) == 0:
        continue
      row = dict(depth_param=name, role=role, quantity=quantity, step=step)
      if fixed is not None:
        row[other] = fixed
      row.update({f"{prefix}{d}": float(v) for d, v in zip(depths, values, strict=True)})
      row["spread"] = float(np.max(values) / np.min(values))
      out.append(row)
  return out


def write_csv(path: str, rows: Sequence[Row]) -> str:
  keys: list[str] = []
  for r in rows:
    keys += [k for k in r if k not in keys]
  return csv_table.write_csv(path, rows, keys)


PLOTTED = ("embed", "attn_out", "ffn_out", "stream_last", "logits")


def plot(summary: Sequence[Row], path: str, width_param: str | None = None) -> str:
  """A row of panels per parametrization, a panel per role: update RMS (RMS where a role has
  no update) against depth (against width when several widths share one depth), a line per
  step; `width_param` (the runs' model.width_param) named in every panel's title."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  several = len({r.get("width") for r in summary}) > 1
  x_axis = "width" if several and len({r["depth"] for r in summary}) == 1 else "depth"

  def label(r: Row) -> str:
    if x_axis == "width":
      text = f"{r['depth_param']} L{r['depth']}"
    else:
      text = f"{r['depth_param']} d{r['width']}" if several else r["depth_param"]
    return text if width_param is None else f"{text}, width {width_param}"

  names = list(dict.fromkeys(label(r) for r in summary))
  steps = sorted({r["step"] for r in summary if r["step"] > 0})
  fig, axes = plt.subplots(
    len(names), len(PLOTTED), figsize=(3.2 * len(PLOTTED), 2.6 * len(names)), squeeze=False
  )
  cmap = plt.get_cmap("viridis")
  for i, name in enumerate(names):
    for j, role in enumerate(PLOTTED):
      ax = axes[i][j]
      quantity = "rms" if role in ("attn_out", "ffn_out") else "update"
      for k, step in enumerate(steps):
        pts = sorted(
          (r[x_axis], r[quantity])
          for r in summary
          if label(r) == name and r["role"] == role and r["step"] == step
        )
        if pts:
          d, v = zip(*pts, strict=True)
          ax.plot(d, v, marker="o", ms=3, color=cmap(k / max(len(steps) - 1, 1)), lw=1)
      ax.set_xscale("log", base=2)
      ax.set_yscale("log")
      ax.set_title(f"{name}: {role} {'RMS' if quantity == 'rms' else 'update RMS'}", fontsize=8)
      ax.tick_params(labelsize=7)
      if i == len(names) - 1:
        ax.set_xlabel("depth (layers)" if x_axis == "depth" else "width (d_model)", fontsize=8)
  fig.suptitle(f"coordinate check: steps {steps[0]}..{steps[-1]} (dark to light)", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def write(rows: Sequence[Row], outdir: str, command: str) -> list[str]:
  """coord_check.csv (seed means), spread.csv (across depths at the last step; with several
  widths also spread_width.csv, across widths), coord_check.png, command."""
  os.makedirs(outdir, exist_ok=True)
  summary = summarize(rows)
  last = max(r["step"] for r in summary)
  paths = [
    write_csv(os.path.join(outdir, "coord_check.csv"), summary),
    write_csv(os.path.join(outdir, "spread.csv"), spread(summary, last)),
  ]
  if len({r.get("width") for r in summary}) > 1:
    paths.append(
      write_csv(os.path.join(outdir, "spread_width.csv"), spread(summary, last, over="width"))
    )
  kinds = {r.get("width_param") for r in rows} - {None}
  width_param = kinds.pop() if len(kinds) == 1 else None
  paths.append(plot(summary, os.path.join(outdir, "coord_check.png"), width_param))
  with open_nofollow(os.path.join(outdir, "COMMAND"), "w") as f:
    f.write(command + "\n")
  return [*paths, os.path.join(outdir, "COMMAND")]
