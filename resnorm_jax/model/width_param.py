"""Width parametrization: standard (sp) or muP, the width half of CompleteP's table.

`model.width_param` is sp (the default: nothing changes) or mup (Yang et al. 2022, arXiv
2203.03466, in the form CompleteP uses: Dey et al. 2025, arXiv 2505.01618). With the width
multiplier m_d = d_model / base_width (model.base_width: the width the lr is tuned at), and
m_L, alpha of the depth parametrization (depth_param.py; m_L^... = 1 under sp), the rules as
CompleteP's reference code applies them (EleutherAI/nanoGPT-mup, branch `completep`, commit
6f8bc3b, model.py):

  hidden matrices (every     init std sigma m_d^-1/2        l. 168-175 (c_attn, c_fc, c_proj:
  kernel in the layer stack)                                init_std / sqrt(width mult))
                             Adam lr eta m_d^-1 m_L^(a-1)   l. 331-332, 347-351
                             weight decay lambda m_d        l. 349 (wd / width_lr_scaling)
  hidden vectors (norm       Adam lr eta m_L^(a-1), no      l. 342-346, 352-356
  gains, biases, gates)      weight decay
  embeddings, final norm,    lr eta; lambda on the tables   l. 337-341, 357-361
  head                       (as now)
  Adam eps                   hidden eps m_d^-1 m_L^-a,      l. 335 (one eps for every group:
                             outside eps m_d^-1             eps m_d^-1 m_L^-a)
  output logits              x (1/m_d)                      l. 223-227 (applied to the final
                                                            hidden state before lm_head)
  attention scores           1/d_head, not 1/sqrt(d_head)   l. 63-68 (whenever muP is on)

m_L's eps factor stays on the hidden groups only (the CompleteP paper's parametrization
table; depth_param.py); the width factor m_d^-1 is on every group, since the 1/m_d on the
logits scales every gradient by it (the reference code's l. 335 for every group). The
reference applies the eps factor and the decay lambda m_d only in its CompleteP branch (its
muP-only branch, l. 364-393, keeps eps and lambda); here they follow width alone, so muP
without a depth parametrization takes eps m_d^-1 and lambda m_d too. At m_d = 1 every factor is
1, and what remains of mup is the attention scale 1/d_head: mup at base_width == d_model
differs from sp in that alone (tests/test_width_param.py).

Hidden matrices are the leaves inside the layer stack with two or more axes per layer
(attention q/k/v/out, MLP in/gate/out, the gated residual's W_g); every other leaf inside
the stack is a hidden vector. Weight decay follows the decayed leaves (the optimizer's
masks.decay_mask: kernels and embedding tables): a decayed hidden matrix takes lambda m_d, so
its lr times its decay, eta lambda m_L^(a-1), does not depend on width (W_g is not decayed, as
under sp).

Choices for this project (the reference code is GPT-2 with a fixed init std and a tied head):
  - Init rules with a fixed std (normal, gpt2) take std m_d^-1/2 on hidden matrices; gpt2's
    1/sqrt(2L) on the output projections stays (at L_base under a depth parametrization;
    the reference drops it under muP). The fan-in rules (xavier, deepnorm, magneto) compute
    their fans at the base width (fan / m_d for the width axes), so that sigma is their
    std at base_width, then multiply hidden matrices by m_d^-1/2: with every width axis
    proportional to d_model that is xavier at the real width, sqrt(2 / (fan_in + fan_out));
    the head's std is its base-width std. DeepNorm's beta and Magneto's gamma still multiply.
    Their embedding std d^-1/2 and input scale sqrt(d) are taken at base_width (as depth
    constants at L_base): the input multiplier then does not grow with width.
  - Tied and untied heads alike: init and lr unchanged, eps m_d^-1, the logits x 1/m_d. The
    position table is an embedding (lr eta, eps m_d^-1).
  - qk_norm and HybridNorm's q/k norms: the scores still take 1/d_head (normalized q and k
    that align give q.k of order d_head, the muP argument); their gains are hidden vectors.
  - Every attention implementation (dense, xla, cudnn) takes the same scale: it is the
    `scale` argument of jax.nn.dot_product_attention.
  - Refused (ValueError, one line): a residual that wraps the branch (hyper-connections, mHC:
    their mixing weights map the width to a few streams, output-like weights outside this
    table), and one with its own attention or logit scale or weight projection (nGPT: unit
    vectors, sqrt(d_head) scores, s_z; its sphere replaces the init and lr rules); SGD (the
    rules are Adam's; optimizers/scaling.py refuses it).
The optimizer side is resnorm_jax/train/optimizers/ (scaling.py's `width_scaling`,
group_table.py's `group_table`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from resnorm_jax.config import keys

WIDTH_PARAMS = ("sp", "mup")


def check_name(name: Any) -> str:
  """model.width_param=name, or ValueError naming the choices."""
  if name not in WIDTH_PARAMS:
    raise ValueError(
      f"model.width_param={name!r} is not valid; valid values: {', '.join(WIDTH_PARAMS)}"
    )
  return name


def check_base_width(value: Any) -> int:
  """model.base_width, or ValueError: a positive integer."""
  complaint = keys.positive_int(value)
  if complaint:
    raise ValueError(f"model.base_width={value!r} {complaint} (a d_model)")
  return value


def is_mup(cfg: Any) -> bool:
  return cfg.width_param == "mup"


def width_multiplier(cfg: Any) -> float:
  """m_d = d_model / base_width under mup; 1.0 under sp (base_width ignored)."""
  return cfg.d_model / cfg.base_width if is_mup(cfg) else 1.0


def active(cfg: Any) -> bool:
  """Whether the width rules change the init, the optimizer or the logits (m_d != 1)."""
  return width_multiplier(cfg) != 1.0


def constants_width(cfg: Any) -> int:
  """The width the init's own width constants (the fan-in rules' embedding std and input
  scale) are computed at: base_width under mup, d_model under sp."""
  return cfg.base_width if is_mup(cfg) else cfg.d_model


def hidden_init_factor(cfg: Any) -> float:
  """m_d^-1/2 on the std of hidden matrices (1.0 under sp or at m_d = 1)."""
  m = width_multiplier(cfg)
  return 1.0 if m == 1.0 else m**-0.5


def hidden_matrix_lr_factor(cfg: Any) -> float:
  """m_d^-1 on the Adam lr of hidden matrices (beside depth_param's m_L^(alpha-1))."""
  m = width_multiplier(cfg)
  return 1.0 if m == 1.0 else 1.0 / m


def hidden_matrix_decay_factor(cfg: Any) -> float:
  """m_d on the weight decay of hidden matrices: lr x decay independent of width."""
  return width_multiplier(cfg)


def eps_factor(cfg: Any) -> float:
  """m_d^-1 on every group's Adam eps (beside depth_param's m_L^-alpha on hidden groups)."""
  m = width_multiplier(cfg)
  return 1.0 if m == 1.0 else 1.0 / m


def output_multiplier(cfg: Any) -> float:
  """1/m_d on the output logits (1.0 under sp or at m_d = 1)."""
  m = width_multiplier(cfg)
  return 1.0 if m == 1.0 else 1.0 / m


def softmax_scale(cfg: Any, default: float) -> float:
  """The attention scores' factor: 1/d_head under mup (at every m_d), else `default`."""
  return 1.0 / cfg.head_dim if is_mup(cfg) else default


def _overrides(variant: Any, field: str) -> bool:
  defaults = {f.name: f.default for f in dataclasses.fields(type(variant))}
  return field in defaults and getattr(variant, field) is not defaults[field]


def refusal(res: Any) -> str | None:
  """Why the residual variant `res` (variants.Residual) cannot take muP's width rules; None if
  it can. (The caller looks it up: the registry's standard.py imports this module.)"""
  if res.wraps_branch:
    return "mixes streams with weights that map the width to a few streams, outside the table"
  own = [f for f in ("softmax_scale", "logit_scale", "optimizer_transform") if _overrides(res, f)]
  if own:
    return f"sets its own scales ({', '.join(own)}), which the width rules would replace"
  return None


def check(cfg: Any, res: Any) -> None:
  """ValueError on a bad model.width_param / model.base_width or a refused combination."""
  check_name(cfg.width_param)
  check_base_width(cfg.base_width)
  why = refusal(res) if is_mup(cfg) else None
  if why:
    raise ValueError(
      f"model.width_param={cfg.width_param!r} with model.residual={cfg.residual!r}: the "
      f"residual {why}; use model.width_param='sp' or another residual"
    )


def check_optimizer(opt_name: str, cfg: Any) -> None:
  """SGD or Muon under mup with m_d != 1: ValueError (the per-group rules are Adam's, which
  Adam-atan2 shares: its step is Adam's, bounded, with no eps to scale; Muon's width rule is
  its own shape factor on the orthogonalized update, opt.muon_scale)."""
  if active(cfg) and opt_name not in ("adam", "adamw", "adam_atan2"):
    raise ValueError(
      f"opt.name={opt_name!r} with model.width_param={cfg.width_param!r}: muP's per-group "
      "rules are Adam's; use opt.name=adam, adamw or adam_atan2"
    )


def describe(cfg: Any) -> str:
  """'width_param=mup, d_model 64 against base_width=32 (m_d 2)' for the table's header."""
  m = cfg.d_model / cfg.base_width
  tail = "" if is_mup(cfg) else ", not applied"
  return (
    f"width_param={cfg.width_param}, d_model {cfg.d_model} against base_width={cfg.base_width} "
    f"(m_d {m:g}{tail})"
  )
