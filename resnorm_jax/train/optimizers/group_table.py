"""What the depth and width parametrizations do to each parameter, as a table: its group, the
branch multiplier it sits behind, its peak Adam lr, eps and weight decay, its init statistics
(a run prints it and keeps it in config.json as `depth_param_table`)."""

from typing import Any

import jax
import jax.numpy as jnp

from resnorm_jax.model import depth_param, width_param
from resnorm_jax.train import param_groups
from resnorm_jax.train.optimizers import masks


def group_table(opt_cfg: Any, mcfg: Any, params: Any) -> list[dict[str, Any]]:
  """One row per parameter leaf: its group, the branch multiplier it sits behind, its peak
  Adam lr, eps and weight decay under both the depth and the width parametrization, and
  its initial mean and std (`params` at init). `kind`: matrix (a hidden matrix, muP's
  width factors on lr and decay) or vector (inside the stack) or outside."""
  hidden = param_groups.mask(params, ["hidden"])
  matrices = masks.hidden_matrix_mask(params)
  decayed = masks.decay_mask(params)
  mult, lr_f, eps_f = (
    depth_param.branch_multiplier(mcfg),
    depth_param.hidden_lr_factor(mcfg),
    depth_param.hidden_eps_factor(mcfg),
  )
  w_lr, w_decay, w_eps = (
    width_param.hidden_matrix_lr_factor(mcfg),
    width_param.hidden_matrix_decay_factor(mcfg),
    width_param.eps_factor(mcfg),
  )
  rows = []
  flat = jax.tree_util.tree_leaves_with_path(params)
  flags = jax.tree_util.tree_leaves(hidden)
  kinds = jax.tree_util.tree_leaves(matrices)
  decays = jax.tree_util.tree_leaves(decayed)
  for (path, leaf), inside, matrix, decay in zip(flat, flags, kinds, decays, strict=True):
    a = jnp.asarray(leaf, jnp.float32)
    lr = float(opt_cfg.lr) * (lr_f if inside else 1.0) * (w_lr if matrix else 1.0)
    wd = float(opt_cfg.weight_decay) * (w_decay if matrix else 1.0) if decay else 0.0
    rows.append(
      {
        "param": ".".join(param_groups.segments(jax.tree_util.keystr(path))),
        "group": "hidden" if inside else "outside",
        "kind": ("matrix" if matrix else "vector") if inside else "outside",
        "branch_multiplier": mult if inside else 1.0,
        "lr": lr,
        "eps": float(opt_cfg.eps) * (eps_f if inside else 1.0) * w_eps,
        "weight_decay": wd,
        "init_mean": float(jnp.mean(a)),
        "init_std": float(jnp.std(a)),
      }
    )
  return rows


def format_group_table(mcfg: Any, rows: list[dict[str, Any]]) -> str:
  """The table as text: a header line with both parametrizations, then one line per leaf."""
  m = depth_param.depth_multiplier(mcfg.num_layers, mcfg.base_depth)
  head = (
    f"depth_param={mcfg.depth_param} (alpha {depth_param.alpha(mcfg.depth_param):g}), "
    f"{mcfg.num_layers} layers against base_depth={mcfg.base_depth} (m_L {m:g}); "
    f"{width_param.describe(mcfg)}"
  )
  cols = (
    "group",
    "kind",
    "branch_multiplier",
    "lr",
    "eps",
    "weight_decay",
    "init_mean",
    "init_std",
  )
  width = max(len(r["param"]) for r in rows)
  lines = [head, f"{'param':<{width}}  " + "  ".join(f"{c:>17}" for c in cols)]
  for r in rows:
    cells = [f"{r[c]:>17}" for c in cols[:2]] + [f"{r[c]:>17.6g}" for c in cols[2:]]
    lines.append(f"{r['param']:<{width}}  " + "  ".join(cells))
  return "\n".join(lines)
