"""Hardware: compile for a target (TPU, GPU) this host does not have, cost estimates,
benchmarks of the train step and its parts."""

from resnorm_jax.config import host as _host

_host.import_jax_quietly()  # a CUDA plugin without a driver: its loader's lines held back
