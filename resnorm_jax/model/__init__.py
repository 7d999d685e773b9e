"""The model: a scanned decoder-only Transformer (transformer, model_def) whose norm, placement
and residual are chosen by name from the variant registry (variants/). Imports `config` only."""

from resnorm_jax.config import host as _host

_host.import_jax_quietly()  # a CUDA plugin without a driver: its loader's lines held back
