"""Why gated attention moves Post-LN's edge: the gate's controls at the 12-layer lr 1e-3 cell
(configs/sweeps/stabilizers.py's CONTROLS, docs/stabilizers/cells.csv) against plain Post-LN
(docs/survival/cells.csv), and the conclusion the controls allow, decided by a rule in code
(`verdict`), never typed. The section of docs/stabilizers/README.md between its markers and
the README's row are written from the same cells. No JAX here.
"""

from __future__ import annotations

import os

from resnorm_jax.analysis.claims.docs_data import ROOT, Claim, optional
from resnorm_jax.analysis.claims.edges import survival_cells
from resnorm_jax.analysis.stats import clopper_pearson, fisher_exact
from resnorm_jax.analysis.style import lr_label

CELLS = "docs/stabilizers/cells.csv"
README = os.path.join(ROOT, "docs", "stabilizers", "README.md")
BEGIN = "<!-- gate controls: written by scripts/claims.py from docs/stabilizers/cells.csv -->"
END = "<!-- end of gate controls -->"
DEPTH, LR = 12, 1e-3
# (cell variant, what it is, what it takes away from the gate), in the table's order
ARMS = (
  ("postnorm", "plain Post-LN", "no gate, the whole branch"),
  ("postnorm-attngate", "gated attention (elementwise)", "the gate: ~0.5 at init, learned"),
  ("postnorm-attnscale", "attention branch x 0.5, no gate", "the halving alone"),
  ("postnorm-gatebias", "gate from ~0.93 (bias 3.0)", "the gate without the halving"),
  ("postnorm-gatefrozen", "gate frozen at its init", "the halving by a gate that never learns"),
  ("postnorm-gatehead", "headwise gate", "one gate per head"),
)
SHORT = dict(zip([v for v, *_ in ARMS], ("plain", "gate", "branch x 0.5", "gate from ~0.93",
                                          "frozen gate", "headwise"), strict=True))  # fmt: skip
ALPHA = 0.05  # the two-sided Fisher test's level the verdict reads
MIN_SEEDS = 4  # a cell of fewer seeds is a screen: the verdict does not read it


def _cell(variant: str) -> dict[str, str] | None:
  source = survival_cells() if variant == "postnorm" else optional(CELLS)
  for c in source:
    if c["variant"] == variant and int(c["num_layers"]) == DEPTH and float(c["lr"]) == LR:
      return c
  return None


def kept(cell: dict[str, str]) -> tuple[int, int]:
  """(escapes kept to the horizon, seeds) of a cell."""
  return int(cell["escaped_for_good"]), int(cell["seeds"])


def cells() -> dict[str, dict[str, str]]:
  """{variant: cell} of the arms that have run."""
  return {v: c for v, *_ in ARMS if (c := _cell(v)) is not None}


def fisher(a: dict[str, str], b: dict[str, str]) -> float:
  return fisher_exact(*kept(a), *kept(b))


def verdict(have: dict[str, dict[str, str]]) -> str:
  """Which of "the gate" or "a smaller branch at init" the controls support, by rule:

  - the gate moves the edge: its kept fraction differs from plain's (Fisher p < ALPHA);
  - the halving alone (0.5-scale) does the same: it differs from plain and not from the gate
    -> "a smaller attention branch at init" is enough;
  - the halving alone does not differ from plain, and the gate does -> "the gate" (its
    learning or its shape, beyond its scale at init);
  each arm read only with at least MIN_SEEDS seeds; otherwise the verdict says what is
  missing. The unbiased and frozen gates add a clause each when they have run.
  """
  plain, gate = have.get("postnorm"), have.get("postnorm-attngate")
  scale = have.get("postnorm-attnscale")
  ready = lambda c: c is not None and kept(c)[1] >= MIN_SEEDS  # noqa: E731
  if not (ready(plain) and ready(gate)):
    return "Not decided: plain Post-LN and gated attention need 4 seeds each at this cell."
  if fisher(gate, plain) >= ALPHA:
    return (
      f"Not decided: gated attention's odds ({_odds(gate)}) do not differ from plain Post-LN's "
      f"({_odds(plain)}; Fisher p {fisher(gate, plain):.2g}), so there is no effect to explain."
    )
  if not ready(scale):
    return "Not decided: the 0.5-scale control needs 4 seeds."
  p_plain, p_gate = fisher(scale, plain), fisher(scale, gate)
  if p_plain < ALPHA and p_gate >= ALPHA:
    text = (
      f"**A smaller attention branch at init is enough.** Halving the branch without a gate "
      f"keeps the escape on {_odds(scale)} seeds, against plain Post-LN's {_odds(plain)} "
      f"(Fisher p {p_plain:.2g}) and gated attention's {_odds(gate)} (p {p_gate:.2g}): at this "
      'cell the controls support "a smaller branch at init", not "the gate".'
    )
  elif p_plain >= ALPHA:
    text = (
      f"**The gate, not its scale.** Halving the branch without a gate keeps the escape on "
      f"{_odds(scale)} seeds, no different from plain Post-LN's {_odds(plain)} (Fisher p "
      f"{p_plain:.2g}), while gated attention keeps it on {_odds(gate)}: at this cell the "
      'controls support "the gate", not "a smaller branch at init".'
    )
  else:
    text = (
      f"**Both, in part.** Halving the branch without a gate moves the odds ({_odds(scale)} "
      f"against plain's {_odds(plain)}, p {p_plain:.2g}) but less than the gate does "
      f"({_odds(gate)}, p {p_gate:.2g})."
    )
  for variant, clause in (
    ("postnorm-gatebias", "the gate that starts near 1 (no halving at init)"),
    ("postnorm-gatefrozen", "the gate frozen at its init (the halving, never learned)"),
    ("postnorm-gatehead", "one gate per head (the paper's headwise form)"),
  ):
    c = have.get(variant)
    if ready(c):
      text += (
        f" With {clause}: {_odds(c)} (against plain p {fisher(c, plain):.2g}, against the "
        f"learned gate p {fisher(c, gate):.2g})."
      )
  return text


def _odds(cell: dict[str, str]) -> str:
  k, n = kept(cell)
  return f"{k}/{n}"


def table(have: dict[str, dict[str, str]]) -> list[str]:
  lines = [
    "| cell | takes away | seeds | kept to step 1,500 | 95% interval | first passages | "
    "p vs plain | p vs gate |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  plain, gate = have.get("postnorm"), have.get("postnorm-attngate")
  for variant, what, takes in ARMS:
    c = have.get(variant)
    if c is None:
      lines.append(f"| {what} | {takes} | 0 | not run | | | | |")
      continue
    k, n = kept(c)
    lo, hi = clopper_pearson(k, n)
    vs_plain = f"{fisher(c, plain):.2g}" if plain and variant != "postnorm" else ""
    vs_gate = f"{fisher(c, gate):.2g}" if gate and variant != "postnorm-attngate" else ""
    passages = c.get("first_passages", "").replace(" ", ", ")
    lines.append(
      f"| {what} | {takes} | {n} | {k}/{n} | {lo:.2f}-{hi:.2f} | {passages} | {vs_plain} | "
      f"{vs_gate} |"
    )
  return lines


def render() -> str:
  """The section of docs/stabilizers/README.md between BEGIN and END."""
  have = cells()
  return "\n".join(
    [
      BEGIN,
      f"Post-LN at {DEPTH} layers, lr 1e-3, no warmup, the survival protocol (1,500 steps, an "
      "eval every 25 on 8,192 tokens, stdlib); kept: an escape that lasts to the end. "
      "Intervals: exact binomial (Clopper-Pearson); p: Fisher's exact test, two-sided.",
      "",
      *table(have),
      "",
      verdict(have),
      END,
    ]
  )


def row_gate() -> Claim | None:
  have = cells()
  gate, scale = have.get("postnorm-attngate"), have.get("postnorm-attnscale")
  if gate is None or scale is None:
    return None
  arms = [f"{SHORT[v]} {_odds(have[v])}" for v, *_ in ARMS if v in have]
  sentence = verdict(have).split("**")[1] if "**" in verdict(have) else verdict(have)
  seeds = sorted(kept(c)[1] for c in have.values())
  where = where_cells()
  by_arm = {
    arm: "/".join(edge_short(by_arm_at(where, depth, arm)) for depth in WHERE_DEPTHS)
    for arm in ("plain", "gate")
  }
  edges = f"edge {'/'.join(f'{d}L' for d in WHERE_DEPTHS)}: " + ", ".join(
    f"{arm} {e}" for arm, e in by_arm.items()
  )
  deep = [
    f"DeepNorm {d}L {lr_label(lr, 4)}: alone {_odds(a['plain'])}, +gate {_odds(a['gate'])}"
    for (d, lr), a in sorted(deepnorm_cells().items())
    if "plain" in a
  ]
  return Claim(
    "Why gated attention moves Post-LN's edge",
    f"{sentence} Kept: " + ", ".join(arms) + "; " + "; ".join([edges, *deep]),
    "Post-LN 12L, lr 1e-3 (controls), the 12L and 24L lrs run (edge); 1,500 steps, no warmup; "
    f"seeds per cell as listed; Fisher's exact test; edge: the largest lr kept on half of >= "
    f"{MIN_SEEDS} seeds; stdlib",
    "[controls](docs/stabilizers/README.md#why-the-gate-the-controls), "
    "`docs/stabilizers/cells.csv`, `docs/survival/cells.csv`",
    f"{sentence} Kept: " + ", ".join(arms),
    f"Post-LN {DEPTH}L at {lr_label(LR)}, 1,500 steps; {seeds[0]}-{seeds[-1]} seeds per cell",
  )


MECHANISM = "docs/stabilizers/mechanism.csv"  # scripts/gate_mechanism.py's
MECH_BEGIN = (
  "<!-- gate mechanism: written by scripts/claims.py from docs/stabilizers/mechanism.csv -->"
)
MECH_END = "<!-- end of gate mechanism -->"
MECH_ARMS = (("postnorm", "plain"), ("postnorm-attngate", "gate"), ("postnorm-attnscale", "x 0.5"))
MECH_STEPS = (1, 25, 50, 300)
MECH_COLUMNS = (
  ("attn_branch_rms", "attention branch RMS", 3),
  ("attn_norm_in_rms", "RMS into the norm (skip + branch)", 3),
  ("attn_entropy", "attention entropy (nats)", 3),
  ("attn_sink_mass", "mass on the first token", 4),
  ("stream_max", "largest activation", 2),
  ("attn_gate_mean", "gate mean", 3),
  ("attn_gate_std", "gate spread (std over batch, time and units)", 3),
  ("update_ratio_layer", "update / parameters", 5),
  ("grad_norm_layer", "grad norm first / last layer", 3),
)


def render_mechanism() -> str:
  """The mechanism table: each quantity's mean over an arm's seeds at MECH_STEPS."""
  rows = optional(MECHANISM)
  lines = [MECH_BEGIN]
  if not rows:
    return "\n".join([*lines, "Not run yet (configs/sweeps/gate_mechanism.py).", MECH_END])
  seeds = {a: sorted({r["seed"] for r in rows if r["arm"] == a}) for a, _ in MECH_ARMS}
  firsts = {
    a: sorted({r["first_passage"] or "none" for r in rows if r["arm"] == a}) for a, _ in MECH_ARMS
  }
  lines += [
    "Each quantity is the layers' mean (the largest activation: their max; the gradient: the "
    "first layer's over the last's) at the step, averaged over the arm's seeds: "
    + "; ".join(
      f"{lab} {len(seeds[a])} seeds (first passage by step 300: {', '.join(firsts[a])})"
      for a, lab in MECH_ARMS
    )  # fmt: skip
    + ". `mechanism.csv` has every seed at more steps; `mechanism.png` every step.",
    "",
    "| quantity | step | " + " | ".join(lab for _, lab in MECH_ARMS) + " |",
    "| --- | --- |" + " --- |" * len(MECH_ARMS),
  ]
  for key, label, digits in MECH_COLUMNS:
    for step in MECH_STEPS:
      cells = []
      for arm, _ in MECH_ARMS:
        vals = [
          float(r[key]) for r in rows if r["arm"] == arm and int(r["step"]) == step and r[key]
        ]
        cells.append(f"{sum(vals) / len(vals):.{digits}g}" if vals else "")
      if any(cells):
        lines.append(f"| {label} | {step} | " + " | ".join(cells) + " |")
  lines.append(MECH_END)
  return "\n".join(lines)


WHERE_BEGIN = "<!-- gate where: written by scripts/claims.py from docs/*/cells.csv -->"
WHERE_END = "<!-- end of gate where -->"
WHERE_DEPTHS = (12, 24)


def where_cells() -> dict[tuple[int, float], dict[str, dict[str, str]]]:
  """{(depth, lr): {"plain": cell, "gate": cell}} at every Post-LN cell either has run on the
  survival protocol: plain Post-LN from docs/stabilizers (the WHERE cells) or docs/survival,
  gated attention from docs/stabilizers."""
  out: dict[tuple[int, float], dict[str, dict[str, str]]] = {}
  mine = optional(CELLS)
  for source, variant, arm in (
    (survival_cells(), "postnorm", "plain"),
    (mine, "postnorm", "plain"),  # the gate's own cells' plain runs win
    (mine, "postnorm-attngate", "gate"),
  ):
    for c in source:
      if c["variant"] == variant and int(c["num_layers"]) in WHERE_DEPTHS:
        out.setdefault((int(c["num_layers"]), float(c["lr"])), {})[arm] = c
  return out


def by_arm_at(cells_, depth: int, arm: str) -> dict[float, dict[str, str]]:
  """{lr: cell} of one arm at one depth, from {(depth, lr): {arm: cell}}."""
  return {lr: a[arm] for (d, lr), a in cells_.items() if d == depth and arm in a}


def _edge_top(by_lr: dict[float, dict[str, str]]) -> tuple[float | None, list[float]]:
  """(the largest lr whose cell keeps the escape on at least half of >= MIN_SEEDS seeds, or
  None; the lrs run on >= MIN_SEEDS seeds)."""
  ready = [lr for lr, c in by_lr.items() if kept(c)[1] >= MIN_SEEDS]
  holds = [lr for lr in ready if 2 * kept(by_lr[lr])[0] >= kept(by_lr[lr])[1]]
  return (max(holds) if holds else None), ready


def edge(by_lr: dict[float, dict[str, str]]) -> str:
  """An arm's edge at one depth, by rule: the largest lr run whose cell keeps the escape on at
  least half of its seeds (>= MIN_SEEDS of them), and whether a larger lr run on as many seeds
  keeps it on fewer (bracketed) or no larger lr has run (open above)."""
  top, ready = _edge_top(by_lr)
  if top is None:
    return "below every lr run" if ready else "not run on 4 seeds"
  above = [lr for lr in ready if lr > top]
  where = f"bracketed by {lr_label(min(above), 4)}" if above else "open above: no larger lr run"
  return f"{lr_label(top, 4)} ({where})"


def edge_short(by_lr: dict[float, dict[str, str]]) -> str:
  """`edge` in a few characters: the lr, '<' the smallest lr run, or 'not run'."""
  top, ready = _edge_top(by_lr)
  if top is not None:
    return lr_label(top, 4)
  return f"<{lr_label(min(ready), 4)}" if ready else "not run"


SHAKESPEARE_CELLS = "docs/stabilizers/shakespeare/cells.csv"  # the grid's shakespeare-* points


def corpus_rows() -> list[str]:
  """The where-table's rows of the same cells on tiny Shakespeare (docs/second_corpus's
  corpus), gated against plain in each, when they have run."""
  by: dict[tuple[int, float], dict[str, dict[str, str]]] = {}
  for c in optional(SHAKESPEARE_CELLS):
    arm = {"shakespeare-postnorm": "plain", "shakespeare-postnorm-attngate": "gate"}.get(
      c["variant"]
    )
    if arm:
      by.setdefault((int(c["num_layers"]), float(c["lr"])), {})[arm] = c
  return [pair_row(f"{d} (Shakespeare)", lr, arms) for (d, lr), arms in sorted(by.items())]


DEEPNORM = ("deepnorm", "deepnorm-attngate")  # DeepNorm alone (docs/survival), with the gate


def deepnorm_cells() -> dict[tuple[int, float], dict[str, dict[str, str]]]:
  """{(depth, lr): {"plain": DeepNorm alone, "gate": DeepNorm with the gate}} at each cell the
  gate's DeepNorm points have run (the grid's deepnorm-attngate-*), DeepNorm alone from
  docs/survival's cells where it has run there."""
  alone = {
    (int(c["num_layers"]), float(c["lr"])): c
    for c in survival_cells()
    if c["variant"] == DEEPNORM[0]
  }
  out: dict[tuple[int, float], dict[str, dict[str, str]]] = {}
  for c in optional(CELLS):
    if c["variant"] == DEEPNORM[1]:
      key = (int(c["num_layers"]), float(c["lr"]))
      out[key] = {"gate": c} | ({"plain": alone[key]} if key in alone else {})
  return out


def combines(key: tuple[int, float], arms: dict[str, dict[str, str]]) -> str:
  """Whether the gate adds to DeepNorm at one cell, by rule: both arms on >= MIN_SEEDS seeds,
  and Fisher's p below ALPHA in the gate's favour (or against it); otherwise what is missing."""
  depth, lr = key
  head = f"- {depth} layers, {lr_label(lr, 4)}, the gate with DeepNorm: "
  alone, gate = arms.get("plain"), arms.get("gate")
  if alone is None:
    return head + f"{_odds(gate)} kept; DeepNorm alone not run there"
  if min(kept(alone)[1], kept(gate)[1]) < MIN_SEEDS:
    return head + (
      f"{_odds(gate)} kept against DeepNorm alone's {_odds(alone)}: not read until both have "
      f"{MIN_SEEDS} seeds"
    )
  p = fisher(gate, alone)
  rate = lambda c: kept(c)[0] / kept(c)[1]  # noqa: E731
  if p >= ALPHA:
    what = "no difference detected from DeepNorm alone"
  else:
    what = "adds to DeepNorm" if rate(gate) > rate(alone) else "takes away from DeepNorm"
  return head + f"{what} ({_odds(gate)} kept against {_odds(alone)}, Fisher p {p:.2g})"


def pair_row(layers: str, lr: float, arms: dict[str, dict[str, str]]) -> str:
  """A where-table row: plain's and the gate's kept odds with intervals, and Fisher's p."""
  row = [layers, lr_label(lr, 4)]
  for arm in ("plain", "gate"):
    c = arms.get(arm)
    row += [_odds(c), "{:.2f}-{:.2f}".format(*clopper_pearson(*kept(c)))] if c else [
      "not run", ""]  # fmt: skip
  both = "plain" in arms and "gate" in arms
  row.append(f"{fisher(arms['gate'], arms['plain']):.2g}" if both else "")
  return "| " + " | ".join(row) + " |"


def render_where() -> str:
  """Gated attention against plain Post-LN cell by cell, and each arm's edge by `edge`'s rule."""
  cells_ = where_cells()
  lines = [
    WHERE_BEGIN,
    "| layers | lr | without the gate kept | 95% interval | with the gate kept | 95% interval | "
    "Fisher p |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ]
  lines += [pair_row(str(depth), lr, arms) for (depth, lr), arms in sorted(cells_.items())]
  lines += corpus_rows()
  deep = deepnorm_cells()
  lines += [pair_row(f"{d} (DeepNorm)", lr, arms) for (d, lr), arms in sorted(deep.items())]
  lines += ["", "The edge, by rule (the largest lr whose cell keeps the escape on at least half "
            f"of >= {MIN_SEEDS} seeds):"]  # fmt: skip
  for depth in WHERE_DEPTHS:
    for arm, name in (("plain", "plain Post-LN"), ("gate", "gated attention")):
      by_lr = by_arm_at(cells_, depth, arm)
      lines.append(f"- {depth} layers, {name}: {edge(by_lr)}")
  for depth in WHERE_DEPTHS:  # DeepNorm's own edge, alone and with the gate, where it has run
    for arm, name in (("plain", "DeepNorm"), ("gate", "DeepNorm with the gate")):
      by_lr = by_arm_at(deep, depth, arm)
      if by_lr:
        lines.append(f"- {depth} layers, {name}: {edge(by_lr)}")
  lines += [combines(key, arms) for key, arms in sorted(deep.items())]
  lines.append(WHERE_END)
  return "\n".join(lines)


README_ROWS = {29: row_gate}
DOC_SECTIONS = (
  (README, BEGIN, END, render),
  (README, MECH_BEGIN, MECH_END, render_mechanism),
  (README, WHERE_BEGIN, WHERE_END, render_where),
)
