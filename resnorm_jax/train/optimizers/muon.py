"""Muon (Jordan et al. 2024, code KellerJordan/Muon) on the hidden matrices, Adam on every
other leaf (its Adam group: embeddings, head, norms' and residuals' vectors and scalars), as
KellerJordan/Muon's MuonWithAuxAdam does, in one params-shaped state."""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.contrib

from resnorm_jax.train.optimizers import masks

# opt.muon_scale: Moonlight's RMS matching (Liu et al. 2025, arXiv 2502.16982) or
# KellerJordan/Muon's shape factor (`muon_step`).
MUON_SCALES = ("moonlight", "kellerjordan")
MOONLIGHT_RMS = 0.2  # Moonlight's target update RMS, AdamW's typical one


def _muon_dims(tree: Any) -> Any:
  """Each hidden matrix [L, fan_in, fan_out...]: axis 0 (the stacked layers) a batch axis, so
  Newton-Schulz runs on each layer's [fan_in, fan_out] matrix (optax vmaps over it)."""
  dims = lambda x: optax.contrib.MuonDimensionNumbers(1, tuple(range(2, jnp.ndim(x))))
  return jax.tree.map(dims, tree)


def muon_shape_factor(scale: str, fan_in: int, fan_out: int) -> float:
  """The factor on a layer's orthogonalized update: moonlight 0.2 sqrt(max(fan_in, fan_out))
  (Liu et al. 2025: its RMS that of AdamW's update) or kellerjordan sqrt(max(1, fan_out /
  fan_in)) (KellerJordan/Muon, muon.py's `update *= max(1, grad.size(-2) / grad.size(-1))**0.5`
  on torch's [out, in] weights)."""
  if scale == "moonlight":
    return MOONLIGHT_RMS * math.sqrt(max(fan_in, fan_out))
  return math.sqrt(max(1.0, fan_out / fan_in))


def _scale_by_muon_shape(scale: str) -> optax.GradientTransformation:
  def factor(x):
    return x * muon_shape_factor(scale, x.shape[1], math.prod(x.shape[2:]))

  return optax.stateless(lambda updates, params=None: jax.tree.map(factor, updates))


def muon_step(opt_cfg: Any) -> optax.GradientTransformation:
  """Muon's update of the hidden matrices (before the lr): optax.contrib.scale_by_muon (Nesterov
  momentum opt.muon_momentum, opt.muon_ns_steps quintic Newton-Schulz iterations with
  KellerJordan's coefficients (3.4445, -4.7750, 2.0315) after a Frobenius normalization), one
  layer's matrix at a time, then `muon_shape_factor`. optax's momentum is bias-corrected;
  KellerJordan/Muon's is not (the same direction at step 1; the difference fades over ~1 /
  (1 - momentum) steps)."""
  return optax.chain(
    optax.contrib.scale_by_muon(
      ns_steps=opt_cfg.muon_ns_steps,
      beta=opt_cfg.muon_momentum,
      nesterov=True,
      weight_dimension_numbers=_muon_dims,
    ),
    _scale_by_muon_shape(opt_cfg.muon_scale),
  )


class MuonAdamState(NamedTuple):
  """One count; `mu` the momentum of every leaf (Muon's on the hidden matrices, Adam's first
  moment elsewhere), `nu` Adam's second moment (zeros, unused, on the hidden matrices): trees
  shaped like the params, as sharding.state_shardings maps them."""

  count: jax.Array
  mu: Any
  nu: Any


def _pick(tree: Any, mask: list[bool], want: bool, treedef: Any) -> Any:
  """`tree` with the leaves whose mask is not `want` replaced by optax's MaskedNode."""
  masked = optax.MaskedNode()
  leaves = treedef.flatten_up_to(tree)
  leaves = [x if m == want else masked for x, m in zip(leaves, mask, strict=True)]
  return treedef.unflatten(leaves)


def _merge(muon: Any, adam: Any, mask: list[bool], treedef: Any) -> Any:
  """The leaves of `muon` where the mask is set, of `adam` elsewhere."""
  is_masked = lambda x: isinstance(x, optax.MaskedNode)
  a = jax.tree.leaves(muon, is_leaf=is_masked)
  b = jax.tree.leaves(adam, is_leaf=is_masked)
  return treedef.unflatten([x if m else y for x, y, m in zip(a, b, mask, strict=True)])


def muon_with_adam(opt_cfg: Any) -> optax.GradientTransformation:
  """`muon_step` on the hidden matrices (`masks.hidden_matrix_mask`), optax.scale_by_adam
  (opt.b1, b2, eps) on every other leaf, both before the lr. One state of params-shaped trees
  (MuonAdamState) rather than optax.partition's masked ones, which the run's sharding of
  the optimizer state (optax.tree_map_params) cannot map."""
  muon = muon_step(opt_cfg)
  adam = optax.scale_by_adam(b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps)
  ns_coeffs = muon.init({})[0].ns_coeffs

  def init(params):
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)
    return MuonAdamState(jnp.zeros([], jnp.int32), zeros(), zeros())

  def update(updates, state, params=None):
    del params
    treedef = jax.tree.structure(updates)
    mask = jax.tree.leaves(masks.hidden_matrix_mask(updates))
    pick = lambda tree, want: _pick(tree, mask, want, treedef)
    muon_state = (optax.contrib.MuonState(state.count, pick(state.mu, True), ns_coeffs), ())
    m_step, (m_state, _) = muon.update(pick(updates, True), muon_state)
    adam_state = optax.ScaleByAdamState(state.count, pick(state.mu, False), pick(state.nu, False))
    a_step, a_state = adam.update(pick(updates, False), adam_state)
    step = _merge(m_step, a_step, mask, treedef)
    mu = _merge(m_state.mu, a_state.mu, mask, treedef)
    nu = _merge(state.nu, a_state.nu, mask, treedef)
    return step, MuonAdamState(m_state.count, mu, nu)

  return optax.GradientTransformation(init, update)
