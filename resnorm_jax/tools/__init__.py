"""Tools on top of runs: sweeps (grid, runner, results), cluster job arrays, benchmarks and the
step profile, reproductions, the loss-vs-lr and budget analyses, figures, sampling."""
