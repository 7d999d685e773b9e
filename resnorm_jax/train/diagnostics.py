"""Diagnostics of depth: expected FFN gradient norms at init (Xiong 2020, Fig. 3), the model
update ||F(x, theta_t) - F(x, theta_0)|| (DeepNet, Fig. 4a/5) and norm-input magnitudes.

Pure functions of (model_def, params, batches); the experiment drivers that use them live
in reproductions.py. F(x, theta), the model function, is taken
as its output logits (not the last hidden state): what DeepNet measures is the model output.
Shape legend: K mini-batches, B batch, T time, D width, F FFN width, V vocab, L layers.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from resnorm_jax.model import model_def as mdl
from resnorm_jax.train import param_groups
from resnorm_jax.train import train_step as ts

PyTree = Any
Batch = tuple[np.ndarray, np.ndarray]

# ----------------------------------------------------------------------------------------
# Pure diagnostics
# ----------------------------------------------------------------------------------------


def _with_ffn(params: PyTree, w1_LxDxF: jax.Array, w2_LxFxD: jax.Array) -> PyTree:
  """`params` with the stacked FFN kernels replaced (a shallow copy: nothing is mutated)."""
  mlp = params["layers"]["mlp"]
  new_mlp = {
    **mlp,
    "ffn_in": {**mlp["ffn_in"], "kernel": w1_LxDxF},
    "ffn_out": {**mlp["ffn_out"], "kernel": w2_LxFxD},
  }
  return {**params, "layers": {**params["layers"], "mlp": new_mlp}}


@functools.partial(jax.jit, static_argnums=0)
def mean_ffn_grads(model_def: mdl.ModelDef, params, model_state, inputs_KxBxT, targets_KxBxT):
  """(dW1 [L,D,F], dW2 [L,F,D]): the FFN kernels' gradients averaged over the K batches."""
  mlp = params["layers"]["mlp"]

  def loss(w1, w2, x_BxT, y_BxT):
    p = _with_ffn(params, w1, w2)
    logits, _, _ = model_def.apply(p, model_state, x_BxT, train=True)
    return ts.cross_entropy(logits, y_BxT)

  grad_fn = jax.grad(loss, argnums=(0, 1))

  def body(acc, batch):
    g = grad_fn(mlp["ffn_in"]["kernel"], mlp["ffn_out"]["kernel"], *batch)
    return jax.tree.map(jnp.add, acc, g), None

  zeros = jax.tree.map(
    lambda w: jnp.zeros(w.shape, jnp.float32), (mlp["ffn_in"]["kernel"], mlp["ffn_out"]["kernel"])
  )
  total, _ = jax.lax.scan(body, zeros, (inputs_KxBxT, targets_KxBxT))
  k = inputs_KxBxT.shape[0]
  return jax.tree.map(lambda g: g / k, total)


def stack_batches(batches: Sequence[Batch]) -> tuple[np.ndarray, np.ndarray]:
  """K (inputs, targets) pairs of one shape -> (inputs_KxBxT, targets_KxBxT)."""
  if not batches:
    raise ValueError("need at least one batch")
  shapes = {(np.shape(x), np.shape(y)) for x, y in batches}
  if len(shapes) != 1:
    raise ValueError(f"all batches must have one shape; got {sorted(shapes)}")
  return np.stack([x for x, _ in batches]), np.stack([y for _, y in batches])


def expected_grad_norms(
  model_def: mdl.ModelDef, params: PyTree, model_state: PyTree, batches: Sequence[Batch]
) -> dict[str, np.ndarray]:
  """{'w1', 'w2'}: per-layer [L] Frobenius norms of the FFN kernels' expected gradient.

  Xiong 2020 (Fig. 3): the gradient is averaged over the K mini-batches before the norm is
  taken, so batch noise cancels; the mean of per-batch norms would be larger.
  """
  inputs, targets = stack_batches(batches)
  g1, g2 = mean_ffn_grads(model_def, params, model_state, inputs, targets)
  return {"w1": np.asarray(ts.per_layer_norm(g1)), "w2": np.asarray(ts.per_layer_norm(g2))}


@functools.partial(jax.jit, static_argnums=0)
def _logits(model_def: mdl.ModelDef, params, model_state, tokens_BxT):
  """Eval-mode logits (batchnorm on its running averages)."""
  return model_def.apply(params, model_state, tokens_BxT, train=False)[0]


def output_distance(a_BxTxV: jax.Array, b_BxTxV: jax.Array) -> jax.Array:
  """Mean over the B*T positions of the L2 norm (over the vocabulary) of a - b."""
  diff = a_BxTxV.astype(jnp.float32) - b_BxTxV.astype(jnp.float32)
  return jnp.mean(jnp.sqrt(jnp.sum(jnp.square(diff), axis=-1)))


def model_output_distance(
  model_def: mdl.ModelDef, params0: PyTree, params_t: PyTree, model_state: PyTree, tokens_BxT
) -> float:
  """||F(x, theta_t) - F(x, theta_0)||, F = eval-mode logits, per token then averaged."""
  a = _logits(model_def, params_t, model_state, tokens_BxT)
  b = _logits(model_def, params0, model_state, tokens_BxT)
  return float(output_distance(a, b))


def norm_input_rms(layer_stats: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
  """The per-layer [L] RMS at every norm's input (`<slot>_norm_in_rms`) of stats['layers']."""
  return {k: v for k, v in layer_stats.items() if k.endswith("_norm_in_rms")}


def norm_input_summary(layer_stats: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
  """(mean, max) of the norm-input RMS over all layers and slots; NaN without norms.

  RMS = ||x|| / sqrt(D): DeepNet's "LN input far above sqrt(d)" is an RMS far above 1.
  """
  values = list(norm_input_rms(layer_stats).values())
  if not values:
    nan = jnp.asarray(jnp.nan, jnp.float32)
    return nan, nan
  all_ = jnp.concatenate([jnp.ravel(v) for v in values])
  return jnp.mean(all_), jnp.max(all_)


def probe(model_def: mdl.ModelDef, params, model_state, tokens_BxT, logits0_BxTxV):
  """(logits, {'update', 'norm_in_rms_mean', 'norm_in_rms_max'}) on a fixed batch."""
  logits, stats, _ = model_def.apply(params, model_state, tokens_BxT, train=False)
  mean, max_ = norm_input_summary(stats["layers"])
  out = {"update": output_distance(logits, logits0_BxTxV)}
  out.update(norm_in_rms_mean=mean, norm_in_rms_max=max_)
  return logits, out


def train_step_and_probe(model_def, optimizer, state, batch, tokens_BxT, logits0_BxTxV):
  """One train_step, then the probe at the new params: one compiled function per model."""
  state, metrics = ts.train_step(model_def, optimizer, state, batch, per_layer=False)
  _, out = probe(model_def, state.params, state.model_state, tokens_BxT, logits0_BxTxV)
  out.update(loss=metrics["loss"], grad_norm=metrics["grad_norm"])
  return state, out


# Parameter groups of the gradient-flow probe: name -> test on a leaf's path (jax keystr,
# e.g. "['layers']['norms']['attn']['bias']"). Layer-stacked leaves live under ['layers'].
# Groups of grad_flow's resets (resnorm_jax/train/param_groups.py): the norms include the sandwich
# placement's out_norms and the final norm; `residual` holds ReZero/LayerScale/gate weights.
PARAM_GROUPS = param_groups.GROUPS


@functools.partial(jax.jit, static_argnums=0)
def layer_grad_norms(model_def: mdl.ModelDef, params, model_state, batch) -> jax.Array:
  """[L]: the Frobenius norm of each layer's whole parameter gradient on one batch."""
  inputs, targets = batch

  def loss(p):
    logits, _, _ = model_def.apply(p, model_state, inputs, train=True)
    return ts.cross_entropy(logits, targets)

  return ts.per_layer_norm(jax.grad(loss)(params)["layers"])


check_groups = param_groups.check


def reset_group(params: PyTree, params0: PyTree, group: str) -> PyTree:
  """`params` with the leaves of PARAM_GROUPS[group] put back to their values in `params0`."""
  param_groups.check([group])
  test = PARAM_GROUPS[group]
  return jax.tree_util.tree_map_with_path(
    lambda path, new, old: old if test(jax.tree_util.keystr(path)) else new, params, params0
  )
