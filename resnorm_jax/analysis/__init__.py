"""Analyses of committed runs: loss-vs-lr curves, survival, depth transfer, width, the
README's claims, figures and their style. No JAX: runs are read through resnorm_jax.runs."""
