"""Probes of the model: coordinate checks, reproductions of the papers' measurements, sampling
from a trained run, the golden losses."""

from resnorm_jax.config import host as _host

_host.import_jax_quietly()  # a CUDA plugin without a driver: its loader's lines held back
