"""Where a compiled step's HBM bytes go: each op of the optimized HLO, its bytes, its loop.

The TPU cost model gives one number for a step's bytes (`cost_analysis()["bytes accessed"]`),
not where they go. This reads the compiled program's text: every instruction that runs as an
op (the entry computation's, and those of the loops and branches it runs, recursively; an
instruction inside a fusion runs as part of its fusion) with the bytes it reads and writes,
times the trip count of every loop around it (a scanned layer stack's loop, and the loops
XLA makes of a matmul whose contraction is sharded, "windowed einsums").

Only arrays in HBM count: an array whose layout names another memory space (`S(1)`: the
TPU core's VMEM, where XLA's memory-space assignment keeps what fits, prefetched from HBM by
async copies, which count) moves no HBM bytes.

The bytes of one op: its result plus its operands, where a fusion operand only sliced inside
the fusion, or inside a fusion nested in it, counts its slices (a scanned stack's stacked
weights are read one layer at a time), and an in-place dynamic-update-slice counts the
update, not the buffer. Those are the rules of XLA's own cost analysis (HloCostAnalysis) in
outline; this is an attribution, to be read beside the cost model's total
(`scripts/hlo_bytes.py` prints both), not a second model.

Each op is named by the JAX op it came from (its `op_name` metadata, shortened by
`step_profile.short_source`) and by its pass: forward, backward (`transpose(jvp`), the
forward recomputed by remat (`rematted_computation`), or the update.
"""

from __future__ import annotations

import collections
import dataclasses
import re

from resnorm_jax.hardware.step_profile import COMPUTATION, entry_computation, part_of, short_source

_HEAD = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = ")
_OPCODE = re.compile(r" ([a-z][\w\-]*)\(")
_ARRAY = re.compile(
  r"\b(pred|s4|u4|s8|u8|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64|c64|c128|f8e\w+)\[([0-9,]*)\]"
)
_WIDTH = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2,
          "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8,
          "c128": 16}  # fmt: skip
# Ops that move no data of their own (views, tuples, control flow whose body is counted).
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "call",
         "conditional", "opt-barrier", "partition-id", "replica-id", "after-all",
         "iota"}  # fmt: skip
PASSES = ("forward", "recomputed", "backward", "update", "unnamed")
# The counting rules' version, kept with a cached count (tune.py): 2 reads a computation to its
# line "}" (1 stopped at a Pallas kernel's multi-line attributes, losing the ops after it); 3
# sees a slice taken inside a nested fusion (2 charged the whole stacked buffer).
# 4 counts only the arrays that live in HBM (3 counted VMEM's too, the memory space `S(1)`).
VERSION = 4


_LAID_OUT = re.compile(_ARRAY.pattern + r"(\{[^}]*\})?")
_SPACE = re.compile(r"S\((\d+)\)")


def _laid_out(shape: str) -> list[tuple[str, float, bool]]:
  """Each array of an HLO shape string (a tuple's in order): its dims, its bytes, and whether
  it lives in HBM."""
  out = []
  for dtype, dims, layout in _LAID_OUT.findall(shape):
    n = 1
    for d in filter(None, dims.split(",")):
      n *= int(d)
    space = _SPACE.search(layout or "")
    width = _WIDTH.get(dtype, 1 if dtype.startswith("f8") else 4)
    out.append((dims, n * width, not space or space.group(1) == "0"))
  return out


def arrays(shape: str) -> list[tuple[float, bool]]:
  """Each array of an HLO shape string (a tuple's in order): its bytes, and whether it lives
  in HBM. A layout's memory space `S(n)` other than 0 is not HBM: on a TPU `S(1)` is the
  core's VMEM, where the memory-space assignment keeps what fits (prefetched by an async copy
  from HBM, which is counted); `S(2)` and up are other on-chip memories, `S(5)` the host."""
  return [(nbytes, hbm) for _, nbytes, hbm in _laid_out(shape)]


def _async_destination(shape: str) -> tuple[float, bool]:
  """An async start's destination (bytes, in HBM): its result tuple's last array that is not
  a scalar (the trailing u32[]/s32[] are the op's context: `copy-start` is (source,
  destination, u32[]), `slice-start` ((source), destination, s32[]))."""
  return next(((b, hbm) for dims, b, hbm in reversed(_laid_out(shape)) if dims), (0.0, False))


def array_bytes(shape: str, hbm_only: bool = False) -> float:
  """Bytes of every array in an HLO shape string (a tuple: the sum of its arrays); with
  `hbm_only`, of those in HBM."""
  return sum(b for b, hbm in arrays(shape) if hbm or not hbm_only)


def first_array(shape: str) -> str:
  """The first array of an HLO shape, without its layout: 'bf16[16,512,512]'."""
  m = _ARRAY.search(shape)
  return f"{m.group(1)}[{m.group(2)}]" if m else shape


@dataclasses.dataclass(frozen=True)
class OpBytes:
  """One op of the executable: its bytes per run and how many times a step runs it."""

  name: str
  opcode: str
  shape: str
  nbytes: float  # per run
  trips: int  # product of the trip counts of the loops around it
  source: str  # op_name metadata
  cycles: float = 0.0  # the TPU compiler's estimate per run (backend config), 0 where none

  @property
  def step_bytes(self) -> float:
    return self.nbytes * self.trips

  @property
  def part(self) -> str:
    """step_profile's pass, with the forward ops remat recomputes told apart; "unnamed" for
    an op XLA added with no JAX op name (a layout copy, an async slice or copy)."""
    if not self.source:
      return "unnamed"
    return "recomputed" if "rematted_computation" in self.source else part_of(self.source)

  @property
  def jax_op(self) -> str:
    """The JAX op it came from, the last part of its op name (`dot_general`,
    `convert_element_type`, `pallas_call` for a kernel); "(unnamed)" where it has none."""
    return short_source(self.source).split("/")[-1] if self.source else "(unnamed)"


def _computations(text: str) -> dict[str, tuple[str, list[str]]]:
  """Computation name -> (its parameter list text, its instructions, one line each)."""
  return {m.group(1): (m.group(2), _joined(m.group(3))) for m in COMPUTATION.finditer(text)}


def _joined(body: str) -> list[str]:
  """A computation body's instructions, one line each: a line that does not open an
  instruction (`%name = `) continues the one before it."""
  out: list[str] = []
  for line in body.splitlines():
    if out and not _HEAD.match(line):
      out[-1] += "\n" + line
    else:
      out.append(line)
  return out


def _instructions(lines: list[str]) -> list[tuple[str, str, str, str, str]]:
  """(name, shape, opcode, operand text, whole line) of each instruction line."""
  out = []
  for line in lines:
    m = _HEAD.match(line)
    if not m:
      continue
    rest = line[m.end() :]
    end = _closing(rest, 1) if rest.startswith("(") else rest.find(" ")
    shape, rest = rest[:end], rest[end:]
    op = _OPCODE.match(rest)
    if not op:
      continue
    rest = rest[op.end() :]
    out.append((m.group(1), shape, op.group(1), rest[: _closing(rest, 0) - 1], line))
  return out


def _closing(text: str, start: int) -> int:
  """The index just past the parenthesis that closes one opened before `text[start]`."""
  depth, i = 1, start
  while i < len(text) and depth:
    depth += {"(": 1, ")": -1}.get(text[i], 0)
    i += 1
  return i


def trip_count(while_line: str, cond_lines: list[str]) -> int:
  """A while loop's trip count: XLA's `known_trip_count` where the backend config has it,
  else from its condition, `i < N` against a constant N (the form of a scan's and a windowed
  einsum's loop; a compare, or a fusion of one, at the condition's root); 1 otherwise."""
  known = re.search(r'"known_trip_count":\{"n":"(\d+)"', while_line)
  if known:
    return max(int(known.group(1)), 1)
  consts = {}
  for name, _, opcode, _, line in _instructions(cond_lines):
    if opcode == "constant":
      m = re.search(r"constant\((-?\d+)\)", line)
      if m:
        consts[name] = int(m.group(1))
  for _, _, opcode, operands, line in _instructions(cond_lines):
    if line.lstrip().startswith("ROOT") and opcode in ("compare", "fusion"):
      for ref in re.findall(r"%([\w.\-]+)", operands):
        if ref in consts:
          return max(consts[ref], 1)
  return 1


_VIEWS = ("bitcast", "reshape", "copy", "transpose")  # a fused view: its users read the data


def _sliced_reads(
  fused: tuple[str, list[str]], comps: dict | None = None, depth: int = 0
) -> dict[int, float]:
  """Per parameter index of a fused computation, the bytes it reads where every use of the
  parameter is a slice or an in-place update's buffer, seen through the views (bitcast,
  reshape, copy, transpose) and the nested fusions (a fusion inside a fusion: an async
  collective fusion's norm, say, that slices one layer of a stacked buffer) between them;
  a parameter read whole is absent."""
  _, lines = fused
  insts = _instructions(lines)
  users: dict[str, list[tuple[str, str, str, int, str]]] = collections.defaultdict(list)
  for name, shape, opcode, operands, line in insts:
    for pos, ref in enumerate(re.findall(r"%([\w.\-]+)", operands)):
      users[ref].append((name, opcode, shape, pos, line))

  def sliced(name: str, hops: int = 0) -> float | None:
    """Bytes read of `name` where every use is a slice or an in-place update's buffer, else
    None (read whole)."""
    total = 0.0
    for user, opcode, shape, pos, line in users.get(name, []):
      if opcode in ("dynamic-slice", "slice") and pos == 0:
        total += array_bytes(shape)
      elif opcode == "dynamic-update-slice" and pos == 0:
        continue
      elif opcode in _VIEWS and hops < 8:
        inner = sliced(user, hops + 1)
        if inner is None:
          return None
        total += inner
      elif opcode == "fusion" and comps is not None and depth < 4:
        called = re.search(r"calls=%([\w.\-]+)", line)
        nested = comps.get(called.group(1)) if called else None
        inner = _sliced_reads(nested, comps, depth + 1).get(pos) if nested else None
        if inner is None:
          return None
        total += inner
      else:
        return None
    return total

  out = {}
  for name, _, opcode, _, line in insts:
    if opcode != "parameter" or not users.get(name):
      continue
    part = sliced(name)
    if part is not None:
      out[int(re.search(r"parameter\((\d+)\)", line).group(1))] = part
  return out


def _fusion_operand_bytes(
  fused: tuple[str, list[str]], operand_bytes: list[float], comps: dict | None = None
) -> float:
  """The bytes a fusion reads: each parameter whole, except one only sliced (its slices) or
  the buffer of an in-place dynamic-update-slice (nothing: the update is the write), seen
  through the views (bitcast, reshape, copy, transpose) and nested fusions between them
  (`comps`: the program's computations, to look into a nested fusion)."""
  parts = _sliced_reads(fused, comps)
  total = 0.0
  for _, _, opcode, _, line in _instructions(fused[1]):
    if opcode != "parameter":
      continue
    idx = int(re.search(r"parameter\((\d+)\)", line).group(1))
    whole = operand_bytes[idx] if idx < len(operand_bytes) else 0.0
    total += min(whole, parts[idx]) if idx in parts else whole
  return total


def _update_bytes(fused: tuple[str, list[str]] | None, shape: str) -> float:
  """The HBM bytes a fusion writes: its result's arrays that live in HBM, where an in-place
  dynamic-update-slice (at the root, behind views, or an element of a root tuple) writes
  only its update."""
  outer = arrays(shape)
  if fused is None:
    return sum(b for b, hbm in outer if hbm)
  if not any(hbm for _, hbm in outer):
    return 0.0
  insts = _instructions(fused[1])
  by_name = {
    name: (s, op, re.findall(r"%([\w.\-]+)", operands)) for name, s, op, operands, _ in insts
  }

  def written(name: str, depth: int = 0) -> float:
    shape_, opcode, refs = by_name[name]
    if opcode == "dynamic-update-slice" and len(refs) > 1 and refs[1] in by_name:
      return array_bytes(by_name[refs[1]][0])
    if opcode in _VIEWS and refs and refs[0] in by_name and depth < 8:
      return written(refs[0], depth + 1)
    if opcode == "tuple":
      return sum(written(r, depth + 1) for r in refs if r in by_name)
    return array_bytes(shape_)

  root = next((i for i in insts if "ROOT" in i[4].split("=", 1)[0]), None)
  if root is None:
    return sum(b for b, hbm in outer if hbm)
  name, _, opcode, _, _ = root
  refs = by_name[name][2]
  if opcode == "tuple" and len(refs) == len(outer) and all(r in by_name for r in refs):
    return sum(written(r, 1) for r, (_, hbm) in zip(refs, outer, strict=True) if hbm)
  return written(name)


def op_bytes(text: str) -> list[OpBytes]:
  """Every op the compiled program runs, with its bytes per run and its loops' trip count."""
  comps = _computations(text)
  head, body = entry_computation(text)
  entry = (head, _joined(body))
  shapes: dict[str, str] = {}
  for _, lines in [*comps.values(), entry]:
    for name, shape, *_ in _instructions(lines):
      shapes[name] = shape
  out: list[OpBytes] = []
  queue, seen = [(entry, 1)], set()
  while queue:
    (_, lines), trips = queue.pop()
    for name, shape, opcode, operands, line in _instructions(lines):
      if opcode == "while":
        body = re.search(r"body=%([\w.\-]+)", line).group(1)
        cond = re.search(r"condition=%([\w.\-]+)", line).group(1)
        n = trip_count(line, comps[cond][1] if cond in comps else [])
        for comp, k in ((body, n), (cond, n + 1)):
          if comp in comps and comp not in seen:
            seen.add(comp)
            queue.append((comps[comp], trips * k))
        continue
      if opcode in ("call", "conditional"):
        called = re.findall(
          r"(?:to_apply|true_computation|false_computation)=%([\w.\-]+)", line
        ) + [n for g in re.findall(r"branch_computations=\{([^}]*)\}", line)
             for n in re.findall(r"%([\w.\-]+)", g)]  # fmt: skip
        for comp in called:
          if comp in comps and comp not in seen:
            seen.add(comp)
            queue.append((comps[comp], trips))
        continue
      if opcode in _FREE or opcode.endswith("-done"):
        continue
      refs = re.findall(r"%([\w.\-]+)", operands)
      in_bytes = [array_bytes(shapes.get(r, ""), hbm_only=True) for r in refs]
      fused = None
      if opcode == "fusion":
        called = re.search(r"calls=%([\w.\-]+)", line)
        fused = comps.get(called.group(1)) if called else None
      if fused is not None:
        nbytes = _fusion_operand_bytes(fused, in_bytes, comps) + _update_bytes(fused, shape)
      elif opcode == "dynamic-update-slice":  # the update read, and written into the buffer
        update = array_bytes(shapes.get(refs[1], "")) if len(refs) > 1 else 0.0
        nbytes = (in_bytes[1] if len(in_bytes) > 1 else 0.0) + (
          update if array_bytes(shape, hbm_only=True) else 0.0
        )
      elif opcode in ("dynamic-slice", "slice"):  # the slice read, and written
        src_hbm = bool(refs) and array_bytes(shapes.get(refs[0], ""), hbm_only=True) > 0
        nbytes = array_bytes(shape) * src_hbm + array_bytes(shape, hbm_only=True)
      elif opcode.endswith("-start"):  # async: reads its operands (a slice: its slice only)
        piece, dest_hbm = _async_destination(shape)
        read = piece * (sum(in_bytes) > 0) if opcode == "slice-start" else sum(in_bytes)
        nbytes = read + piece * dest_hbm
      else:
        nbytes = sum(in_bytes) + array_bytes(shape, hbm_only=True)
      src = re.search(r'op_name="([^"]*)"', line)
      cyc = re.search(r'"estimated_cycles":"(\d+)"', line)
      out.append(
        OpBytes(
          name,
          opcode,
          shape,
          nbytes,
          trips,
          src.group(1) if src else "",
          float(cyc.group(1)) if cyc else 0.0,
        )  # fmt: skip
      )
  return out


def summary(ops: list[OpBytes], key=lambda o: o.part) -> list[tuple[str, float, int]]:
  """(group, bytes per step, ops) by `key`, largest first."""
  total: dict[str, float] = collections.defaultdict(float)
  count: dict[str, int] = collections.defaultdict(int)
  for o in ops:
    k = key(o)
    total[k] += o.step_bytes
    count[k] += 1
  return sorted(((k, v, count[k]) for k, v in total.items()), key=lambda r: -r[1])
