"""Pure functions of training: loss, train_step, eval_step, init_state (the model's definition
is resnorm_jax/model/model_def.py).

The train state holds plain nested dicts of arrays (params, optimizer state, non-trainable
model state such as batchnorm running averages), so optax, orbax and the sharding rules
all see ordinary pytrees; `ModelDef` merges them back into the NNX module inside jit.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from resnorm_jax.model import variants
from resnorm_jax.model.model_def import ModelDef, init_model

PyTree = Any


@struct.dataclass
class TrainState:
  """Everything a run needs to continue: step, params, optimizer and model state."""

  step: jax.Array
  params: PyTree
  opt_state: PyTree
  model_state: PyTree  # non-trainable variables (batchnorm running averages), else {}


def cross_entropy(logits_BxTxV: jax.Array, targets_BxT: jax.Array) -> jax.Array:
  """Mean next-token cross entropy in nats: optax's `softmax_cross_entropy_with_integer_labels`
  (logsumexp minus the target's logit), with the target's logit picked by a one-hot select
  and sum instead of a gather. The values are the same (the sum adds zeros to one logit);
  the compiled step differs: XLA fuses the select into the logits' reductions, where a gather
  made it write the float32 logits [B, T, V] to memory to read them back (on the v5e:4x4
  `:paper` step, 1.65 GB a chip a step), and the gradient is a select, not a scatter."""
  logits = logits_BxTxV.astype(jnp.float32)
  target_BxTx1 = targets_BxT[..., None]
  is_target = jnp.arange(logits.shape[-1], dtype=target_BxTx1.dtype) == target_BxTx1
  target_logit_BxT = jnp.sum(jnp.where(is_target, logits, 0.0), axis=-1)
  return (jax.nn.logsumexp(logits, axis=-1) - target_logit_BxT).mean()


def z_loss(logits_BxTxV: jax.Array) -> jax.Array:
  """Mean squared log-partition function, log(sum exp logits)^2 (PaLM's auxiliary z-loss,
  Chowdhery et al. 2022; Wortsman et al. 2023 use it against output-logit divergence)."""
  return jnp.square(jax.nn.logsumexp(logits_BxTxV.astype(jnp.float32), axis=-1)).mean()


def init_state(model_def: ModelDef, optimizer: optax.GradientTransformation, seed: int):
  """A fresh TrainState (jit this with out_shardings to create it sharded)."""
  params, model_state = init_model(model_def.cfg, seed)
  opt_state = optimizer.init(params)
  # An optimizer built without the model_def would lack the variant's transformation (nGPT).
  variants.residual(model_def.cfg.residual).check_opt_state(opt_state)
  return TrainState(jnp.zeros((), jnp.int32), params, opt_state, model_state)


def logit_rms(logits_BxTxV: jax.Array) -> jax.Array:
  """RMS of the output logits over batch, time and vocabulary (output-logit divergence,
  Wortsman et al. 2023, shows as its growth)."""
  return jnp.sqrt(jnp.mean(jnp.square(logits_BxTxV.astype(jnp.float32))))


def _global_norm(tree: PyTree) -> jax.Array:
  return optax.tree.norm(tree)


def per_layer_norm(tree: PyTree) -> jax.Array:
  """Frobenius norm per layer of a layer-stacked subtree: [L]."""
  sq = [
    jnp.sum(jnp.square(x.astype(jnp.float32)), axis=tuple(range(1, x.ndim)))
    for x in jax.tree.leaves(tree)
  ]
  return jnp.sqrt(sum(sq))


# The per-layer statistics of the attention probabilities' shape (model/attention.py
# attention_shape), logged only with diag.mechanism.
ATTENTION_SHAPE = ("attn_entropy", "attn_sink_mass")


def train_step(
  model_def: ModelDef,
  optimizer: optax.GradientTransformation,
  state: TrainState,
  batch: tuple[jax.Array, jax.Array],
  *,
  per_layer: bool = True,
  z_loss_weight: float = 0.0,
  mechanism: bool = False,
):
  """One optimizer update; a non-finite loss or gradient leaves the state unchanged. The
  gradient is of the cross entropy plus `z_loss_weight` x z_loss; the reported loss is the
  cross entropy alone, so curves with and without the z-loss compare."""
  inputs, targets = batch

  def loss_fn(params):
    logits, stats, model_state = model_def.apply(params, state.model_state, inputs, train=True)
    ce = cross_entropy(logits, targets)
    z = z_loss(logits) if z_loss_weight else jnp.zeros(())
    return ce + z_loss_weight * z, (ce, z, logit_rms(logits), stats, model_state)

  (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  loss, z, output_logit_rms, stats, model_state = aux
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  grad_norm = _global_norm(grads)
  ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
  keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, old)
  new_state = TrainState(
    step=state.step + ok.astype(jnp.int32),
    params=keep(params, state.params),
    opt_state=keep(opt_state, state.opt_state),
    model_state=keep(model_state, state.model_state),
  )
  metrics = {
    "loss": loss,
    "grad_norm": grad_norm,
    "update_norm": _global_norm(updates),
    "param_norm": _global_norm(state.params),
    "output_logit_rms": output_logit_rms,
  }
  # The failure-kind diagnostics of every run: the largest attention logit over layers (per
  # layer under per_layer) and the output logits' RMS, beside the loss.
  layer_stats = dict(stats["layers"])
  logit_max_L = layer_stats.pop("attn_logit_max", None)  # absent on the fused paths
  if not mechanism:  # diag.mechanism off: not returned, so XLA drops their pass
    for key in ATTENTION_SHAPE:
      layer_stats.pop(key, None)
  if logit_max_L is not None:
    metrics["attn_logit_max"] = jnp.max(logit_max_L)
  if z_loss_weight:
    metrics["z_loss"] = z
  if per_layer:
    metrics.update(layer_stats)
    if logit_max_L is not None:
      metrics["attn_logit_max_layer"] = logit_max_L
    layer_grads = grads["layers"]
    metrics["grad_norm_layer"] = per_layer_norm(layer_grads)
    metrics["ffn_in_grad_norm"] = per_layer_norm(layer_grads["mlp"]["ffn_in"])
    metrics["ffn_out_grad_norm"] = per_layer_norm(layer_grads["mlp"]["ffn_out"])
  if per_layer and mechanism:
    # each layer's update against its parameters (||dW|| / ||W|| over the layer's leaves)
    metrics["update_ratio_layer"] = per_layer_norm(updates["layers"]) / per_layer_norm(
      state.params["layers"]
    )
  return new_state, metrics


def eval_step(model_def: ModelDef, state: TrainState, batch) -> jax.Array:
  """Mean loss of a held-out batch in eval mode (batchnorm uses its running averages)."""
  inputs, targets = batch
  logits, _, _ = model_def.apply(state.params, state.model_state, inputs, train=False)
  return cross_entropy(logits, targets)
