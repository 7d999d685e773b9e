"""resnorm_jax: normalization and residual variants of a decoder-only Transformer, and the
training, data and tools to study them over depth.

Subpackages, each importing only those above it in this list:

  config   the command line's config file and overrides; whether two configs are one experiment
  model    the Transformer: norms, residual variants (model/variants/), attention, MLP, init
  data     corpora, token files, batches, held-out splits and their no-context baselines
  train    a run: setup, the jitted step, optimizer, loop, checkpoints, logs, outcome
  tools    on top of runs: sweeps, cluster arrays, benchmarks, reproductions, figures, sampling
"""

import os as _os

# The checkout this package runs from (configs/, scripts/ and data/ sit beside it): config and
# grid paths are relative to it, and provenance asks git about it.
ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
