"""Causal multi-head self-attention with optional QK-norm and RoPE.

Legend: B batch, T query time, S key time, D model width, H heads, K head dim.
Softmax is computed in float32 whatever the compute dtype.

Implementations of the same formula (`model.attention`, resolved in config_types):
`dense` (this file's einsums: the [B, H, T, S] probabilities are materialised and kept for
the backward pass), `jax.nn.dot_product_attention` with `implementation='xla'` (the same
materialised formula, written by JAX) or `'cudnn'` (cuDNN flash attention on a GPU: the
probabilities are never stored, bfloat16/float16 only), and `splash` (JAX's Pallas splash
attention on a TPU, model/splash.py: no probabilities stored either).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.model import splash, variants, width_param
from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.model.layers import Dense
from resnorm_jax.model.norms import RMSNorm


def rope_tables(seq_len: int, head_dim: int, base: float = 10000.0):
  """(sin, cos) of shape [T, K/2] for rotary position embeddings."""
  inv = base ** (-jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)
  ang = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv[None, :]
  return jnp.sin(ang), jnp.cos(ang)


def apply_rope(
  x_BxTxHxK: jax.Array, sin_TxK2: jax.Array, cos_TxK2: jax.Array, time_axis: int = 1
) -> jax.Array:
  """Rotates channel pairs (first half, second half) by position-dependent angles; the
  positions along `time_axis` (2 for a heads-major [B, H, T, K])."""
  x = x_BxTxHxK.astype(jnp.float32)
  x1, x2 = jnp.split(x, 2, axis=-1)
  shape = [1] * x.ndim
  shape[time_axis], shape[-1] = sin_TxK2.shape
  s, c = sin_TxK2.reshape(shape), cos_TxK2.reshape(shape)
  out = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
  return out.astype(x_BxTxHxK.dtype)


@jax.custom_vjp
def softmax(x: jax.Array) -> jax.Array:
  """jax.nn.softmax over the last axis; the backward pass needs only the output.

  Autodiff of the formula saves exp(x), the sums and their powers as well; saving only the
  probabilities cuts the attention memory kept per layer. Same forward values.
  """
  return jax.nn.softmax(x, axis=-1)


def _softmax_fwd(x):
  y = jax.nn.softmax(x, axis=-1)
  return y, y


def _softmax_bwd(y, g):
  return (y * (g - (g * y).sum(-1, keepdims=True)),)


softmax.defvjp(_softmax_fwd, _softmax_bwd)


def attention_shape(probs_BxHxTxS: jax.Array) -> dict[str, jax.Array]:
  """How a layer's attention is spread, from its probabilities (float32, rows over the keys,
  masked keys at 0), averaged over batch, heads and queries; no gradient:

  attn_entropy    -sum_s p log p (nats): 0 when each query looks at one key
  attn_sink_mass  the probability on the first token, the attention sink (Xiao et al. 2023)
  """
  p = jax.lax.stop_gradient(probs_BxHxTxS.astype(jnp.float32))
  plogp = jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0)
  return {
    "attn_entropy": -jnp.mean(jnp.sum(plogp, axis=-1)),
    "attn_sink_mass": jnp.mean(p[..., 0]),
  }


class Attention(nnx.Module):
  """softmax(Q K^T / sqrt(K) + causal mask) V (1/K under muP), then the output projection."""

  def __init__(self, cfg: ModelConfig, rule: InitRule, rngs: nnx.Rngs):
    d = cfg.d_model
    self.num_heads = cfg.num_heads
    self.head_dim = cfg.head_dim
    self.implementation = cfg.attention  # dense | xla | cudnn | splash
    self.q = Dense(rngs.params(), rule, "q", (d, d), ("embed", "heads"))
    self.k = Dense(rngs.params(), rule, "k", (d, d), ("embed", "heads"))
    self.v = Dense(rngs.params(), rule, "v", (d, d), ("embed", "heads"))
    self.out = Dense(rngs.params(), rule, "attn_out", (d, d), ("heads", "embed"))
    # model.attn_out_scale: a fixed factor on the branch's output (1.0: none, no op traced).
    self.out_scale = float(cfg.attn_out_scale)
    placement = variants.placement(cfg.norm_position)
    if cfg.qk_norm:  # RMSNorm over each head's channels (OLMo-2 / Gemma 3 style)
      self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps, axis=None)
      self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps, axis=None)
    elif placement.qkv_norm:  # the model's norm over each head's q, k (v below): HybridNorm
      self.q_norm, self.k_norm = (
        variants.config_norm(cfg, cfg.head_dim, axis=None) for _ in range(2)
      )
    else:
      self.q_norm = self.k_norm = None
    self.v_norm = variants.config_norm(cfg, cfg.head_dim, axis=None) if placement.qkv_norm else None
    # Sub-LN (Magneto): a norm on the heads' concatenated output, before the projection.
    self.sub_norm = variants.config_norm(cfg, d) if placement.sub_norm else None
    # A residual variant's q, k transformation (after RoPE) and softmax scale: nGPT's unit q,
    # k per head times s_qk and sqrt(K). The attribute keeps its name: checkpoints' path.
    combine = variants.residual(cfg.residual)
    self.ngpt = combine.qk_scale(cfg)
    # muP (model.width_param=mup): 1/K instead (width_param.py), on every implementation.
    self.softmax_scale = width_param.softmax_scale(cfg, combine.softmax_scale(cfg.head_dim))
    # A residual variant's mixing of the values with another layer's (value residuals).
    self.value_mix = combine.value_mix(cfg)
    # The features' modules (variants.Feature, one per hook; None: not turned on): maps on
    # the scaled logits, then a cap on them (softcapping), a learned logit per head in the
    # softmax's denominator (sinks), a gate on the heads' output from the attention's input
    # (gated attention). The config was refused if this path does not apply one of them
    # (model/attention_paths.py): none is dropped here.
    self.logit_map = variants.feature_module(cfg, "attn_logits")
    # a LogitCap: the dense path calls it, the splash kernel takes its `cap`
    self.softcap = variants.feature_module(cfg, "attn_cap")
    self.sink = variants.feature_module(cfg, "attn_sink")
    self.gate = variants.feature_module(cfg, "attn_output", rule, rngs)
    # The splash kernel reads [B, H, T, K]: its path projects q, k, v straight to that layout
    # and the output from it, no transposes (`_heads_major`; docs/tpu_compile/README.md,
    # "Splash's layout"), unless a module that takes [B, T, H, K] or [B, T, D] between the
    # projections is on (or HybridNorm's norms: a norm variant may reduce over the rows).
    on_BxTxH = (self.ngpt, self.value_mix, self.gate, self.sub_norm, self.v_norm)
    self.heads_major = self.implementation == "splash" and all(m is None for m in on_BxTxH)

  def __call__(
    self, x_BxTxD: jax.Array, rope=None, shared: dict | None = None, *, stats: dict | None = None
  ) -> jax.Array:
    """`shared`: the dict the residual variant carries across layers (block.py), or None.

    `stats`: the layer's statistics dict; the dense path adds `attn_logit_max`, the largest
    scaled logit q.k * scale over batch, heads and causal positions (the fused paths never
    form the logits, so they add nothing)."""
    if self.heads_major:
      return self._scaled(self._heads_major(x_BxTxD, rope))
    b, t, d = x_BxTxD.shape
    split = lambda y: y.reshape(b, t, self.num_heads, self.head_dim)
    q, k, v = split(self.q(x_BxTxD)), split(self.k(x_BxTxD)), split(self.v(x_BxTxD))
    if self.q_norm is not None:
      q, k = self.q_norm(q), self.k_norm(k)
    if self.v_norm is not None:
      v = self.v_norm(v)
    if self.value_mix is not None:
      v = self.value_mix(v, shared)
    if rope is not None:
      sin, cos = rope
      q, k = apply_rope(q, sin[:t], cos[:t]), apply_rope(k, sin[:t], cos[:t])
    if self.ngpt is not None:
      q, k = self.ngpt(q, k)
    if self.implementation == "splash":  # the kernel takes the cap and the sinks itself
      sinks = None if self.sink is None else self.sink()
      ctx_BxTxHxK = splash.attention(
        q, k, v, self.softmax_scale, sinks_H=sinks, softcap=self._kernel_cap()
      )
    elif self.implementation != "dense" and self.sink is not None:
      ctx_BxTxHxK = self._sink_fused_context(q, k, v)
    elif self.implementation != "dense":
      # Scores accumulate in float32 (the XLA path asks for a float32 result; cuDNN's
      # kernels accumulate in float32); the causal mask is built in.
      ctx_BxTxHxK = jax.nn.dot_product_attention(
        q, k, v, scale=self.softmax_scale, is_causal=True, implementation=self.implementation
      )
    else:
      ctx_BxTxHxK = self._dense_context(q, k, v, stats)
    if self.gate is not None:
      ctx_BxTxHxK = self.gate(ctx_BxTxHxK, x_BxTxD, stats=stats)
    # One tail for every implementation: Sub-LN's norm is part of the model, not of a path.
    ctx_BxTxD = ctx_BxTxHxK.reshape(b, t, d)
    if self.sub_norm is not None:
      ctx_BxTxD = self.sub_norm(ctx_BxTxD)
    return self._scaled(self.out(ctx_BxTxD))

  def _kernel_cap(self) -> float | None:
    """The attn_cap hook's c for a kernel that caps its logits itself (splash)."""
    return None if self.softcap is None else self.softcap.cap

  def _scaled(self, y_BxTxD: jax.Array) -> jax.Array:
    """The branch's output times model.attn_out_scale (nothing traced at 1.0)."""
    return (
      y_BxTxD if self.out_scale == 1.0 else y_BxTxD * jnp.asarray(self.out_scale, y_BxTxD.dtype)
    )

  def _heads_major(self, x_BxTxD: jax.Array, rope) -> jax.Array:
    """The splash path on the kernel's layout: q, k, v = x W as [B, H, T, K] (the kernel [D, H,
    K] in one einsum each), their norms and RoPE on that layout, the output projected from it.
    The softmax scale multiplies q's kernel (it commutes with RoPE) where no norm on q follows;
    after a norm it multiplies q, in float32 as splash.attention does."""
    d, h, kd = x_BxTxD.shape[-1], self.num_heads, self.head_dim
    fold = self.q_norm is None

    def project(dense: Dense, scale: float = 1.0) -> jax.Array:
      w_DxHxK = (dense.kernel[...] * scale).astype(x_BxTxD.dtype).reshape(d, h, kd)
      return jnp.einsum("btd,dhk->bhtk", x_BxTxD, w_DxHxK)

    q = project(self.q, self.softmax_scale if fold else 1.0)
    k, v = project(self.k), project(self.v)
    if self.q_norm is not None:
      q, k = self.q_norm(q), self.k_norm(k)
    if rope is not None:
      t = q.shape[2]
      sin, cos = rope[0][:t], rope[1][:t]
      q, k = apply_rope(q, sin, cos, time_axis=2), apply_rope(k, sin, cos, time_axis=2)
    if not fold:
      q = (q.astype(jnp.float32) * self.softmax_scale).astype(q.dtype)
    sinks = None if self.sink is None else self.sink()
    ctx_BxHxTxK = splash.heads_major(q, k, v, sinks_H=sinks, softcap=self._kernel_cap())
    w_HxKxD = self.out.kernel[...].astype(ctx_BxHxTxK.dtype).reshape(h, kd, d)
    return jnp.einsum("bhtk,hkd->btd", ctx_BxHxTxK, w_HxKxD)

  def _dense_context(self, q, k, v, stats: dict | None = None) -> jax.Array:
    """softmax(Q K^T * scale + causal mask) V as einsums: [B, T, H, K]."""
    t = q.shape[1]
    # Heads first, [B, H, T, K], before the two batched products: with [B, T, H, K] operands
    # XLA:CPU lays the AV product out as (P V)^T, a slow transposed matmul (measured in
    # docs/benchmarks.md, section 1b).
    q, k, v = (jnp.swapaxes(y, 1, 2) for y in (q, k, v))
    scores_BxHxTxS = jnp.einsum("bhtk,bhsk->bhts", q, k).astype(jnp.float32)
    scores_BxHxTxS = scores_BxHxTxS * self.softmax_scale
    if self.logit_map is not None:
      scores_BxHxTxS = self.logit_map(scores_BxHxTxS)
    if self.softcap is not None:
      scores_BxHxTxS = self.softcap(scores_BxHxTxS)
    causal_TxS = jnp.tril(jnp.ones((t, t), dtype=bool))
    scores_BxHxTxS = jnp.where(causal_TxS, scores_BxHxTxS, jnp.finfo(jnp.float32).min)
    if stats is not None:  # attention-logit growth (Dehghani et al. 2023): one reduction of
      # the logits already formed, so every run can log it
      stats["attn_logit_max"] = jax.lax.stop_gradient(jnp.max(scores_BxHxTxS))
    if self.sink is None:
      probs = softmax(scores_BxHxTxS)
    else:  # a column of the sink's logit per head; its probability is dropped
      b, h = scores_BxHxTxS.shape[:2]
      column = jnp.broadcast_to(self.sink().astype(jnp.float32)[None, :, None, None], (b, h, t, 1))
      probs = softmax(jnp.concatenate([scores_BxHxTxS, column], -1))[..., :t]
    if stats is not None:
      stats.update(attention_shape(probs))
    return jnp.swapaxes(jnp.einsum("bhts,bhsk->bhtk", probs.astype(v.dtype), v), 1, 2)

  def _sink_fused_context(self, q, k, v) -> jax.Array:
    """jax.nn.dot_product_attention with the sink's column: one more key and value of zeros
    (logit 0) with a bias of the sink's logit per head, never masked. [B, T, H, K]."""
    b, t, h, kd = k.shape
    zeros = jnp.zeros((b, 1, h, kd), k.dtype)
    k, v = jnp.concatenate([k, zeros], 1), jnp.concatenate([v, zeros.astype(v.dtype)], 1)
    sink = self.sink().astype(jnp.float32)[None, :, None, None]
    bias = jnp.concatenate([jnp.zeros((1, h, 1, t), jnp.float32), sink], -1)
    mask = jnp.concatenate([jnp.tril(jnp.ones((t, t), bool)), jnp.ones((t, 1), bool)], 1)
    return jax.nn.dot_product_attention(
      q,
      k,
      v,
      bias.astype(q.dtype),
      mask[None, None],
      scale=self.softmax_scale,
      implementation=self.implementation,
    )
