"""The project's commands (`python -m experiments.<name>`, the `resnorm-*` console scripts).
Importing the package chooses this host's platform before a command starts JAX: a CUDA plugin
on a host without an NVIDIA driver is left out, with one line saying so
(resnorm_jax/config/host.py)."""

import sys as _sys

from resnorm_jax.config import host as _host

if _chosen := _host.choose():
  print(_host.NOTE.format(_chosen), file=_sys.stderr)
