"""Normalization functions over the hidden dimension: the modules of the built-in norms
layernorm, rmsnorm, batchnorm, dyt and none. Every value of model.norm, these included, is a
variants.Norm (the built-in ones in variants/standard.py): variants.config_norm builds one.

Legend: B batch, T time, D hidden. Every norm computes in float32 whatever the activation
dtype and returns the input dtype. Parameters carry logical axis names ("embed").
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx


def rms(x: jax.Array) -> jax.Array:
  """Root mean square over every element, in float32 (the per-layer statistics)."""
  return jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32))))


def _param(value: jax.Array, *axes: str | None) -> nnx.Param:
  return nnx.Param(value, out_sharding=axes)


# LayerNorm and RMSNorm over the last axis with hand-written backward passes. Autodiff of the
# formulas keeps several [.., D] intermediates for the backward pass; these keep only the
# input x (which exists anyway: in the model it is the residual stream) and the per-token
# statistics [.., 1], and recompute the normalized x. The forward values are the same
# operations. Fewer stored intermediates: less memory and less memory traffic in the deep
# steps (scripts/bench_norms.py; measured in docs/benchmarks.md, section 4).


def _sum_leading(x: jax.Array) -> jax.Array:
  return x.sum(tuple(range(x.ndim - 1)))


def _moments(x: jax.Array, eps: float) -> tuple[jax.Array, jax.Array]:
  mean = x.mean(-1, keepdims=True)
  var = jnp.square(x - mean).mean(-1, keepdims=True)
  return mean, jax.lax.rsqrt(var + eps)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array, eps: float) -> jax.Array:
  """scale * (x - mean) / sqrt(var + eps) + bias over the last axis (float32 in and out)."""
  mean, rstd = _moments(x, eps)
  return (x - mean) * rstd * scale + bias


def _layer_norm_fwd(x, scale, bias, eps):
  mean, rstd = _moments(x, eps)
  return (x - mean) * rstd * scale + bias, (x, mean, rstd, scale)


def _layer_norm_bwd(eps, res, dout):
  del eps
  x, mean, rstd, scale = res
  y = (x - mean) * rstd
  g = dout * scale
  dx = rstd * (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True))
  return dx, _sum_leading(dout * y), _sum_leading(dout)


layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)


def _rms_rstd(x: jax.Array, eps: float) -> jax.Array:
  return jax.lax.rsqrt(jnp.square(x).mean(-1, keepdims=True) + eps)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
  """scale * x / sqrt(mean(x^2) + eps) over the last axis (float32 in and out)."""
  return x * _rms_rstd(x, eps) * scale


def _rms_norm_fwd(x, scale, eps):
  rstd = _rms_rstd(x, eps)
  return x * rstd * scale, (x, rstd, scale)


def _rms_norm_bwd(eps, res, dout):
  del eps
  x, rstd, scale = res
  y = x * rstd
  g = dout * scale
  dx = rstd * (g - y * (g * y).mean(-1, keepdims=True))
  return dx, _sum_leading(dout * y)


rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


class LayerNorm(nnx.Module):
  """gamma * (x - mean) / sqrt(var + eps) + beta, per token."""

  def __init__(self, dim: int, eps: float, axis: str | None = "embed"):
    self.eps = eps
    self.scale = _param(jnp.ones((dim,), jnp.float32), axis)
    self.bias = _param(jnp.zeros((dim,), jnp.float32), axis)

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    x = x_BxTxD.astype(jnp.float32)
    return layer_norm(x, self.scale[...], self.bias[...], self.eps).astype(x_BxTxD.dtype)


class RMSNorm(nnx.Module):
  """gamma * x / sqrt(mean(x^2) + eps): eps inside the root, no centering, no bias."""

  def __init__(self, dim: int, eps: float, axis: str | None = "embed"):
    self.eps = eps
    self.scale = _param(jnp.ones((dim,), jnp.float32), axis)

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    x = x_BxTxD.astype(jnp.float32)
    return rms_norm(x, self.scale[...], self.eps).astype(x_BxTxD.dtype)


class BatchNorm(nnx.Module):
  """Statistics over batch and time in training, running averages in evaluation.

  In a causal LM the batch statistics mix positions: in training a token's output depends
  on later tokens (a leak the model can exploit). Eval mode uses the running averages and
  is causal. The running averages are nnx.BatchStat (non-trainable) and the train step
  carries their update out of the model.
  """

  def __init__(self, dim: int, eps: float, momentum: float):
    self.eps = eps
    self.momentum = momentum
    self.use_running_average = False
    self.scale = _param(jnp.ones((dim,), jnp.float32), "embed")
    self.bias = _param(jnp.zeros((dim,), jnp.float32), "embed")
    self.mean = nnx.BatchStat(jnp.zeros((dim,), jnp.float32), out_sharding=("embed",))
    self.var = nnx.BatchStat(jnp.ones((dim,), jnp.float32), out_sharding=("embed",))

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    x = x_BxTxD.astype(jnp.float32)
    if self.use_running_average:
      mean, var = self.mean[...], self.var[...]
    else:
      axes = tuple(range(x.ndim - 1))
      mean = x.mean(axes)
      var = jnp.square(x - mean).mean(axes)
      m = self.momentum
      self.mean[...] = m * self.mean[...] + (1 - m) * jax.lax.stop_gradient(mean)
      self.var[...] = m * self.var[...] + (1 - m) * jax.lax.stop_gradient(var)
    y = (x - mean) * jax.lax.rsqrt(var + self.eps)
    return (y * self.scale[...] + self.bias[...]).astype(x_BxTxD.dtype)


class DyT(nnx.Module):
  """Dynamic tanh (Zhu 2025): gamma * tanh(alpha * x) + beta, alpha a learnable scalar."""

  def __init__(self, dim: int, alpha_init: float):
    self.alpha = _param(jnp.full((), alpha_init, jnp.float32))
    self.scale = _param(jnp.ones((dim,), jnp.float32), "embed")
    self.bias = _param(jnp.zeros((dim,), jnp.float32), "embed")

  def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
    x = x_BxTxD.astype(jnp.float32)
    y = jnp.tanh(self.alpha[...] * x) * self.scale[...] + self.bias[...]
    return y.astype(x_BxTxD.dtype)


class Identity(nnx.Module):
  """norm = none."""

  def __call__(self, x: jax.Array) -> jax.Array:
    return x
