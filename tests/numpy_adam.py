"""A NumPy reference of Adam and AdamW on one leaf, for the tests of the per-group optimizer
rules (tests/test_depth_param.py, tests/test_width_param.py)."""

import numpy as np


def np_adam(grads, params, lr, eps, b1, b2, wd, decoupled):
  """NumPy Adam/AdamW on one leaf over len(grads) steps; returns the summed updates. `wd`:
  decoupled (AdamW: lr * wd * p) or added to the gradient (Adam's L2)."""
  m = v = 0.0
  p = params.astype(np.float64)
  start = p.copy()
  for t, g in enumerate(grads, start=1):
    g = g.astype(np.float64) + (0.0 if decoupled else wd * p)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    step = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    p = p - lr * (step + (wd * p if decoupled else 0.0))
  return p - start
