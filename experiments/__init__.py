"""The project's commands (`python -m experiments.<name>`, the `resnorm-*` console scripts).
Importing the package chooses this host's platform before a command starts JAX: a CUDA plugin
on a host without an NVIDIA driver is left out (resnorm_jax/config/host.py), and a run's
start-up line names the platform it got."""

from resnorm_jax.config import host as _host

_host.choose()
