"""A run's folder as the sweep tests fake it (tests/test_sweep_grid.py,
tests/test_sweep_results.py): summary.json, and optionally config.json and the sweep's point
file, written as a finished run leaves them."""

import json
import os

from resnorm_jax.sweeps import grid as sweep_grid


def fake_run(workdir, summary: dict, config: dict | None = None, point: dict | None = None):
  os.makedirs(workdir, exist_ok=True)
  full = {"status": "completed", "unigram_entropy": 3.3, "steps": 2, **summary}
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump(full, f)
  if config is not None:
    with open(os.path.join(workdir, "config.json"), "w") as f:
      json.dump({**config, "resolved_model": {"num_layers": config["model"]["num_layers"]}}, f)
  if point is not None:
    with open(os.path.join(workdir, sweep_grid.POINT_FILE), "w") as f:
      json.dump(point, f)
