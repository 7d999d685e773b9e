"""Every variant builds, is finite and is causal; batchnorm's train-mode leak is shown.

The original axes' values (configs/base.py's comments) run as the full product of norm x
norm_position x residual x block (280 models) with the init rule cycled so every init meets
every value of every other axis: a pairwise covering set of them in the fast tier, the rest of
the product in the long tier. The later variants (docs/variants.md) run
as a pairwise covering set over all five axes (the slow tier): every value of every axis
meets every value of every other axis in at least one model, the original product's pairs
counted as met. The full five-axis product of today's axes is 7,280 models; the pairs take
about a tenth of the 1,176 later rows of the four-axis product, which cost most of the
suite's time. Each tiny model runs eagerly (jax.disable_jit) through the scanned stack: a
jit per model would compile once per model.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config, tiny_model
from resnorm_jax.model import config_types, initializers, variants
from resnorm_jax.model.transformer import Transformer

# The axes' values as the library lists them (a value added to the library joins the grid).
# The original values (configs/base.py's comments) run as their full product: a pairwise cover
# in the fast tier, the rest in the long tier; every row with a later variant's value
# (docs/variants.md) is in the slow tier.
NORMS = variants.names("norm")
POSITIONS = variants.names("norm_position")
RESIDUALS = variants.names("residual")
BLOCKS = config_types.BLOCKS
INITS = initializers.INITS
ORIGINAL = {
  "norm": ("layernorm", "rmsnorm", "batchnorm", "dyt", "none"),
  "norm_position": ("post", "pre", "peri", "none"),
  "residual": ("add", "deepnorm", "scaled", "rezero", "layerscale", "gated", "none"),
  "init": ("xavier", "normal", "gpt2", "deepnorm"),
}
AXES = (NORMS, POSITIONS, RESIDUALS, BLOCKS, INITS)
# init = INITS[sum of the other axes' indices mod len(INITS)]: every init meets every value.
PRODUCT = [
  (NORMS[n], POSITIONS[p], RESIDUALS[r], BLOCKS[b], INITS[(n + p + r + b) % len(INITS)])
  for n, p, r, b in itertools.product(
    *(range(len(v)) for v in (NORMS, POSITIONS, RESIDUALS, BLOCKS))
  )
]


def _pairs(row) -> set:
  return {((i, row[i]), (j, row[j])) for i, j in itertools.combinations(range(len(row)), 2)}


def pairwise_rows(axes, met: set) -> list[tuple]:
  """Rows that meet every pair of values of two axes not in `met` (greedy, deterministic):
  each row starts from the smallest pair still unmet and fills the other axes, in order,
  with the value that meets most unmet pairs with the values chosen so far."""
  unmet = {
    ((i, a), (j, b))
    for i, j in itertools.combinations(range(len(axes)), 2)
    for a in axes[i]
    for b in axes[j]
  } - met
  rows = []
  while unmet:
    (i, a), (j, b) = min(unmet, key=lambda p: (p[0][0], axes[p[0][0]].index(p[0][1]), p[1]))
    row: dict[int, str] = {i: a, j: b}
    for k in (k for k in range(len(axes)) if k not in row):
      row[k] = max(
        axes[k],
        key=lambda v: sum(
          (((min(k, m), v if k < m else w), (max(k, m), w if k < m else v)) in unmet)
          for m, w in row.items()
        ),
      )
    rows.append(tuple(row[k] for k in range(len(axes))))
    unmet -= _pairs(rows[-1])
  return rows


def _later(row) -> bool:
  """A row with a later norm, placement or residual (the init rule cycles over all of them)."""
  norm, position, residual, _, _ = row
  return (
    norm not in ORIGINAL["norm"]
    or position not in ORIGINAL["norm_position"]
    or residual not in ORIGINAL["residual"]
  )


ORIGINAL_ROWS = [row for row in PRODUCT if not _later(row)]
LATER_ROWS = pairwise_rows(AXES, set().union(*map(_pairs, ORIGINAL_ROWS)))
# The fast tier's original rows: every pair of original values met (the rest: the long tier).
ORIGINAL_AXES = (
  ORIGINAL["norm"],
  ORIGINAL["norm_position"],
  ORIGINAL["residual"],
  BLOCKS,
  ORIGINAL["init"],
)
ORIGINAL_COVER = pairwise_rows(ORIGINAL_AXES, set())
GRID = ORIGINAL_COVER + [r for r in ORIGINAL_ROWS if r not in ORIGINAL_COVER] + LATER_ROWS


BASE_TOKENS = np.array([3, 7, 1, 6, 0, 2], np.int32)


def _perturbed_batch(t: int, vocab: int = 8) -> np.ndarray:
  """Row 0: the base sequence; row p: the same with only token p changed."""
  rows = [BASE_TOKENS[:t]]
  for p in range(1, t):
    row = BASE_TOKENS[:t].copy()
    row[p] = (row[p] + 5) % vocab
    rows.append(row)
  return np.stack(rows)


def _logits(model: Transformer, tokens: np.ndarray) -> np.ndarray:
  with jax.disable_jit():
    logits, stats = model(jnp.asarray(tokens))
  for name, value in stats["layers"].items():
    assert np.all(np.isfinite(np.asarray(value))), name
  return np.asarray(logits)


def assert_causal(model: Transformer, t: int = 4) -> None:
  """Changing token p moves no logit before p (and does move the logits at p)."""
  logits = _logits(model, _perturbed_batch(t))
  assert np.all(np.isfinite(logits))
  base_logits = logits[0]
  # Relative scale: a model without a skip path and a small init has logits near 1e-5.
  scale = np.abs(base_logits).max()
  for p in range(1, t):
    np.testing.assert_allclose(
      logits[p, :p], base_logits[:p], rtol=0, atol=1e-6 * max(scale, 1.0), err_msg=f"{p=}"
    )
    assert np.abs(logits[p, p] - base_logits[p]).max() > 1e-3 * scale, f"token {p} ignored"


def test_grid_meets_every_value_of_every_axis_with_every_value_of_every_other():
  met = set().union(*map(_pairs, GRID))
  for i, j in itertools.combinations(range(len(AXES)), 2):
    assert met >= {((i, a), (j, b)) for a in AXES[i] for b in AXES[j]}, (i, j)
  assert len(set(GRID)) == len(GRID)
  assert all(_later(row) for row in LATER_ROWS)
  assert len(LATER_ROWS) < len(PRODUCT) - len(ORIGINAL_ROWS)
  original = ORIGINAL["norm"] + ORIGINAL["norm_position"] + ORIGINAL["residual"]
  # the axes' values (features are turned on by their own keys: tests/test_stabilizers.py)
  later = {v.name for v in variants.every() if v.axis != variants.FEATURE} - set(original)
  assert later and later <= {v for row in GRID for v in row[0:3]}
  assert len(ORIGINAL_ROWS) == 5 * 4 * 7 * 2  # the original product: fast and long tiers
  assert set(ORIGINAL_ROWS) <= set(GRID) and not any(_later(row) for row in ORIGINAL_COVER)
  cover = set().union(*map(_pairs, ORIGINAL_COVER))
  for i, j in itertools.combinations(range(len(AXES)), 2):
    pairs = {((i, a), (j, b)) for a in ORIGINAL_AXES[i] for b in ORIGINAL_AXES[j]}
    assert cover >= pairs, (i, j)
  assert len(ORIGINAL_COVER) < len(ORIGINAL_ROWS) // 3


def test_pairwise_rows_meet_every_pair_and_no_more_rows_than_needed_here():
  axes = (("a", "b", "c"), ("x", "y", "z"), ("0", "1"))
  rows = pairwise_rows(axes, set())
  assert set().union(*map(_pairs, rows)) == {
    ((i, a), (j, b))
    for i, j in itertools.combinations(range(3), 2)
    for a in axes[i]
    for b in axes[j]
  }
  assert 9 <= len(rows) <= 11  # 3 x 3 pairs need 9 rows; greedy may add a few
  assert pairwise_rows(axes, set().union(*map(_pairs, rows))) == []


def _grid_params():
  def param(row):
    if _later(row):
      return pytest.param(*row, marks=pytest.mark.slow)
    return row if row in ORIGINAL_COVER else pytest.param(*row, marks=pytest.mark.long)

  return [param(row) for row in GRID]


@pytest.mark.parametrize("norm, position, residual, block, init", _grid_params())
def test_variant_builds_finite_and_causal_in_eval_mode(norm, position, residual, block, init):
  axes = dict(norm=norm, norm_position=position, residual=residual, block=block, init=init)
  try:
    tiny_config(**axes)
  except ValueError as e:  # a combination the library refuses, with a message naming it
    assert any(str(v) in str(e) for v in axes.values()), e
    return
  model = tiny_model(**axes)
  model.eval()
  assert_causal(model)


def test_batchnorm_train_mode_leaks_the_future():
  # Batch statistics over time mix positions: the last token moves the first logit.
  model = tiny_model(norm="batchnorm", norm_position="pre")
  model.train()
  tokens = _perturbed_batch(4)
  first = [_logits(model, tokens[[0]])[0, 0], _logits(model, tokens[[3]])[0, 0]]
  assert np.abs(first[0] - first[1]).max() > 1e-3
  # The same weights in eval mode, with the running averages those calls updated, are causal.
  assert float(jnp.abs(model.layers.norms["attn"].mean[...]).max()) > 0
  model.eval()
  assert_causal(model)


# The post-DeepNet variants (docs/variants.md), each with the axes it is meant for and a few
# neighbours; their formulas are checked against NumPy in test_later_variants.py.
LATER = [
  dict(norm_position="subln", init="magneto"),
  dict(norm_position="subln", init="magneto", norm="rmsnorm", block="parallel"),
  dict(norm_position="post", residual="admin"),
  dict(norm_position="post", residual="admin", block="parallel"),
  dict(norm_position="mix", mixln_post_fraction=0.5),
  dict(norm_position="mix", mixln_post_fraction=0.5, norm="rmsnorm", block="parallel"),
  dict(norm_position="lnscale"),
  dict(norm_position="lnscale", block="parallel", init="gpt2"),
  dict(norm_position="pre", residual="hyperconn"),
  dict(norm_position="pre", residual="hyperconn", hyperconn_dynamic=True, block="parallel"),
  dict(norm_position="subln", residual="hyperconn", hyperconn_rate=2),
  dict(residual="ngpt", norm_position="none", position="rope", ffn_activation="swiglu"),
  dict(
    residual="ngpt",
    norm_position="none",
    position="rope",
    ffn_activation="swiglu",
    tie_embeddings=False,
    attention="xla",
  ),
]


@pytest.mark.parametrize("model", LATER, ids=lambda m: "-".join(f"{v}" for v in m.values()))
def test_later_variant_builds_finite_and_causal(model):
  built = tiny_model(**model)  # 2 layers: mix at 0.5 has one Post-LN and one Pre-LN layer
  built.eval()
  assert_causal(built)
