"""resnorm_jax: normalization and residual variants of a decoder-only Transformer, and the
training, data and analyses to study them over depth.

Subpackages, each importing only those above it in this list (tests/test_layout.py):

  config    the command line's config file and overrides; whether two configs are one experiment
  model     the Transformer: norms, residual variants (model/variants/), attention, MLP, init
  data      corpora, token files, batches, held-out splits and their no-context baselines
  runs      what a run leaves behind and its readers: outcome, escape, metrics file, workdir,
            sweep records (no JAX)
  train     a run: setup, the jitted step, optimizer, loop, checkpoints, logs
  sweeps    grids, jobs, the runner, SLURM arrays
  hardware  compile for a target (TPU, GPU), benchmarks, the step's profile
  analysis  no JAX: curves, survival, transfer, width, figures, the README's claims (on config,
            data and runs only)
  probes    coordinate checks, reproductions, sampling, the golden losses
"""

import os as _os

# The checkout this package runs from (configs/, scripts/ and data/ sit beside it): config and
# grid paths are relative to it, and provenance asks git about it.
ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
