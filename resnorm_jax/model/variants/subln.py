"""Sub-LN (Magneto, Wang 2022, arXiv 2210.06423): Pre-LN plus a norm inside each branch.

x = res(x, F(N(x))) where F has a norm before its output projection: on the heads'
concatenated output in attention and on the hidden units in the MLP (attention.py, mlp.py
build it when the placement asks for `sub_norm`). Its init is model.init=magneto
(initializers.py: gain sqrt(ln 2N) on v, attn out, FFN in/out).
"""

from __future__ import annotations

from resnorm_jax.model.variants.hooks import Placement
from resnorm_jax.model.variants.standard import normalize_input

VARIANTS = (
  Placement(
    "subln",
    "Sub-LN (Magneto): Pre-LN plus a norm before each branch's output projection",
    pre_like=True,
    sub_norm=True,
    branch_input=normalize_input,
  ),
)
