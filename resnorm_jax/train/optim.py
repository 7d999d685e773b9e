"""Optimizer from config: learning-rate schedule, clipping, weight decay on matrices only, and
the per-group Adam lr, eps and weight decay of a depth parametrization
(resnorm_jax/model/depth_param.py) and of muP's width rules (resnorm_jax/model/width_param.py).

opt.name: adam, adamw (optax's), sgd, and

  muon        Muon (Jordan et al. 2024, code KellerJordan/Muon; `muon_step`): the hidden
              matrices (inside the layer stack, 2-D per layer: attention's q, k, v, out and
              gate, the FFN's) step along their Nesterov momentum orthogonalized by 5
              Newton-Schulz iterations, one layer's matrix at a time; every other leaf
              (embeddings, head, norms' and residuals' vectors and scalars) takes Adam with
              opt.b1, b2, eps, as KellerJordan/Muon's MuonWithAuxAdam does.
  adam_atan2  Adam-atan2 (Everett et al. 2024, arXiv 2407.05872; `scale_by_adam_atan2`):
              Adam's m_hat / (sqrt(v_hat) + eps) replaced by a atan2(m_hat, b sqrt(v_hat)),
              a = 4/pi, b = 1: no eps.

Both take their weight decay decoupled, as adamw (lr * wd * p on the matrices).
"""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.contrib

from resnorm_jax.model import depth_param, variants, width_param
from resnorm_jax.train import param_groups

OPTIMIZERS = ("adam", "adamw", "sgd", "muon", "adam_atan2")
# opt.muon_scale: Moonlight's RMS matching (Liu et al. 2025, arXiv 2502.16982) or
# KellerJordan/Muon's shape factor (`muon_step`).
MUON_SCALES = ("moonlight", "kellerjordan")
MOONLIGHT_RMS = 0.2  # Moonlight's target update RMS, AdamW's typical one
# Adam-atan2's constants (Everett et al. 2024, section 4.3's Adam-atan2: a = 4/pi, b = 1):
# a atan2(1, b) = 1 where m_hat = sqrt(v_hat), Adam's step for a constant gradient.
ATAN2_A = 4 / math.pi  # 1.2732395
ATAN2_B = 1.0
SCHEDULES = ("constant", "inverse_sqrt", "cosine", "linear")
# Only matrices are decayed. Norm gains/biases, biases and residual scalars are not: decaying
# a LayerNorm scale or a ReZero alpha towards 0 changes the architecture under study.
DECAYED_NAMES = frozenset({"kernel", "embedding"})


def _require(ok: bool, key: str, value: Any, expected: str) -> None:
  """Raises ValueError naming the config key and its value when `ok` is false."""
  if not ok:
    raise ValueError(f"{key}={value!r}: expected {expected}")


def _validate(opt_cfg: Any) -> None:
  """Checks every opt.* key before anything is built."""
  _require(opt_cfg.name in OPTIMIZERS, "opt.name", opt_cfg.name, f"one of {', '.join(OPTIMIZERS)}")
  _require(
    opt_cfg.schedule in SCHEDULES,
    "opt.schedule",
    opt_cfg.schedule,
    f"one of {', '.join(SCHEDULES)}",
  )
  _require(opt_cfg.lr > 0, "opt.lr", opt_cfg.lr, "> 0")
  _require(
    int(opt_cfg.warmup_steps) == opt_cfg.warmup_steps and opt_cfg.warmup_steps >= 0,
    "opt.warmup_steps",
    opt_cfg.warmup_steps,
    "an integer >= 0",
  )
  _require(0 <= opt_cfg.min_lr_ratio <= 1, "opt.min_lr_ratio", opt_cfg.min_lr_ratio, "in [0, 1]")
  _require(opt_cfg.clip_norm >= 0, "opt.clip_norm", opt_cfg.clip_norm, ">= 0 (0: off)")
  _require(opt_cfg.weight_decay >= 0, "opt.weight_decay", opt_cfg.weight_decay, ">= 0")
  _require(0 <= opt_cfg.b1 < 1, "opt.b1", opt_cfg.b1, "in [0, 1)")
  _require(0 <= opt_cfg.b2 < 1, "opt.b2", opt_cfg.b2, "in [0, 1)")
  _require(opt_cfg.eps >= 0, "opt.eps", opt_cfg.eps, ">= 0")
  if opt_cfg.name == "muon":
    _require(
      opt_cfg.muon_scale in MUON_SCALES,
      "opt.muon_scale",
      opt_cfg.muon_scale,
      f"one of {', '.join(MUON_SCALES)}",
    )
    _require(
      0 <= opt_cfg.muon_momentum < 1, "opt.muon_momentum", opt_cfg.muon_momentum, "in [0, 1)"
    )
    steps = opt_cfg.muon_ns_steps
    ok = isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1
    _require(ok, "opt.muon_ns_steps", steps, "an integer >= 1")
    ratio = opt_cfg.muon_adam_lr_ratio
    _require(ratio > 0, "opt.muon_adam_lr_ratio", ratio, "> 0")
  param_groups.parse(getattr(opt_cfg, "freeze", "") or "")


def make_schedule(
  opt_cfg: Any, total_steps: int, lr: float | jax.Array | None = None
) -> optax.Schedule:
  """Learning rate per step: linear warmup to `opt.lr`, then the named schedule.

  `lr` (default `opt.lr`) replaces the peak and may be a traced scalar: the schedule's shape
  stays the config's, so one program can train several peak lrs at once (jax.vmap over lr).
  """
  _validate(opt_cfg)
  lr = float(opt_cfg.lr) if lr is None else lr
  warmup = int(opt_cfg.warmup_steps)
  name = opt_cfg.schedule
  if name in ("cosine", "linear"):
    _require(
      total_steps > warmup,
      "train.steps",
      total_steps,
      f"> opt.warmup_steps={warmup} for the {name} schedule",
    )
  # The decay schedules below count t from the end of warmup: absolute step s = t + warmup.
  if name == "constant":
    decay = optax.constant_schedule(lr)
  elif name == "inverse_sqrt":
    # Vaswani 2017 / Xiong 2020: lr * sqrt(W / (s + 1)); without warmup W = 1.
    w = max(warmup, 1)
    decay = lambda t: lr * jnp.sqrt(w / (jnp.asarray(t, jnp.float32) + warmup + 1.0))
  elif name == "cosine":
    decay = optax.cosine_decay_schedule(lr, total_steps - warmup, alpha=opt_cfg.min_lr_ratio)
  else:
    decay = optax.linear_schedule(lr, lr * opt_cfg.min_lr_ratio, total_steps - warmup)
  if warmup == 0:
    return decay
  # lr * (s + 1) / W: step 0 already trains at lr / W, never at 0 (optax's warmup schedules
  # start at init_value=0, which wastes the first step: nanoGPT's issue #443); lr at s = W - 1.
  ramp = optax.linear_schedule(lr / warmup, lr, warmup - 1)
  return optax.join_schedules([ramp, decay], [warmup])


def _leaf_name(path: tuple[Any, ...]) -> str | None:
  """A leaf's own key: the last dict key or attribute (nnx Variables add a `.value`)."""
  for entry in reversed(path):
    if isinstance(entry, jax.tree_util.DictKey) and isinstance(entry.key, str):
      return entry.key
    if isinstance(entry, jax.tree_util.GetAttrKey) and entry.name != "value":
      return entry.name
  return None


def decay_mask(params: Any) -> Any:
  """Same tree of bools: True exactly for leaves named `kernel` or `embedding`."""
  return jax.tree_util.tree_map_with_path(lambda path, _: _leaf_name(path) in DECAYED_NAMES, params)


def scale_hidden(factor: float) -> optax.GradientTransformation:
  """Multiplies the updates of the parameters inside the layer stack by `factor`."""
  return optax.masked(optax.scale(factor), lambda p: param_groups.mask(p, ["hidden"]))


def hidden_matrix_mask(params: Any) -> Any:
  """Same tree of bools: True for muP's hidden matrices, the leaves inside the layer stack
  with two or more axes per layer (their leading axis is the stacked layer axis)."""
  hidden = param_groups.mask(params, ["hidden"])
  return jax.tree.map(lambda p, h: bool(h) and jnp.ndim(p) >= 3, params, hidden)


def _hidden_decayed_mask(params: Any) -> Any:
  return jax.tree.map(lambda a, b: a and b, hidden_matrix_mask(params), decay_mask(params))


class ScaleByAdamAtan2State(NamedTuple):
  count: jax.Array
  mu: Any
  nu: Any


def scale_by_adam_atan2(
  b1: float, b2: float, a: float = ATAN2_A, b: float = ATAN2_B
) -> optax.GradientTransformation:
  """Adam-atan2 (Everett et al. 2024, arXiv 2407.05872): a * atan2(m_hat, b * sqrt(v_hat)),
  m_hat and v_hat Adam's bias-corrected moments (decays b1, b2). No eps: atan2 is bounded by
  a pi / 2 and defined at v_hat = 0, and the step is invariant to the gradients' scale."""

  def init(params):
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)
    return ScaleByAdamAtan2State(jnp.zeros([], jnp.int32), zeros(), zeros())

  def update(updates, state, params=None):
    del params
    mu = optax.tree.update_moment(updates, state.mu, b1, 1)
    nu = optax.tree.update_moment_per_elem_norm(updates, state.nu, b2, 2)
    count = optax.safe_increment(state.count)
    m_hat = optax.tree.bias_correction(mu, b1, count)
    v_hat = optax.tree.bias_correction(nu, b2, count)
    step = jax.tree.map(lambda m, v: a * jnp.arctan2(m, b * jnp.sqrt(v)), m_hat, v_hat)
    return step, ScaleByAdamAtan2State(count, mu, nu)

  return optax.GradientTransformation(init, update)


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
  """`muon_step` on the hidden matrices (`hidden_matrix_mask`), optax.scale_by_adam (opt.b1,
  b2, eps) on every other leaf, both before the lr. One state of params-shaped trees
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
    mask = jax.tree.leaves(hidden_matrix_mask(updates))
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


def _adam_group(params: Any) -> Any:
  return jax.tree.map(lambda m: not m, hidden_matrix_mask(params))


def _core(opt_cfg: Any, schedule: optax.Schedule, wd: float, factor: float) -> list:
  """muon and adam_atan2: the step, the decoupled decay, the lr (muon: the Adam group's times
  opt.muon_adam_lr_ratio, its decay with it)."""
  if opt_cfg.name == "adam_atan2":
    step = scale_by_adam_atan2(opt_cfg.b1, opt_cfg.b2)
  else:
    step = muon_with_adam(opt_cfg)
  parts = [step, *(_decay(wd, factor) if wd > 0 else [])]
  if opt_cfg.name == "muon" and opt_cfg.muon_adam_lr_ratio != 1.0:
    parts.append(optax.masked(optax.scale(float(opt_cfg.muon_adam_lr_ratio)), _adam_group))
  return [*parts, optax.scale_by_learning_rate(schedule)]


def width_scaling(
  opt_cfg: Any, model_def: Any
) -> tuple[optax.GradientTransformation | None, optax.GradientTransformation | None, float]:
  """(before Adam, after Adam, decay factor): muP's eps m_d^-1 on every group (the gradients
  times m_d before Adam, as depth_scaling does for m_L^-alpha), the hidden matrices' lr
  m_d^-1 after Adam, and their weight decay factor m_d. (None, None, 1.0) under sp, at
  d_model == base_width or without a model_def."""
  if model_def is None:
    return None, None, 1.0
  cfg = model_def.cfg
  width_param.check_optimizer(opt_cfg.name, cfg)
  if not width_param.active(cfg):
    return None, None, 1.0
  pre = optax.scale(1.0 / width_param.eps_factor(cfg))
  post = optax.masked(optax.scale(width_param.hidden_matrix_lr_factor(cfg)), hidden_matrix_mask)
  return pre, post, width_param.hidden_matrix_decay_factor(cfg)


def _decay(wd: float, factor: float) -> list[optax.GradientTransformation]:
  """Weight decay wd on the decayed leaves, wd * factor on the decayed hidden matrices."""
  if factor == 1.0:
    return [optax.add_decayed_weights(wd, mask=decay_mask)]
  rest = lambda p: jax.tree.map(lambda a, b: a and not b, decay_mask(p), _hidden_decayed_mask(p))
  return [
    optax.add_decayed_weights(wd, mask=rest),
    optax.add_decayed_weights(wd * factor, mask=_hidden_decayed_mask),
  ]


def depth_scaling(
  opt_cfg: Any, model_def: Any
) -> tuple[optax.GradientTransformation | None, optax.GradientTransformation | None]:
  """(before Adam, after Adam): the depth parametrization's hidden-group eps and lr.

  Adam's step m / (sqrt(v) + eps) on gradients multiplied by c equals the step with eps / c
  on the gradients themselves, so eps * m_L^-alpha is Adam with eps on the hidden gradients
  times m_L^alpha (one optimizer state, the same structure as sp's); the lr factor
  m_L^(alpha-1) scales Adam's output (with AdamW's decay: lr * lambda per group, as a
  per-group lr does). (None, None) under sp, at L == base_depth or without a model_def.
  The same two transformations serve muon and adam_atan2: their steps (Muon's orthogonalized
  momentum, atan2(m, sqrt(v))) are invariant to the gradients' scale, the property the lr
  rule's derivation takes from Adam, so the hidden lr factor applies as it is and the eps
  factor reaches Muon's Adam group only.
  """
  if model_def is None or not depth_param.active(model_def.cfg):
    return None, None
  cfg = model_def.cfg
  if opt_cfg.name not in ("adam", "adamw", "muon", "adam_atan2"):
    raise ValueError(
      f"opt.name={opt_cfg.name!r} with model.depth_param={cfg.depth_param!r}: the depth "
      "parametrization's per-group rules are Adam's; use opt.name=adam, adamw, muon or adam_atan2"
    )
  pre = scale_hidden(1.0 / depth_param.hidden_eps_factor(cfg))
  return pre, scale_hidden(depth_param.hidden_lr_factor(cfg))


def group_table(opt_cfg: Any, mcfg: Any, params: Any) -> list[dict[str, Any]]:
  """One row per parameter leaf: its group, the branch multiplier it sits behind, its peak
  Adam lr, eps and weight decay under both the depth and the width parametrization, and
  its initial mean and std (`params` at init). `kind`: matrix (a hidden matrix, muP's
  width factors on lr and decay) or vector (inside the stack) or outside."""
  hidden = param_groups.mask(params, ["hidden"])
  matrices = hidden_matrix_mask(params)
  decayed = decay_mask(params)
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


def make_optimizer(
  opt_cfg: Any,
  total_steps: int,
  model_def: Any = None,
  lr: float | jax.Array | None = None,
  schedule: optax.Schedule | None = None,
) -> optax.GradientTransformation:
  """Clip (optional) -> weight decay on matrices -> adam | adamw | sgd | muon | adam_atan2 at
  the schedule's lr.

  `model_def` (model_def.ModelDef): the residual variant's transformation is chained after
  the step (nGPT: the weights put back on the unit sphere); such a model needs it passed.
  `lr`: the peak lr instead of `opt.lr`, possibly traced (`make_schedule`). The optimizer's
  state does not depend on it, so states made with any lr fit. `schedule`: make_schedule's,
  when the caller has made it already (run_setup.build, once per run).
  A depth parametrization (model_def.cfg.depth_param) scales the hidden group's eps and lr
  around Adam (`depth_scaling`), muP (model_def.cfg.width_param) every eps, the hidden
  matrices' lr and their weight decay (`width_scaling`); they need `model_def` passed.
  """
  if schedule is None:
    schedule = make_schedule(opt_cfg, total_steps, lr)  # validates opt_cfg
  wd = float(opt_cfg.weight_decay)
  depth_pre, depth_post = depth_scaling(opt_cfg, model_def)
  width_pre, width_post, decay_factor = width_scaling(opt_cfg, model_def)
  pre = [t for t in (depth_pre, width_pre) if t is not None]
  parts = []
  if opt_cfg.clip_norm > 0:
    parts.append(optax.clip_by_global_norm(float(opt_cfg.clip_norm)))
  if opt_cfg.name == "adamw":
    parts += pre
    # Decoupled (Loshchilov & Hutter): optax scales the decay by the scheduled lr.
    if decay_factor == 1.0:
      adamw = optax.adamw(
        schedule,
        b1=opt_cfg.b1,
        b2=opt_cfg.b2,
        eps=opt_cfg.eps,
        weight_decay=wd,
        mask=decay_mask,
      )
    else:  # optax.adamw's chain with muP's decay wd * m_d on the hidden matrices
      adamw = optax.chain(
        optax.scale_by_adam(b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps),
        *_decay(wd, decay_factor),
        optax.scale_by_learning_rate(schedule),
      )
    parts.append(adamw)
  elif opt_cfg.name in ("muon", "adam_atan2"):
    parts += pre
    parts += _core(opt_cfg, schedule, wd, decay_factor)
  else:
    if wd > 0:
      # Coupled L2: the decay joins the gradient and goes through Adam's normalization.
      parts += _decay(wd, decay_factor)
    if opt_cfg.name == "adam":
      parts += pre
      parts.append(optax.adam(schedule, b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps))
    else:
      parts.append(optax.sgd(schedule))  # plain SGD: b1, b2, eps are Adam's
  parts += [t for t in (depth_post, width_post) if t is not None]
  extra = None if model_def is None else variants.residual(model_def.cfg.residual)
  extra = None if extra is None else extra.optimizer_transform(model_def)
  if extra is not None:
    # Before the freeze mask: a frozen matrix (unit norm since init) then stays exactly still.
    parts.append(extra)
  frozen = param_groups.parse(getattr(opt_cfg, "freeze", "") or "")
  if frozen:
    # Last in the chain: the frozen leaves' updates are zero whatever came before (their
    # gradients still count in the clipping norm, as they would for an unfrozen run).
    parts.append(optax.masked(optax.set_to_zero(), lambda p: param_groups.mask(p, frozen)))
  return optax.chain(*parts)
