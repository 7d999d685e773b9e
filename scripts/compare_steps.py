"""Train-step time of several variants in one process, their steps interleaved.

python scripts/compare_steps.py --config=FILE[:ARG] [--config.k=v ...]
    [--compare=FILE[:ARG],...] [--variant=k=v[,k=v...]] ...
    [--steps=20] [--block=2] [--warmup=3] [--out=compare.json]

Each variant is the main config, a `--compare` config (with the same --config.* overrides)
or the main config with one `--variant`'s keys changed, e.g.
`--variant=model.norm=rmsnorm --variant=model.remat=full`. Every variant's step is built as
the loop builds it (resnorm_jax/train/run_setup.py) and compiled first; then, round after round,
each runs
`--block` steps, each blocked and timed, until each has run `--steps` (rounded up to whole
blocks). All variants thus share the machine's load, which on a shared or throttled host
drifts by 20% and more between separate runs of scripts/benchmark.py: decide A/B questions
here, quote absolute speeds from benchmark.py. --config, --steps, --warmup and --out are
scripts/benchmark.py's flags.
Prints per variant the median, p10 and p90 step time, its ratio to the first variant, compile
time and XLA's memory estimate.
"""

from __future__ import annotations

import os
import sys
import time

from absl import app, flags, logging
from ml_collections import config_flags

from resnorm_jax.config import cli
from resnorm_jax.hardware import bench_flags  # (no JAX import)

_COMPARE = flags.DEFINE_list("compare", [], "More configs (FILE[:ARG],...), same overrides.")
_VARIANT = flags.DEFINE_multi_string(
  "variant", [], "The main config with these keys changed: k=v[,k=v...] (repeatable)."
)
_BLOCK = flags.DEFINE_integer("block", 2, "Consecutive steps of one variant per round.")


def build_variants(main, compare, variants, overrides) -> list[tuple[str, object]]:
  """[(label, config)]: main, the --compare configs, then main with each --variant."""
  out = cli.load_configs(main, compare, overrides)
  out += [(spec, cli.apply_variant(main, spec)) for spec in variants]
  return out


def compare(variants: list[tuple[str, object]], rounds: int, block: int, warmup: int) -> list[dict]:
  """Compiles every variant, then runs them round-robin; per-variant results."""
  from resnorm_jax.train import run_setup

  run_setup.keep_freed_host_memory()  # as loop.run does, before JAX starts threads
  import jax

  from resnorm_jax.hardware import bench

  built = []
  for label, config in variants:  # bad input is refused before anything compiles
    try:
      built.append(run_setup.build(config))
    except ValueError as e:
      raise ValueError(f"{label}: {e}") from None
  runs = []
  for (label, config), s in zip(variants, built, strict=True):
    batch_at = run_setup.batches(s).train
    t0 = time.perf_counter()
    compiled = s.compile_step()
    compile_s = time.perf_counter() - t0
    mem = run_setup.aot_memory(compiled)
    state = s.init_state()
    for i in range(warmup):
      state, metrics = compiled(state, batch_at(i))
    jax.block_until_ready(state)
    t = config.train
    runs.append(
      {
        "label": label,
        "config_name": config.name,
        "compiled": compiled,
        "state": state,
        "batch_at": batch_at,
        "step": warmup,
        "times": [],
        "tokens_per_step": t.batch_size * t.seq_len,
        "compile_s": compile_s,
        "aot_temp_bytes": mem.get("temp"),
      }
    )
  for _ in range(rounds):
    for r in runs:
      for _ in range(block):
        batch = r["batch_at"](r["step"])
        jax.block_until_ready(batch)
        t0 = time.perf_counter()
        r["state"], metrics = r["compiled"](r["state"], batch)
        jax.block_until_ready((r["state"], metrics))
        r["times"].append(time.perf_counter() - t0)
        r["step"] += 1
      r["final_loss"] = float(metrics["loss"])
  base = bench.summarize(runs[0]["times"])["median"]
  results = []
  for r in runs:
    st = bench.summarize(r["times"])
    results.append(
      {
        "label": r["label"],
        "config_name": r["config_name"],
        "step_s": st,
        "vs_first": st["median"] / base,
        "tokens_per_second": r["tokens_per_step"] / st["median"],
        "compile_s": r["compile_s"],
        "aot_temp_bytes": r["aot_temp_bytes"],
        "final_loss": r["final_loss"],
      }
    )
  return results


def table(results: list[dict]) -> str:
  lines = [
    f"{'variant':<40}{'median ms':>11}{'p10':>9}{'p90':>9}{'vs 1st':>8}{'tokens/s':>11}"
    f"{'compile s':>11}{'temp MiB':>10}"
  ]
  for r in results:
    st = r["step_s"]
    temp = "-" if r["aot_temp_bytes"] is None else f"{r['aot_temp_bytes'] / 2**20:.0f}"
    label = r["label"] if len(r["label"]) <= 38 else r["label"][:35] + "..."
    lines.append(
      f"{label:<40}{st['median'] * 1e3:11.2f}{st['p10'] * 1e3:9.2f}{st['p90'] * 1e3:9.2f}"
      f"{r['vs_first']:8.3f}{r['tokens_per_second']:11,.0f}{r['compile_s']:11.2f}{temp:>10}"
    )
  return "\n".join(lines)


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  steps, block, warmup = bench_flags.STEPS.value, _BLOCK.value, bench_flags.WARMUP.value
  if steps < 1 or block < 1 or warmup < 0:
    cli.fail("--steps and --block must be >= 1 and --warmup >= 0")
  rounds = -(-steps // block)
  logging.set_verbosity(logging.WARNING)
  try:
    overrides = config_flags.get_override_values(flags.FLAGS["config"])
    variants = build_variants(bench_flags.CONFIG.value, _COMPARE.value, _VARIANT.value, overrides)
    if len(variants) < 2:
      raise ValueError("nothing to compare: give --compare=FILE or --variant=k=v")
    load = os.getloadavg()[0]
    results = compare(variants, rounds, block, warmup)
  except ValueError as e:
    cli.fail(str(e))
  print(f"{rounds} rounds x {block} steps; load average {load:.2f} -> {os.getloadavg()[0]:.2f}")
  print(table(results), flush=True)
  if bench_flags.OUT.value:
    cli.write_json(bench_flags.OUT.value, {"command": " ".join(sys.argv), "results": results})


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
