"""Where one train step spends its time: per-op times from a profiler trace, joined to XLA's HLO.

python scripts/profile_step.py --config=configs/nanogpt_char.py [--config.k=v ...]
    [--steps=20] [--warmup=3] [--top=25] [--out=profile.json]   (benchmark.py's flags + --top)

Builds the step as the loop does (resnorm_jax/train/run_setup.py), compiles it, runs `--warmup`
steps,
then traces `--steps` steps with `jax.profiler`. Each op the executable runs (an XLA thunk:
a fusion, a dot, a copy) appears in the trace under its HLO instruction name; the optimized
HLO of the same executable (`compiled.as_text()`) gives that name's shape, whether it
contains a dot, and the JAX op it came from (`op_name` metadata), which tells the forward
pass (`jvp(...)`), the backward pass (`transpose(jvp(...))`) and the rest (optimizer update,
clipping, diagnostics) apart. Prints, per step:

  - kernel time by part (forward / backward / update) and kind (dot / other), op counts;
  - the busiest ops with their shapes and source ops;
  - thread use: the sum of op times against the time any thread ran an op (on a CPU host,
    how much of the step used both cores).

The profiler adds a little time per op; compare parts with each other, not with
`benchmark.py`'s step time. Works where the trace names ops by HLO instruction (XLA:CPU;
on GPU the kernels carry other names and most ops are not matched: see `matched` in the JSON).
"""

from __future__ import annotations

from absl import app, flags, logging

from resnorm_jax.config import cli
from resnorm_jax.hardware import bench_flags  # (no JAX import)

# --config, --steps, --warmup and --out: resnorm_jax/hardware/bench_flags.py, shared with
# benchmark.py.
_TOP = flags.DEFINE_integer("top", 25, "Busiest ops to list.")


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  if bench_flags.CONFIG.value is None:
    cli.fail("--config=FILE is required (e.g. configs/nanogpt_char.py)")
  if bench_flags.STEPS.value < 1 or bench_flags.WARMUP.value < 0:
    cli.fail("--steps must be >= 1 and --warmup >= 0")
  logging.set_verbosity(logging.WARNING)  # JAX logs each backend it cannot start at INFO
  from resnorm_jax.hardware import step_profile  # imports JAX when profiling: --help stays fast

  try:
    r = step_profile.profile(
      bench_flags.CONFIG.value,
      steps=bench_flags.STEPS.value,
      warmup=bench_flags.WARMUP.value,
      top=_TOP.value,
    )
  except ValueError as e:
    cli.fail(str(e))
  print(step_profile.table(r), flush=True)
  if bench_flags.OUT.value:
    cli.write_json(bench_flags.OUT.value, r)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
