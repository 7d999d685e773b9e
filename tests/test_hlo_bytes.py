"""hlo_bytes: each op's bytes and loop trips from a compiled program's text (CPU programs here;
the TPU rows are in docs/tpu_compile/README.md)."""

import jax
import jax.numpy as jnp
import pytest

from resnorm_jax.hardware import hlo_bytes

W = jnp.ones((4, 256, 256), jnp.float32)
X = jnp.ones((64, 256), jnp.float32)


def _scanned(w, x):
  return jax.lax.scan(lambda h, wi: (jnp.tanh(h @ wi), None), x, w)[0]


def _unrolled(w, x):
  h = x
  for i in range(w.shape[0]):
    h = jnp.tanh(h @ w[i])
  return h


def _ops(f, *args):
  compiled = jax.jit(f).lower(*args).compile()
  return hlo_bytes.op_bytes(compiled.as_text()), compiled.cost_analysis()["bytes accessed"]


def test_an_unrolled_program_counts_what_xlas_cost_analysis_counts():
  ops, cost = _ops(_unrolled, W, X)
  assert all(o.trips == 1 for o in ops)
  assert sum(o.step_bytes for o in ops) == pytest.approx(cost, rel=0.01)


def test_a_scanned_stack_counts_its_loop_body_once_per_layer():
  scanned, cost_once = _ops(_scanned, W, X)
  unrolled, _ = _ops(_unrolled, W, X)
  total = sum(o.step_bytes for o in scanned)
  # The cost analysis counts the loop body once; the attribution once per layer, and a layer's
  # slice of the stacked weights, not the whole stack (that would add 3 x 4 MiB).
  assert total == pytest.approx(sum(o.step_bytes for o in unrolled), rel=0.1)
  assert total > 2 * cost_once
  matmuls = [o for o in scanned if o.nbytes >= 256 * 256 * 4]
  assert matmuls and all(o.trips == 4 for o in matmuls)


def test_nested_loops_multiply_their_trip_counts():
  def nested(w, x):
    def outer(h, _):
      return _scanned(w, h), None

    return jax.lax.scan(outer, x, None, length=3)[0]

  ops, _ = _ops(nested, W, X)
  matmuls = [o for o in ops if o.nbytes >= 256 * 256 * 4]
  assert matmuls and all(o.trips == 12 for o in matmuls)
  assert max(o.trips for o in ops) == 15  # the inner condition: 4 + 1 checks, 3 times


def test_trip_count_reads_the_known_count_or_the_condition():
  assert hlo_bytes.trip_count('backend_config={"known_trip_count":{"n":"96"}}', []) == 96
  cond = [
    "  %constant.1 = u32[] constant(8)",
    "  %p = (u32[]) parameter(0)",
    "  %i = u32[] get-tuple-element(%p), index=0",
    "  ROOT %lt = pred[] compare(%i, %constant.1), direction=LT",
  ]
  assert hlo_bytes.trip_count("%while.1 = while(%t)", cond) == 8
  assert hlo_bytes.trip_count("%while.1 = while(%t)", cond[1:]) == 1


def test_array_bytes_sums_a_tuple_and_ignores_layouts():
  shape = "(bf16[16,512,8,64]{1,3,2,0:T(8,128)(2,1)S(1)}, f32[8]{0}, /*index=2*/s32[])"
  assert hlo_bytes.array_bytes(shape) == 16 * 512 * 8 * 64 * 2 + 8 * 4 + 4


def test_parts_tell_forward_recomputed_backward_and_update_apart():
  def part(src):
    return hlo_bytes.OpBytes("x", "fusion", "f32[]", 4, 1, src).part

  assert part("jit(step)/jvp()/while/body/dot_general") == "forward"
  assert part("jit(step)/transpose(jvp())/while/body/dot_general") == "backward"
  assert part("jit(step)/transpose(jvp())/while/body/checkpoint/rematted_computation/dot") == (
    "recomputed"
  )
  assert part("jit(step)/adam/mul") == "update"


_SLICED = """HloModule m

%read (param_0: f32[8,64,64], param_1: s32[]) -> f32[64,64] {
  %param_0 = f32[8,64,64]{2,1,0} parameter(0)
  %param_1 = s32[] parameter(1)
  %bitcast.1 = f32[8,4096]{1,0} bitcast(%param_0)
  %ds = f32[1,4096]{1,0} dynamic-slice(%bitcast.1, %param_1, %param_1), dynamic_slice_sizes={1,4096}
  ROOT %bitcast.2 = f32[64,64]{1,0} bitcast(%ds)
}

%write (param_0: f32[8,4096], param_1: f32[64,64], param_2: s32[]) -> f32[8,64,64] {
  %param_0 = f32[8,4096]{1,0} parameter(0)
  %param_1 = f32[64,64]{1,0} parameter(1)
  %param_2 = s32[] parameter(2)
  %bitcast.3 = f32[1,4096]{1,0} bitcast(%param_1)
  %dus = f32[8,4096]{1,0} dynamic-update-slice(%param_0, %bitcast.3, %param_2, %param_2)
  ROOT %bitcast.4 = f32[8,64,64]{2,1,0} bitcast(%dus)
}

ENTRY %main (w: f32[8,64,64], i: s32[], b: f32[8,4096]) -> f32[8,64,64] {
  %w = f32[8,64,64]{2,1,0} parameter(0)
  %i = s32[] parameter(1)
  %b = f32[8,4096]{1,0} parameter(2)
  %row = f32[64,64]{1,0} fusion(%w, %i), kind=kLoop, calls=%read
  ROOT %stored = f32[8,64,64]{2,1,0} fusion(%b, %row, %i), kind=kLoop, calls=%write
}
"""


def test_a_stacked_buffer_sliced_or_updated_behind_views_counts_one_slice():
  """A scanned stack reads one layer of its stacked weights and writes one layer of its
  saved activations in place, often through a bitcast: one 16 KiB slice each way, not the
  128 KiB buffer."""
  ops = {o.name: o for o in hlo_bytes.op_bytes(_SLICED)}
  row = 64 * 64 * 4
  assert ops["row"].nbytes == row + 4 + row  # the slice and the index read, the row written
  assert ops["stored"].nbytes == row + 4 + row  # the update and the index read, the update written


_NESTED = """HloModule m

%norm (param_0: f32[8,64,64], param_1: s32[], param_2: f32[64]) -> f32[64,64] {
  %param_0 = f32[8,64,64]{2,1,0} parameter(0)
  %param_1 = s32[] parameter(1)
  %param_2 = f32[64]{0} parameter(2)
  %ds = f32[1,64,64]{2,1,0} dynamic-slice(%param_0, %param_1, %param_1, %param_1),
    dynamic_slice_sizes={1,64,64}
  %x = f32[64,64]{1,0} bitcast(%ds)
  %g = f32[64,64]{1,0} broadcast(%param_2), dimensions={1}
  ROOT %y = f32[64,64]{1,0} multiply(%x, %g)
}

%proj (param_0: f32[64,64], param_1: f32[8,64,64], param_2: s32[], param_3: f32[64]) -> f32[64,64] {
  %param_0 = f32[64,64]{1,0} parameter(0)
  %param_1 = f32[8,64,64]{2,1,0} parameter(1)
  %param_2 = s32[] parameter(2)
  %param_3 = f32[64]{0} parameter(3)
  %n = f32[64,64]{1,0} fusion(%param_1, %param_2, %param_3), kind=kLoop, calls=%norm
  ROOT %d = f32[64,64]{1,0} dot(%n, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%whole (param_0: f32[8,64,64]) -> f32[64,64] {
  %param_0 = f32[8,64,64]{2,1,0} parameter(0)
  ROOT %r = f32[64,64]{1,0} reduce(%param_0), dimensions={0}
}

%outer (param_0: f32[8,64,64]) -> f32[64,64] {
  %param_0 = f32[8,64,64]{2,1,0} parameter(0)
  ROOT %f = f32[64,64]{1,0} fusion(%param_0), kind=kLoop, calls=%whole
}

ENTRY %main (w: f32[64,64], h: f32[8,64,64], i: s32[], g: f32[64]) -> f32[64,64] {
  %w = f32[64,64]{1,0} parameter(0)
  %h = f32[8,64,64]{2,1,0} parameter(1)
  %i = s32[] parameter(2)
  %g = f32[64]{0} parameter(3)
  %q = f32[64,64]{1,0} fusion(%w, %h, %i, %g), kind=kOutput, calls=%proj
  ROOT %all = f32[64,64]{1,0} fusion(%h), kind=kLoop, calls=%outer
}
"""


def test_a_stacked_buffer_sliced_inside_a_nested_fusion_counts_its_slice():
  """Pre-LN's norm fused into a projection reads one layer of the stacked saved inputs
  inside a fusion nested in the projection's: the slice is counted, not the 128 KiB buffer;
  a nested fusion that reads the whole buffer is charged the whole."""
  ops = {o.name: o for o in hlo_bytes.op_bytes(_NESTED)}
  layer = 64 * 64 * 4
  assert ops["q"].nbytes == layer + layer + 4 + 64 * 4 + layer  # w, the slice, i, g; q
  assert ops["all"].nbytes == 8 * layer + layer


_MULTILINE = """HloModule m

%body (p: (s32[], f32[64,64])) -> (s32[], f32[64,64]) {
  %p = (s32[], f32[64,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[64,64]{1,0} get-tuple-element(%p), index=1
  %k = f32[64,64]{1,0} custom-call(%x), custom_call_target="k", frontend_attributes={m={
"xprof_metadata":"{}"
}}, metadata={op_name="jit(step)/pallas_call"}
  %y = f32[64,64]{1,0} add(%k, %x)
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[64,64]{1,0}) tuple(%j, %y)
}

%cond (p: (s32[], f32[64,64])) -> pred[] {
  %p = (s32[], f32[64,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[64,64]) -> f32[64,64] {
  %x = f32[64,64]{1,0} parameter(0)
  %k0 = f32[64,64]{1,0} custom-call(%x), custom_call_target="k", frontend_attributes={m={
"xprof_metadata":"{}"
}}, metadata={op_name="jit(step)/pallas_call"}
  %zero = s32[] constant(0)
  %t = (s32[], f32[64,64]{1,0}) tuple(%zero, %k0)
  %w = (s32[], f32[64,64]{1,0}) while(%t), condition=%cond, body=%body
  ROOT %out = f32[64,64]{1,0} get-tuple-element(%w), index=1
}
"""


def test_an_attribute_over_several_lines_ends_neither_its_op_nor_its_computation():
  """A Pallas kernel's frontend_attributes span lines, one of them starting "}}": every op
  after it, in the loop body and in the entry, is still counted (a body read up to that line
  lost them: the 96-layer attributions of docs/tpu_compile stopped at the first splash call)."""
  ops = {o.name: o for o in hlo_bytes.op_bytes(_MULTILINE)}
  a = 64 * 64 * 4
  assert ops["k0"].nbytes == 2 * a and ops["k0"].trips == 1
  assert ops["k"].trips == 4 and ops["y"].trips == 4 and ops["y"].nbytes == 3 * a
  assert ops["k"].source == "jit(step)/pallas_call" and ops["k"].jax_op == "pallas_call"
  assert ops["y"].part == "unnamed" and ops["y"].jax_op == "(unnamed)"  # no op name: XLA's
  assert "j" in ops and "lt" in ops


_SPACES = """HloModule m

ENTRY %main (w: f32[64,64], x: f32[64,64]) -> f32[64,64] {
  %w = f32[64,64]{1,0} parameter(0)
  %x = f32[64,64]{1,0} parameter(1)
  %cs = (f32[64,64]{1,0}, f32[64,64]{1,0:S(1)}, u32[]{:S(2)}) copy-start(%x)
  %cd = f32[64,64]{1,0:S(1)} copy-done(%cs)
  %ss = ((f32[64,64]{1,0}), f32[16,64]{1,0:S(1)}, s32[]{:S(2)}) slice-start(%w),
    slice={[0:16], [0:64]}
  %sd = f32[16,64]{1,0:S(1)} slice-done(%ss)
  %vmem = f32[64,64]{1,0:S(1)} add(%cd, %cd)
  %back = f32[64,64]{1,0} multiply(%vmem, %cd)
  %both = f32[64,64]{1,0} add(%w, %x)
  ROOT %t = (f32[64,64]{1,0}, f32[64,64]{1,0}, f32[16,64]{1,0:S(1)}) tuple(%back, %both, %sd)
}
"""


def test_only_the_arrays_in_hbm_are_counted():
  """An array whose layout names another memory space (`S(1)`: a TPU core's VMEM) moves no
  HBM bytes: an op on VMEM operands into VMEM counts nothing, one that writes its VMEM result
  to HBM counts the write; an async copy from HBM to VMEM counts its read (its destination is
  the tuple's last array that is not the u32[] context), an async slice its slice only."""
  ops = {o.name: o for o in hlo_bytes.op_bytes(_SPACES)}
  full, piece = 64 * 64 * 4, 16 * 64 * 4
  assert ops["cs"].nbytes == full  # read from HBM; written to VMEM
  assert ops["ss"].nbytes == piece  # a quarter of w read; written to VMEM
  assert ops["vmem"].nbytes == 0
  assert ops["back"].nbytes == full  # VMEM operands, the result written to HBM
  assert ops["both"].nbytes == 3 * full
  assert hlo_bytes.arrays("(f32[2]{0:S(1)}, bf16[4]{0}, s32[])") == [
    (8, False),
    (8, True),
    (4, True),
  ]
