"""Sweeps: grids of points, their jobs and slots, the runner, SLURM job arrays."""
