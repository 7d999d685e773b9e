"""Where one train step spends its time: per-op times from a profiler trace, joined to XLA's
optimized HLO (scripts/profile_step.py is the command line; its docstring says what is
printed). Each op the executable runs appears in the trace under its HLO instruction name;
the HLO gives its shape, whether it contains a dot, and the JAX op it came from, which tells
the forward pass, the backward pass and the update apart.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import gzip
import json
import os
import re
import tempfile
import time

PARTS = ("forward", "backward", "update")


@dataclasses.dataclass(frozen=True)
class Op:
  """One instruction of the optimized HLO entry computation."""

  name: str
  shape: str
  opcode: str
  has_dot: bool
  source: str  # the JAX op it came from (op_name metadata), "" if none

  @property
  def part(self) -> str:
    return part_of(self.source)


def part_of(source: str) -> str:
  """The pass an op_name belongs to: backward (transposed), forward (differentiated), or the
  update (everything outside the gradient)."""
  if "transpose(jvp" in source:
    return "backward"
  if "jvp(" in source:
    return "forward"
  return "update"


# name, parameter list, body of each computation of an HLO text. A body ends at a line that is
# exactly "}": an instruction's attributes may span lines (a Pallas kernel's
# frontend_attributes end in a line "}}, metadata=..."; read to the first "\n}", a body lost
# every op after its first splash call).
COMPUTATION = re.compile(r"^%?([\w.\-]+) \(([^\n]*)\) -> [^\n]*\{\n(.*?)\n\}$", re.M | re.S)
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (\([^)]*\)|\S+) ([a-z][\w\-]*)\(")
_CONTAINERS = ("while", "call", "conditional")
_CONTROL_FLOW = re.compile(r"(?:body|branch_computations|true_computation)=")


def _called(body: str, bodies: dict[str, str]) -> list[str]:
  """Computations an instruction list runs as thunks: loop bodies and conditions, branches,
  and called computations that hold control flow (XLA:CPU wraps a while loop in a call)."""
  names = re.findall(r"(?:body|condition|true_computation|false_computation)=%([\w.\-]+)", body)
  for group in re.findall(r"branch_computations=\{([^}]*)\}", body):
    names += re.findall(r"%([\w.\-]+)", group)
  for name in re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", body):
    if _CONTROL_FLOW.search(bodies.get(name, "")):
      names.append(name)
  return names


def entry_computation(text: str) -> tuple[str, str]:
  """(signature, body) of an HLO text's ENTRY computation (its body to the line "}")."""
  start = text.find("\nENTRY ")
  if start < 0:
    raise ValueError("no ENTRY computation in the HLO text")
  head, body = text[start + 1 :].split("{\n", 1)
  end = re.search(r"\n\}$", body, re.M)
  return head, body[: end.start()] if end else body


def parse_hlo(text: str) -> dict[str, Op]:
  """Instruction name -> Op for every instruction that runs as an op of the executable.

  Those are the instructions of the entry computation and of the computations it runs
  (a scanned layer stack's while body and condition, conditional branches), recursively;
  instructions inside fusions run as part of their fusion and are not listed.
  """
  bodies = {m.group(1): m.group(3) for m in COMPUTATION.finditer(text)}
  _, entry = entry_computation(text)
  executed, queue, seen = [], [entry], set()
  while queue:
    body = queue.pop()
    executed.append(body)
    for name in _called(body, bodies):
      if name not in seen and name in bodies:
        seen.add(name)
        queue.append(bodies[name])
  ops = {}
  for body in executed:
    for line in body.splitlines():
      m = _INSTRUCTION.match(line)
      if not m:
        continue
      name, shape, opcode = m.groups()
      called = re.search(r"calls=%([\w.\-]+)", line)
      fused = bodies.get(called.group(1), "") if called else ""
      has_dot = opcode in ("dot", "convolution") or bool(re.search(r" (dot|convolution)\(", fused))
      if opcode in _CONTAINERS:  # their time is their body's ops: counted there
        continue
      source = re.search(r'op_name="([^"]*)"', line)
      ops[name] = Op(name, shape, opcode, has_dot, source.group(1) if source else "")
  return ops


def trace_events(trace_dir: str) -> list[dict]:
  """The complete ("X") events of the perfetto trace jax.profiler wrote under trace_dir."""
  files = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
  if not files:
    raise FileNotFoundError(f"no perfetto_trace.json.gz under {trace_dir}")
  with gzip.open(max(files, key=os.path.getmtime)) as f:
    trace = json.load(f)
  events = trace["traceEvents"] if isinstance(trace, dict) else trace
  return [e for e in events if e.get("ph") == "X" and "dur" in e]


def busy_union_us(spans: list[tuple[float, float]]) -> float:
  """Length of the union of [start, end) intervals: the time at least one thread was busy."""
  total, end = 0.0, float("-inf")
  for start, stop in sorted(spans):
    if start >= end:
      total += stop - start
      end = stop
    elif stop > end:
      total += stop - end
      end = stop
  return total


_WRAPPERS = {"closed_call", "while", "body", "cond", "checkpoint"}


def short_source(source: str) -> str:
  """The JAX op of an op_name, without the jit/jvp/transpose/loop/checkpoint wrappers.

  `rematted_computation/` stays: it marks the forward ops a remat policy recomputes.
  """
  parts = [p for p in source.split("/") if p and not re.match(r"^(jit|jvp|transpose)\(", p)]
  parts = [p for p in parts if p not in _WRAPPERS]
  return "/".join(parts[-2:]) if parts else "(none)"


def breakdown(ops: dict[str, Op], events: list[dict], steps: int, top: int = 25) -> dict:
  """Per-step milliseconds by part and kind, the busiest ops, and thread use."""
  per_op = collections.defaultdict(lambda: [0.0, 0])
  spans, by_thread = [], collections.defaultdict(float)
  for e in events:
    if e["name"] in ops:
      per_op[e["name"]][0] += e["dur"]
      per_op[e["name"]][1] += 1
      spans.append((e["ts"], e["ts"] + e["dur"]))
      by_thread[e.get("tid")] += e["dur"]
  ms = lambda us: us / steps / 1e3
  parts = {(p, k): [0.0, 0] for p in PARTS for k in ("dot", "other")}
  for name, (us, _) in per_op.items():
    op = ops[name]
    cell = parts[(op.part, "dot" if op.has_dot else "other")]
    cell[0] += us
    cell[1] += 1
  by_source = collections.defaultdict(lambda: [0.0, 0])
  for name, (us, _) in per_op.items():
    cell = by_source[(ops[name].part, short_source(ops[name].source))]
    cell[0] += us
    cell[1] += 1
  total_us = sum(us for us, _ in per_op.values())
  busiest = sorted(per_op.items(), key=lambda kv: -kv[1][0])[:top]
  return {
    "steps": steps,
    "matched_ops": len(per_op),
    "hlo_ops": len(ops),
    "kernel_ms": ms(total_us),
    "any_thread_busy_ms": ms(busy_union_us(spans)),
    "threads": len(by_thread),
    "parts": [{"part": p, "kind": k, "ms": ms(us), "ops": n} for (p, k), (us, n) in parts.items()],
    "by_source": [
      {"part": p, "source": src, "ms": ms(us), "ops": n}
      for (p, src), (us, n) in sorted(by_source.items(), key=lambda kv: -kv[1][0])[:top]
    ],
    "top": [
      {
        "name": name,
        "ms": ms(us),
        "calls_per_step": n / steps,
        "shape": ops[name].shape,
        "part": ops[name].part,
        "dot": ops[name].has_dot,
        "source": ops[name].source.removeprefix("jit(train_step)/"),
      }
      for name, (us, n) in busiest
    ],
  }


def profile(config, steps: int = 20, warmup: int = 3, top: int = 25) -> dict:
  """Compiles the config's train step, traces `steps` steps and returns `breakdown`."""
  import jax

  from resnorm_jax.train import run_setup

  run_setup.keep_freed_host_memory()
  s = run_setup.build(config)  # the loop's run setup
  batch_at = run_setup.batches(s).train
  compiled = s.compile_step()
  ops = parse_hlo(compiled.as_text())
  state = s.init_state()
  for i in range(warmup):
    state, metrics = compiled(state, batch_at(i))
  jax.block_until_ready(state)
  batches = [batch_at(warmup + i) for i in range(steps)]
  jax.block_until_ready(batches)
  with tempfile.TemporaryDirectory() as trace_dir:
    with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
      t0 = time.perf_counter()
      for batch in batches:
        state, metrics = compiled(state, batch)
      jax.block_until_ready((state, metrics))
      wall = time.perf_counter() - t0  # the steps, not the trace's start and stop
    events = trace_events(trace_dir)
  out = breakdown(ops, events, steps, top)
  out["traced_wall_ms_per_step"] = wall / steps * 1e3
  out["config_name"] = config.name
  return out


def table(r: dict) -> str:
  lines = [
    f"{r['config_name']}: {r['steps']} traced steps; {r['matched_ops']} of the {r['hlo_ops']} "
    "HLO instructions ran as ops (the rest: parameters, bitcasts, tuples); per step:",
    f"  kernels {r['kernel_ms']:.2f} ms summed over {r['threads']} thread(s); some thread "
    f"busy {r['any_thread_busy_ms']:.2f} ms; traced wall {r['traced_wall_ms_per_step']:.2f} ms",
    "",
    f"  {'part':<9} {'kind':<6} {'ms':>8} {'ops':>5}",
  ]
  for p in r["parts"]:
    lines.append(f"  {p['part']:<9} {p['kind']:<6} {p['ms']:8.2f} {p['ops']:5d}")
  lines += ["", f"  {'ms':>7} {'ops':>5}  {'part':<9} source (JAX op)"]
  for o in r["by_source"]:
    lines.append(f"  {o['ms']:7.3f} {o['ops']:5d}  {o['part']:<9} {o['source']}")
  lines += ["", f"  {'ms':>7}  {'op':<28} {'shape':<26} {'part':<9} source"]
  for o in r["top"]:
    lines.append(
      f"  {o['ms']:7.3f}  {o['name']:<28} {o['shape']:<26} {o['part']:<9} {o['source'][-60:]}"
    )
  return "\n".join(lines)
