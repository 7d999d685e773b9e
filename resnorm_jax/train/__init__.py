"""A training run: setup (run_setup), the jitted step, optimizer, loop, population (a sweep as one
program), checkpoints, workdir, TensorBoard and metrics logs, and the run's outcome. Imports
`config`, `model` and `data`, never `tools`."""
