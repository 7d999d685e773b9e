"""Every variant builds, is finite and is causal; batchnorm's train-mode leak is shown.

The grid is the full product of norm x norm_position x residual x block (280 models) with
the init rule cycled so every init meets every value of every other axis. Each tiny model
runs eagerly (jax.disable_jit) through the scanned stack: a jit per model would compile
280 times.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config, tiny_model
from resnorm_jax.model import config_types, initializers, variants
from resnorm_jax.model import norms as norms_lib
from resnorm_jax.model.transformer import Transformer

# The axes' values as the library lists them (a value added to the library joins the grid).
# The original values (configs/base.py's comments) run as the fast tier's full product; every
# row with a later variant's value (docs/variants.md) is in the slow tier.
NORMS = norms_lib.names()
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
# init = INITS[sum of the other axes' indices mod len(INITS)]: every init meets every value.
GRID = [
  (NORMS[n], POSITIONS[p], RESIDUALS[r], BLOCKS[b], INITS[(n + p + r + b) % len(INITS)])
  for n, p, r, b in itertools.product(
    *(range(len(v)) for v in (NORMS, POSITIONS, RESIDUALS, BLOCKS))
  )
]


def _later(row) -> bool:
  """A row with a later norm, placement or residual (the init rule cycles over all of them)."""
  norm, position, residual, _, _ = row
  return (
    norm not in ORIGINAL["norm"]
    or position not in ORIGINAL["norm_position"]
    or residual not in ORIGINAL["residual"]
  )


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


def test_grid_covers_every_init_with_every_other_value_and_every_registered_variant():
  for axis, values in enumerate((NORMS, POSITIONS, RESIDUALS, BLOCKS)):
    pairs = {(row[axis], row[4]) for row in GRID}
    assert pairs >= set(itertools.product(values, ORIGINAL["init"])), axis
  assert len(set(GRID)) == len(NORMS) * len(POSITIONS) * len(RESIDUALS) * len(BLOCKS)
  original = ORIGINAL["norm"] + ORIGINAL["norm_position"] + ORIGINAL["residual"]
  # the axes' values (features are turned on by their own keys: tests/test_stabilizers.py)
  later = {v.name for v in variants.every() if v.axis != variants.FEATURE} - set(original)
  assert later and later <= {v for row in GRID for v in row[0:3]}
  assert sum(not _later(row) for row in GRID) == 5 * 4 * 7 * 2  # the fast tier: the original


def _grid_params():
  return [pytest.param(*row, marks=pytest.mark.slow) if _later(row) else row for row in GRID]


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
