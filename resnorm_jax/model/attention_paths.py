"""Which feature hooks each attention path applies (model.attention, resolved: dense, xla,
cudnn, splash; model/attention.py runs them).

A feature on an attention hook (variants.HOOKS with attention=True) whose path does not apply
it is refused when the config is validated, naming the paths that do, never dropped:

  dense   the einsums form the logits: every hook
  xla     jax.nn.dot_product_attention forms no logits to map; the sink's column is one more
          key of zeros with the sink's logit as its bias (attention._sink_fused_context)
  cudnn   cuDNN's kernel keeps the sequence's length and mask: no sink column
  splash  the Pallas kernel caps its logits itself (attn_logits_soft_cap: the LogitCap's c)
          and takes the sinks; it forms no logits for another map
Every path gates the heads' output (attn_output): the gate follows the context, whatever
formed it.
"""

from __future__ import annotations

PATHS = {
  "dense": frozenset({"attn_logits", "attn_cap", "attn_sink", "attn_output"}),
  "xla": frozenset({"attn_sink", "attn_output"}),
  "cudnn": frozenset({"attn_output"}),
  "splash": frozenset({"attn_cap", "attn_sink", "attn_output"}),
}


def applying(hook: str) -> tuple[str, ...]:
  """The paths that apply `hook`, in PATHS' order."""
  return tuple(path for path, hooks in PATHS.items() if hook in hooks)
