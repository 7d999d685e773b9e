"""Where a compiled step's HBM bytes go, op by op (resnorm_jax/hardware/hlo_bytes.py).

  python scripts/hlo_bytes.py --config=configs/postnorm_96L.py:paper --topology=v5e:4x4 \
      --mesh=fsdp --remat=full --attention=splash --flags=no_windowed --hlo_out=/tmp/step.hlo.gz
  python scripts/hlo_bytes.py --hlo_in=/tmp/step.hlo.gz        # read a saved program again

Compiles the train step deviceless for a TPU topology as `compile_for --tune` compiles a
candidate (the mesh, remat, attention and XLA flag set named), or reads a saved HLO text,
and prints the step's bytes per chip by pass (forward, the forward remat recomputes,
backward, update; unnamed: ops XLA added with no JAX op name), by opcode, by the JAX op each
came from, and the top ops: each op's reads and writes times the trip
counts of the loops around it (the layer scan; a windowed einsum's loop over weight shards).
Beside it, the TPU cost model's own bytes for the same compile (its loops counted once).
The compiler's per-op cycle estimates, where the backend config has them, are summed too.
"""

from __future__ import annotations

import argparse
import gzip
import sys

from resnorm_jax.hardware import target_compile as tc


def _read(path: str) -> str:
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt") as f:
    return f.read()


def _compile(args) -> tuple[str, dict]:
  tc.use_cpu_host()
  from resnorm_jax.config import cli
  from resnorm_jax.hardware import tune, tune_compile

  config = cli.load_config_file(args.config)
  c = tune.Candidate(args.mesh, args.remat, args.attention, args.flags)
  tune.flag_parts(c.flags)  # a bad name: ValueError before compiling
  tgt = tune.target(args.topology)
  tgt.flags = tune.accepted_flags(tgt.devices, tune.flags_of(c.flags), print)
  vocab, _ = tc.resolve_vocab(config, 0, "tpu")
  text, cost = tune_compile.compiled_text(config, tgt, c, vocab)
  print(f"compiled {config.name} on {tgt.name}: {c.label}")
  return text, cost


def report(text: str, cost: dict, top: int) -> list[str]:
  from resnorm_jax.hardware import hlo_bytes
  from resnorm_jax.hardware.step_profile import short_source

  ops = hlo_bytes.op_bytes(text)
  total = sum(o.step_bytes for o in ops)
  lines = [f"HBM bytes per chip per step, attributed: {total:.4g} ({len(ops)} ops)"]
  if cost.get("bytes accessed"):
    lines.append(
      f"the cost model's bytes for this compile (each loop's body counted once): "
      f"{cost['bytes accessed']:.4g}"
    )
  cycles = sum(o.cycles * o.trips for o in ops)
  if cycles:
    n = sum(1 for o in ops if o.cycles)
    lines.append(f"the compiler's per-op cycle estimates, on {n} of {len(ops)} ops: {cycles:.4g}")
  for title, key in (
    ("by pass", lambda o: o.part),
    ("by opcode", lambda o: o.opcode),
    ("by JAX op (the op name's last part)", lambda o: o.jax_op),
    ("by loop trips", lambda o: f"x{o.trips}"),
  ):
    lines.append(title)
    for k, v, n in hlo_bytes.summary(ops, key)[:8]:
      lines.append(f"  {k:<24} {v:10.4g} {v / total:6.1%}  ({n} ops)")
  lines.append(f"top {top} ops")
  for o in sorted(ops, key=lambda o: -o.step_bytes)[:top]:
    lines.append(
      f"  {o.step_bytes:10.4g} {o.step_bytes / total:6.1%}  x{o.trips:<4} {o.opcode:<12} "
      f"{hlo_bytes.first_array(o.shape):<24} {o.part:<10} {short_source(o.source)}"
    )
  return lines


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--config", help="FILE[:SCALE], as compile_for takes it")
  p.add_argument("--topology", help="a TPU topology, e.g. v5e:4x4")
  p.add_argument("--mesh", default="fsdp", help="data | fsdp | data_fsdp")
  p.add_argument("--remat", default="full")
  p.add_argument("--attention", default="dense", help="dense | splash")
  p.add_argument("--flags", default="default", help="default, maxtext, no_windowed, or a+b")
  p.add_argument("--hlo_in", default="", help="read this HLO text (.gz or plain): no compile")
  p.add_argument("--hlo_out", default="", help="also write the compiled HLO text here")
  p.add_argument("--top", type=int, default=20)
  args = p.parse_args(argv)
  if args.hlo_in:
    text, cost = _read(args.hlo_in), {}
  elif args.config and args.topology:
    text, cost = _compile(args)
    if args.hlo_out:
      with (gzip.open if args.hlo_out.endswith(".gz") else open)(args.hlo_out, "wt") as f:
        f.write(text)
  else:
    p.error("give --hlo_in, or --config and --topology")
  print("\n".join(report(text, cost, args.top)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
