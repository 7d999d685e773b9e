"""Named groups of parameters, by their path in the parameter tree.

One table used by the optimizer (`opt.freeze`: groups that never move) and the diagnostics
(grad_flow's resets). Paths are `jax.tree_util.keystr` strings such as
"['layers']['out_norms']['ffn']['bias']": a norm is any module whose name holds "norm"
(per-layer `norms`, the sandwich placement's `out_norms`, `final_norm`, q/k norms).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax

_SEGMENT = re.compile(r"\['([^']+)'\]|\.([A-Za-z_]\w*)")


def segments(path: str) -> list[str]:
  """ "['layers']['norms']['attn']['bias']" -> ['layers', 'norms', 'attn', 'bias']."""
  return [a or b for a, b in _SEGMENT.findall(path)]


def _in_norm(path: str) -> bool:
  return any("norm" in s for s in segments(path)[:-1])


GROUPS: dict[str, Callable[[str], bool]] = {
  "norm_bias": lambda p: _in_norm(p) and segments(p)[-1] == "bias",
  "norm_scale": lambda p: _in_norm(p) and segments(p)[-1] != "bias",
  "norm": _in_norm,
  "residual": lambda p: "residuals" in segments(p),
  "embed": lambda p: segments(p)[0] in ("embed", "pos_embed"),
  "attn": lambda p: segments(p)[:2] == ["layers", "attn"],
  "mlp": lambda p: segments(p)[:2] == ["layers", "mlp"],
  "outside_layers": lambda p: segments(p)[0] != "layers",
  # Everything inside the layer stack: a depth parametrization's hidden lr and eps group.
  "hidden": lambda p: segments(p)[0] == "layers",
}


def check(groups: Sequence[str], key: str = "parameter group") -> None:
  """ValueError naming the first unknown group and the valid ones."""
  for group in groups:
    if group not in GROUPS:
      raise ValueError(f"{key} {group!r}: expected one of {', '.join(GROUPS)}")


def parse(text: str, key: str = "opt.freeze") -> list[str]:
  """'norm, embed' -> ['norm', 'embed'], each checked; '' -> []."""
  groups = [g.strip() for g in text.split(",") if g.strip()]
  check(groups, f"{key}={text!r}: group")
  return groups


def mask(params: Any, groups: Sequence[str]) -> Any:
  """Same tree of bools: True for the leaves of any of `groups`."""
  check(groups)
  tests = [GROUPS[g] for g in groups]
  return jax.tree_util.tree_map_with_path(
    lambda path, _: any(t(jax.tree_util.keystr(path)) for t in tests), params
  )
