"""Train-step time of several variants in one process, their steps interleaved.

python scripts/compare_steps.py --config=FILE[:ARG] [--config.k=v ...]
    [--compare=FILE[:ARG],...] [--variant=k=v[,k=v...]] ...
    [--steps=20] [--block=2] [--warmup=3] [--out=compare.json]

Each variant is the main config, a `--compare` config (with the same --config.* overrides)
or the main config with one `--variant`'s keys changed, e.g.
`--variant=model.norm=rmsnorm --variant=model.remat=full`. Every variant's step is built as
the loop builds it (benchmark.setup) and compiled first; then, round after round, each runs
`--block` steps, each blocked and timed, until each has run `--steps` (rounded up to whole
blocks). All variants thus share the machine's load, which on a shared or throttled host
drifts by 20% and more between separate runs of scripts/benchmark.py: decide A/B questions
here, quote absolute speeds from benchmark.py. --config, --steps, --warmup and --out are
scripts/benchmark.py's flags.
Prints per variant the median, p10 and p90 step time, its ratio to the first variant, compile
time and XLA's memory estimate.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time

from absl import app, flags, logging
from ml_collections import config_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "scripts")):
  if _path not in sys.path:
    sys.path.insert(0, _path)

import benchmark  # noqa: E402  (no JAX import; defines --config, --steps, --warmup, --out)

from resnorm_jax import cli  # noqa: E402

_COMPARE = flags.DEFINE_list("compare", [], "More configs (FILE[:ARG],...), same overrides.")
_VARIANT = flags.DEFINE_multi_string(
  "variant", [], "The main config with these keys changed: k=v[,k=v...] (repeatable)."
)
_BLOCK = flags.DEFINE_integer("block", 2, "Consecutive steps of one variant per round.")


def _coerce(key: str, old, text: str):
  """`text` as the type of the config's current value `old` (as config_flags parses)."""
  if isinstance(old, bool):
    if text not in ("true", "false"):
      raise ValueError(f"--variant {key}={text}: expected true or false")
    return text == "true"
  if old is None or isinstance(old, str):
    return text
  try:
    return type(old)(text)
  except (TypeError, ValueError):
    raise ValueError(
      f"--variant {key}={text}: expected {type(old).__name__} like {old!r}"
    ) from None


def apply_variant(config, spec: str):
  """A copy of `config` with spec's `k=v` pairs (comma-separated) set; ValueError names a bad
  key or value."""
  out = copy.deepcopy(config)
  pairs = [p for p in spec.split(",") if p]
  if not pairs:
    raise ValueError(f"--variant={spec!r}: expected k=v[,k=v...]")
  for pair in pairs:
    key, sep, text = pair.partition("=")
    if not sep or not key:
      raise ValueError(f"--variant={spec!r}: {pair!r} is not k=v")
    cli.refuse_moved_keys([key], where=f"--variant={spec!r}")
    *path, leaf = key.split(".")
    node = out
    try:
      for part in path:
        node = node[part]
      old = node[leaf]
    except (KeyError, AttributeError, TypeError):
      raise ValueError(f"--variant={spec!r}: no config key {key!r}") from None
    node[leaf] = _coerce(key, old, text)
  return out


def build_variants(main, compare, variants, overrides) -> list[tuple[str, object]]:
  """[(label, config)]: main, the --compare configs, then main with each --variant."""
  out = cli.load_configs(main, compare, overrides)
  out += [(spec, apply_variant(main, spec)) for spec in variants]
  return out


def compare(variants: list[tuple[str, object]], rounds: int, block: int, warmup: int) -> list[dict]:
  """Compiles every variant, then runs them round-robin; per-variant results."""
  import jax

  from resnorm_jax import loop
  from resnorm_jax.config_types import model_config_from

  for label, config in variants:  # bad input is refused before anything compiles
    try:
      loop.validate_train(config)
      model_config_from(config)
    except ValueError as e:
      raise ValueError(f"{label}: {e}") from None
  loop.keep_freed_host_memory()  # as loop.run does, before JAX starts threads
  runs = []
  for label, config in variants:
    s = benchmark.setup(config)
    t0 = time.perf_counter()
    compiled = s.step_fn.lower(s.abstract_sharded, s.abstract_batch).compile()
    compile_s = time.perf_counter() - t0
    mem = compiled.memory_analysis()
    state = jax.jit(s.init_fn, out_shardings=s.shardings)()
    for i in range(warmup):
      state, metrics = compiled(state, s.batch_at(i))
    jax.block_until_ready(state)
    t = config.train
    runs.append(
      {
        "label": label,
        "config_name": config.name,
        "compiled": compiled,
        "state": state,
        "batch_at": s.batch_at,
        "step": warmup,
        "times": [],
        "tokens_per_step": t.batch_size * t.seq_len,
        "compile_s": compile_s,
        "aot_temp_bytes": None if mem is None else int(mem.temp_size_in_bytes),
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
  base = benchmark.summarize(runs[0]["times"])["median"]
  results = []
  for r in runs:
    st = benchmark.summarize(r["times"])
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
  steps, block, warmup = benchmark._STEPS.value, _BLOCK.value, benchmark._WARMUP.value
  if steps < 1 or block < 1 or warmup < 0:
    cli.fail("--steps and --block must be >= 1 and --warmup >= 0")
  rounds = -(-steps // block)
  logging.set_verbosity(logging.WARNING)
  try:
    overrides = config_flags.get_override_values(flags.FLAGS["config"])
    variants = build_variants(benchmark._CONFIG.value, _COMPARE.value, _VARIANT.value, overrides)
    if len(variants) < 2:
      raise ValueError("nothing to compare: give --compare=FILE or --variant=k=v")
    load = os.getloadavg()[0]
    results = compare(variants, rounds, block, warmup)
  except ValueError as e:
    cli.fail(str(e))
  print(f"{rounds} rounds x {block} steps; load average {load:.2f} -> {os.getloadavg()[0]:.2f}")
  print(table(results), flush=True)
  out = benchmark._OUT.value
  if out:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
      json.dump({"command": " ".join(sys.argv), "results": results}, f, indent=2)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
