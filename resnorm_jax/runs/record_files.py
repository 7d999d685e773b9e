"""The files and folders a run leaves in its workdir, by name: every writer and reader of a run
names them from here. No JAX."""

CONFIG = "config.json"  # the resolved config (resnorm_jax/train/run_files.py writes it)
SUMMARY = "summary.json"  # how the run ended: status, outcome, losses, speed
METRICS = "metrics.jsonl"  # one JSON row per logged step (resnorm_jax/runs/metrics_file.py)
LOG = "train.log"  # a sweep point's stdout and stderr (resnorm_jax/sweeps/runner.py)
POINT = "sweep_point.json"  # what a sweep launched there, and its exit status (sweep_point.py)
LOCK = ".lock"  # the workdir's lock while a run holds it (resnorm_jax/runs/workdir.py)
CHECKPOINTS = "ckpt"  # orbax checkpoints, a folder per saved step
EVENTS = "tb"  # TensorBoard event files
