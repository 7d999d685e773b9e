"""Logit softcapping (Gemma 2, Gemma Team 2024, arXiv 2408.00118): c * tanh(x / c) on the
attention logits and on the output logits.

Reference code: google-deepmind/gemma, gemma/modules.py (Attention: the logits of the scaled
queries and the keys, `tanh(logits / attn_logits_soft_cap) * attn_logits_soft_cap`, then the
mask) and gemma/transformer.py (the output logits, `tanh(logits / final_logit_softcap) *
final_logit_softcap`, the last step before the loss); its Gemma 2 configs set
`attn_logits_soft_cap=50.0` and `final_logit_softcap=30.0`.

  model.attn_softcap   c on attention's scaled logits q.k / sqrt(K), after any other map on
                       them (the attn_cap hook), before the causal mask (0: off, the
                       default). The dense path and the splash kernel (model.attention=splash,
                       its attn_logits_soft_cap on the same scaled logits) apply it;
                       jax.nn.dot_product_attention (model.attention=xla, cudnn, fused) forms no
                       logits to cap, so it is refused there (model/attention_paths.py). The
                       dense path's `attn_logit_max` is then the capped one.
  model.final_softcap  c on the model's output logits, after every other factor on them
                       (muP's 1/m_d, nGPT's s_z) and last of the out_logits hook's chain (0:
                       off, the default); every attention path.

Both are elementwise, so they hold on every placement, residual and norm: the attention and
the head are the same module whichever the placement.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from resnorm_jax.config.keys import nonnegative
from resnorm_jax.model.variants.hooks import Column, Feature, Key


class SoftCap(nnx.Module):
  """c * tanh(x / c), in float32 (the input's dtype out)."""

  def __init__(self, cap: float):
    self.cap = float(cap)

  def __call__(self, x: jax.Array) -> jax.Array:
    y = self.cap * jnp.tanh(x.astype(jnp.float32) / self.cap)
    return y.astype(x.dtype)


def _hooks(cfg) -> tuple[str, ...]:
  """Attention's cap when model.attn_softcap is set, the output's when model.final_softcap is."""
  return ("attn_cap",) * bool(cfg.attn_softcap) + ("out_logits",) * bool(cfg.final_softcap)


VARIANTS = (
  Feature(
    "softcap",
    "logit softcapping, c tanh(x / c) on attention's and the output's logits (Gemma 2)",
    keys={
      "attn_softcap": Key(
        0.0,
        "c of c tanh(x / c) on attention's logits, >= 0 (0: off; Gemma 2: 50)",
        nonnegative,
        hparam=Column("attn_softcap", 152),
      ),
      "final_softcap": Key(
        0.0,
        "c of c tanh(x / c) on the output logits, >= 0 (0: off; Gemma 2: 30)",
        nonnegative,
        hparam=Column("final_softcap", 153),
      ),
    },
    on=lambda cfg: bool(cfg.attn_softcap or cfg.final_softcap),
    attn_cap=lambda cfg: SoftCap(cfg.attn_softcap) if cfg.attn_softcap else None,
    out_logits=lambda cfg: SoftCap(cfg.final_softcap) if cfg.final_softcap else None,
    acts_on=_hooks,
    # Last on the output logits' chain: the cap bounds what reaches the loss.
    order=100,
    turned_on={"attn_softcap": 50.0, "final_softcap": 30.0},
  ),
)
