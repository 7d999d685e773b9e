"""Depth parametrizations: standard (sp), depth-muP and CompleteP as one knob.

`model.depth_param` names the branch exponent alpha: sp 0 (the default), depth_mup 1/2
(Yang et al. 2023, arXiv 2310.02244; Bordelon et al. 2023, arXiv 2309.16620), completep 1
(Dey et al. 2025, arXiv 2505.01618). With m_L = L / L_base (model.num_layers /
model.base_depth) and the width multiplier m_d = 1 (muP's width rules: width_param.py), the rules as
CompleteP's reference code applies them (EleutherAI/nanoGPT-mup, branch `completep`,
commit 6f8bc3b, model.py):

  every residual branch    x <- res(x, m_L^-alpha F)       Block.residual_scaling, l. 113-119
  hidden init              no depth factor                 l. 166-177 (GPT-2's 1/sqrt(2L)
                                                           dropped under muP)
  inside the layer stack   Adam lr eta m_L^(alpha-1),      configure_optimizers, l. 331-363:
  (matrices, norm gains    Adam eps eps m_L^-alpha         hidden weights, hidden LN, hidden
  and biases, gates)                                       biases all take depth_lr_scaling
  embeddings, final norm,  lr eta, eps eps                 the same lines (lr_scale 1.0)
  untied head
  weight decay             lambda on matrices (lambda m_d), none on vectors (the same lines)

The eps split (hidden groups only: their gradients carry the branch multiplier, so eps
shrinks with them; the embeddings' do not) follows the CompleteP paper's parametrization
table; the reference code's snapshot scales one eps for every group by m_d^-1 m_L^-alpha
(l. 335). With the default eps 1e-8 the two differ only where a gradient is near 1e-8.
The optimizer side is resnorm_jax/train/optimizers/scaling.py (`depth_scaling`).

Choices for this project's variants (alpha > 0):
  - The multiplier scales the whole branch output F (after a sandwich's output norm; Attn +
    FFN of a parallel block) before the residual variant combines it with the skip: Post-LN
    N(x + m F) (inside the norm: as a skip weight 1/m, DeepNorm's form), DeepNorm
    N(a x + m F), scaled x + s m F, ReZero/LayerScale/gated x + m g F with the learned gate g
    in the hidden lr group.
  - Depth-dependent constants of the base architecture are taken at L_base, so depth enters
    only through the parametrization: DeepNorm's alpha (2 L_base)^(1/4) and init beta
    (8 L_base)^(-1/4), Magneto's gamma, the scaled residual's 1/sqrt(2 L_base), the gpt2
    init's sigma/sqrt(2 L_base). An explicitly set constant stays as set.
  - Refused: no skip path (residual none: nothing to parametrize); a residual that learns
    the skip path itself (wraps the branch: hyper-connections' stream mixing in every layer)
    or sets its own scales at init or after each step (an init stage or an optimizer
    transformation: Admin's profiled skip weights, nGPT's unit sphere); SGD (the rules are
    Adam's; optimizers/scaling.py refuses it).
At L == L_base (m_L = 1) nothing changes: no multiplier, no optimizer change. sp is the
parametrization switched off (the reference code's depth_alpha_enabled=False), not alpha = 0
of the table, which would still divide the hidden lr by m_L: hence names, not a free alpha.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from resnorm_jax.config import keys
from resnorm_jax.model import variants

# name -> branch exponent alpha
DEPTH_PARAMS = {"sp": 0.0, "depth_mup": 0.5, "completep": 1.0}


def alpha(name: str) -> float:
  """The branch exponent of model.depth_param=name; ValueError naming the choices."""
  if name not in DEPTH_PARAMS:
    raise ValueError(
      f"model.depth_param={name!r} is not valid; valid values: {', '.join(DEPTH_PARAMS)}"
    )
  return DEPTH_PARAMS[name]


def depth_multiplier(num_layers: int, base_depth: int) -> float:
  """m_L = L / L_base."""
  return num_layers / base_depth


def _exponent(cfg: Any) -> tuple[float, float]:
  return alpha(cfg.depth_param), depth_multiplier(cfg.num_layers, cfg.base_depth)


def branch_multiplier(cfg: Any) -> float:
  """m_L^-alpha on every residual branch; exactly 1.0 under sp or at L == L_base."""
  a, m = _exponent(cfg)
  return 1.0 if a == 0 or m == 1 else m**-a


def hidden_lr_factor(cfg: Any) -> float:
  """Adam lr factor of every parameter inside the layer stack: m_L^(alpha-1) (sp: 1)."""
  a, m = _exponent(cfg)
  return 1.0 if a == 0 or m == 1 else m ** (a - 1)


def hidden_eps_factor(cfg: Any) -> float:
  """Adam eps factor of every parameter inside the layer stack: m_L^-alpha (sp: 1)."""
  return branch_multiplier(cfg)


def active(cfg: Any) -> bool:
  """Whether the parametrization changes anything (alpha > 0 and L != L_base)."""
  return branch_multiplier(cfg) != 1.0 or hidden_lr_factor(cfg) != 1.0


def constants_depth(name: str, num_layers: int, base_depth: int) -> int:
  """The depth the architecture's own depth constants (DeepNorm's alpha and beta, Magneto's
  gamma, the scaled residual's s, gpt2's init) are computed at: L_base under a depth
  parametrization, L under sp."""
  return num_layers if alpha(name) == 0 else base_depth


def _overrides(variant: Any, field: str) -> bool:
  """Whether the variant sets a hook `field` away from the registry's default (False for a
  hook the registry does not declare)."""
  defaults = {f.name: f.default for f in dataclasses.fields(type(variant))}
  return field in defaults and getattr(variant, field) is not defaults[field]


def refusal(cfg: Any) -> str | None:
  """Why the residual variant of `cfg` cannot take a depth parametrization; None if it can."""
  res = variants.residual(cfg.residual)
  if res.name == "none":
    return "has no skip path: there is no residual stream to parametrize"
  if res.wraps_branch:
    return "learns the skip path itself (stream mixing in every layer), which the rules leave fixed"
  if _overrides(res, "init_stage"):
    return "sets its own scales at init (its init stage), which the branch multiplier would undo"
  if _overrides(res, "optimizer_transform"):
    return "transforms its weights after each step (its optimizer transformation)"
  if _overrides(res, "layer_module"):
    return "keeps weights of its own per layer that combine the layers' outputs (a skip path)"
  return None


def check(cfg: Any) -> None:
  """ValueError on a bad model.depth_param / model.base_depth or a refused combination."""
  a = alpha(cfg.depth_param)
  b = cfg.base_depth
  if keys.positive_int(b):
    raise ValueError(f"model.base_depth={b!r} {keys.positive_int(b)}")
  why = None if a == 0 else refusal(cfg)
  if why:
    raise ValueError(
      f"model.depth_param={cfg.depth_param!r} with model.residual={cfg.residual!r}: the "
      f"residual {why}; use model.depth_param='sp' or another residual"
    )
