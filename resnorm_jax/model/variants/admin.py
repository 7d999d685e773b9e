"""Admin (Liu et al. 2020, arXiv 2004.08249): Post-LN with omega profiled at init.

Each residual sub-layer i (attention and FFN in turn, layer by layer; one per parallel
block) computes x_i = LN(omega_i ⊙ x_(i-1) + F_i(x_(i-1))), omega_i a learnable per-channel
vector (`model.residual = admin`, with Post-LN's placement). Its init is the paper's two
stages, run on the freshly built model (the variant's init stage):

  1. profiling: one forward pass of the model at init with omega = 1 (plain Post-LN),
     recording v_j = Var[F_j(x_(j-1))] of every branch output and v_in = Var[x_0] of the
     stack's input;
  2. initialization: omega_0 = 1 and omega_i = sqrt(v_in + sum_(j<i) v_j) for i >= 1,
     every channel of omega_i set to that value.

The paper writes omega_i = sqrt(sum_(j<i) Var[f_j(x_(j-1))]) with the input counted among
the f_j; the official code (Transformer-Clinic, `adaptive-profiling`) starts its running
ratio at 1 and updates it as ratio^2 <- Var[x_(i-1) * omega_i] + Var[F_i]: the same sum,
since every x_(i-1) after the first is a LayerNorm output of unit variance. Choices here:
- One forward at omega = 1 for all sub-layers; the official code sets each omega during
  the same pass, so later branches see the Admin-initialized stream. Their inputs are unit-
  variance LayerNorm outputs either way, so the variances differ little.
- Var as the second moment about the expected mean, 0 at init (zero-mean weights, no
  biases): the mean square over batch, time and channels, i.e. the `<branch>_branch_rms`
  the model already reports, squared. Subtracting the sample mean instead would only
  subtract noise (it moved omega by up to 4% on a tiny test model's 256 elements).
- A parallel block's branch is Attn + FFN; its variance is taken as the sum of the two.
- The profiling batch is uniform random tokens drawn from the init key (4 sequences of
  model.max_seq_len): at init the embedding rows are i.i.d., so the profile depends on the
  data only through repeated tokens, and the init stays a pure function of the seed (sharded
  init, eval_shape and resume need no data). The run records the omegas in config.json
  (resolved_model.admin_omega).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from resnorm_jax.model.variants.hooks import Residual

PROFILE_BATCH = 4  # sequences of the profiling pass


class AdminResidual(nnx.Module):
  """omega ⊙ skip + branch; omega per channel, 1 until the init stage sets it."""

  def __init__(self, dim: int):
    self.omega = nnx.Param(jnp.ones((dim,), jnp.float32), out_sharding=("embed",))

  def __call__(self, skip: jax.Array, branch: jax.Array) -> jax.Array:
    return self.omega[...].astype(skip.dtype) * skip + branch


def omega_from_variances(v_in: jax.Array, v_S: jax.Array) -> jax.Array:
  """omega_0 = 1, omega_i = sqrt(v_in + sum_(j<i) v_j) for the S sub-layers in order."""
  before_S = v_in + jnp.cumsum(v_S) - v_S  # v_in + the variances of the earlier branches
  return jnp.where(jnp.arange(v_S.shape[0]) == 0, 1.0, jnp.sqrt(before_S))


def _slots(model) -> tuple[str, ...]:
  return ("block",) if model.cfg.block == "parallel" else ("attn", "ffn")


def profile(model, tokens_BxT: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(v_in, v [L, slots]): the input's and each branch output's variance at init."""
  v_in = jnp.mean(jnp.square(model.embed_tokens(tokens_BxT).astype(jnp.float32)))
  _, stats = model(tokens_BxT)
  layer_stats = stats["layers"]
  a, f = (jnp.square(layer_stats[f"{k}_branch_rms"]) for k in ("attn", "ffn"))
  v_LxS = (a + f)[:, None] if model.cfg.block == "parallel" else jnp.stack([a, f], axis=1)
  return v_in, v_LxS


def initialize_omega(model, key: jax.Array) -> None:
  """Admin's two stages on a freshly built model (its omegas still 1), in place."""
  cfg = model.cfg
  tokens = jax.random.randint(key, (PROFILE_BATCH, cfg.max_seq_len), 0, cfg.vocab_size)
  v_in, v_LxS = profile(model, tokens)
  omega_LxS = omega_from_variances(v_in, v_LxS.reshape(-1)).reshape(v_LxS.shape)
  for s, slot in enumerate(_slots(model)):
    param = model.layers.residuals[slot].omega
    param[...] = jnp.broadcast_to(omega_LxS[:, s, None], param.shape).astype(param.dtype)


def omega_table(params: Any, parallel: bool) -> list[list[float]]:
  """[L][slots] omegas (channel 0) from a params dict: what config.json records."""
  slots = ("block",) if parallel else ("attn", "ffn")
  res = params["layers"]["residuals"]
  cols = [np.asarray(res[s]["omega"])[:, 0] for s in slots]
  return np.stack(cols, axis=1).round(6).tolist()


def resolved(mcfg, init_params: Callable[[], Any]) -> dict:
  """{'admin_omega': [L][slots]} from `init_params()` (jitted): config.json records it."""
  params = jax.jit(init_params)()
  return {"admin_omega": omega_table(params, mcfg.block == "parallel")}


VARIANTS = (
  Residual(
    "admin",
    "Admin: x_i = omega_i * x_(i-1) + F_i, omega profiled at init (with Post-LN)",
    make=lambda cfg, **_: AdminResidual(cfg.d_model),
    init_stage=lambda model, rngs: initialize_omega(model, rngs.params()),
    record=resolved,
  ),
)
