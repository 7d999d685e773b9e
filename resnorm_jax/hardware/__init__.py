"""Hardware: compile for a target (TPU, GPU) this host does not have, cost estimates,
benchmarks of the train step and its parts."""
