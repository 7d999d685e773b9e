"""A training run: setup (run_setup), the jitted step, optimizer, loop, population/ (a sweep as
one program), checkpoints, TensorBoard and metrics logs. Imports `config`, `model`, `data` and
`runs` (what a run leaves behind: outcome, metrics file, workdir), never the floors above it
(sweeps, hardware, analysis, probes)."""

from resnorm_jax.config import host as _host

_host.import_jax_quietly()  # a CUDA plugin without a driver: its loader's lines held back
