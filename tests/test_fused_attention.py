"""model.attention: jax.nn.dot_product_attention (XLA on CPU) equals the dense einsum path.

The fused path is what runs on a GPU (cuDNN flash attention); here its XLA implementation is
compared with the dense one (the default), in values and gradients, for every norm
placement, the parallel block and every variant that changes the attention branch (QK-norm with
and without RoPE, Sub-LN's inner norm, nGPT's unit q, k and sqrt(K) softmax scale), causal.
scripts/gpu_check.sh times both on a GPU.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import base
from resnorm_jax.model import attention as attention_lib
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from, resolve_attention
from resnorm_jax.model.initializers import InitRule
from resnorm_jax.train import train_step as ts

SHAPE = dict(vocab_size=16, num_layers=2, d_model=16, num_heads=2, d_ff=16, max_seq_len=16)
TOKENS = jnp.asarray(np.random.default_rng(0).integers(0, 16, size=(2, 9)), jnp.int32)


def _config(attention: str, **model):
  c = base.get_config()
  c.model.update(SHAPE)
  c.model.update(model)
  c.model.attention = attention
  return c


def _loss_and_grads(cfg):
  model_def = mdl.make_model_def(cfg)
  params, model_state = mdl.init_model(cfg, 0)

  def loss_fn(p):
    logits, _, _ = model_def.apply(p, model_state, TOKENS[:, :-1], train=True)
    return ts.cross_entropy(logits, TOKENS[:, 1:])

  forward = str(jax.make_jaxpr(loss_fn)(params))
  compiled = jax.jit(jax.value_and_grad(loss_fn)).lower(params).compile()
  loss, grads = compiled(params)
  return float(loss), grads, forward


# configs/ngpt_96L.py's model settings: unit q, k times s_qk and a softmax scale of sqrt(K)
# (not 1/sqrt(K)), which the fused path must be given as its `scale`.
NGPT = dict(
  residual="ngpt",
  norm_position="none",
  norm="none",
  position="rope",
  ffn_activation="swiglu",
  tie_embeddings=False,
  ngpt_alpha_init=0.05,
)
PLACEMENTS = {
  "post": dict(norm_position="post"),
  "pre": dict(norm_position="pre"),
  "peri": dict(norm_position="peri"),
  "pre-parallel": dict(norm_position="pre", block="parallel"),
  "post-rope-qk_norm": dict(norm_position="post", position="rope", qk_norm=True),
  # QK-norm with learned positions: the norms alone in front of the scores, no RoPE after.
  "pre-qk_norm": dict(norm_position="pre", qk_norm=True),
  # Sub-LN's norm sits between the context and the projection.
  "subln": dict(norm_position="subln"),
  "ngpt": NGPT,
}
# Each case's own attention parameters: absent, the case would not test what it names.
OWN_PARAMS = {
  "post-rope-qk_norm": ("q_norm", "k_norm"),
  "pre-qk_norm": ("q_norm", "k_norm"),
  "subln": ("sub_norm",),
  "ngpt": ("ngpt",),
}


# Post-LN in the fast tier (each case compiles both paths' gradients: 7-10 s here); Pre-LN and
# qk-norm in the slow tier; the other placements, nGPT's scale and rope in the long tier.
SLOW = ("pre", "pre-qk_norm")


def _tier(name: str):
  if name == "post":
    return name
  return pytest.param(name, marks=pytest.mark.slow if name in SLOW else pytest.mark.long)


@pytest.mark.parametrize("name", [_tier(n) for n in PLACEMENTS])
def test_fused_xla_equals_dense_in_loss_and_gradients(name):
  model = PLACEMENTS[name]
  dense = model_config_from(_config("dense", **model))
  fused = model_config_from(_config("fused", **model))  # on CPU: the XLA implementation
  assert (dense.attention, fused.attention) == ("dense", "xla")
  assert dataclasses.replace(fused, attention="dense") == dense
  loss_d, grads_d, jaxpr_d = _loss_and_grads(dense)
  loss_f, grads_f, jaxpr_f = _loss_and_grads(fused)
  # Two different programs: only the dense one has the custom-VJP softmax.
  assert "name=softmax" in jaxpr_d and "name=softmax" not in jaxpr_f
  np.testing.assert_allclose(loss_f, loss_d, rtol=1e-6)
  # two float32 programs that sum in different orders: 1 element in 256 differed by 4e-5
  # relative (1.4e-7 absolute) on one 2-core CPU; a skipped or wrong gradient is O(1)
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  jax.tree.map(close, grads_f, grads_d)
  # Every attention parameter gets a gradient: one the fused path skipped would differ.
  attn = grads_d["layers"]["attn"]
  assert set(OWN_PARAMS.get(name, ())) <= set(attn)
  assert min(float(np.abs(g).max()) for g in jax.tree.leaves(attn)) > 0


def _attention(implementation: str, dtype=jnp.float32):
  cfg = dataclasses.replace(model_config_from(_config("dense")), attention=implementation)
  with nnx.use_eager_sharding(False):
    return attention_lib.Attention(cfg, InitRule("xavier", 2, 16), nnx.Rngs(params=0))


def test_fused_attention_is_causal_and_matches_dense_per_position():
  x = jnp.asarray(np.random.default_rng(1).normal(size=(2, 7, 16)), jnp.float32)
  dense, fused = _attention("dense"), _attention("xla")
  y_d, y_f = np.asarray(dense(x)), np.asarray(fused(x))
  np.testing.assert_allclose(y_f, y_d, rtol=1e-5, atol=1e-6)
  x2 = x.at[:, 4:].set(-x[:, 4:])  # change the future: positions 0-3 must not move
  y2 = np.asarray(fused(x2))
  np.testing.assert_array_equal(y2[:, :4], y_f[:, :4])
  assert np.abs(y2[:, 4:] - y_f[:, 4:]).max() > 1e-3


def test_fused_attention_bfloat16_close_to_dense():
  """In bfloat16 the two differ by rounding only (the fused scores stay float32)."""
  x = jnp.asarray(np.random.default_rng(2).normal(size=(2, 7, 16)), jnp.bfloat16)
  y_d = np.asarray(_attention("dense")(x), np.float32)
  y_f = np.asarray(_attention("xla")(x), np.float32)
  assert y_f.dtype == np.float32 and np.all(np.isfinite(y_f))
  assert np.abs(y_f - y_d).max() < 0.03 * np.abs(y_d).max()


@pytest.mark.parametrize(
  "name, platform, dtype, head_dim, expected",
  [
    ("dense", "gpu", "bfloat16", 64, "dense"),
    ("fused", "cpu", "bfloat16", 64, "xla"),
    ("fused", "tpu", "bfloat16", 64, "xla"),
    ("fused", "gpu", "bfloat16", 64, "cudnn"),
    ("fused", "gpu", "float32", 64, "xla"),  # cuDNN flash attention: 16-bit inputs only
    ("fused", "gpu", "bfloat16", 12, "xla"),  # head dim not a multiple of 8
    ("xla", "gpu", "bfloat16", 64, "xla"),
    ("cudnn", "gpu", "bfloat16", 128, "cudnn"),
  ],
)
def test_resolve_attention(name, platform, dtype, head_dim, expected):
  assert resolve_attention(name, platform, dtype, head_dim) == expected


def test_cudnn_where_it_cannot_run_is_refused_naming_why():
  with pytest.raises(ValueError, match=r"model.attention='cudnn'.*platform='cpu'.*'fused'"):
    resolve_attention("cudnn", "cpu", "bfloat16", 64)
  with pytest.raises(ValueError, match=r"model.dtype='float32'"):
    resolve_attention("cudnn", "gpu", "float32", 64)
  with pytest.raises(ValueError, match=r"model.attention='flash'.*dense, fused, xla, cudnn"):
    model_config_from(_config("flash"))


def test_default_is_dense():
  assert base.get_config().model.attention == "dense"
  assert model_config_from(base.get_config()).attention == "dense"
