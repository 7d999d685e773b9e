"""resnorm_jax/hardware/step_profile.py and scripts/profile_step.py: the HLO parser, the thread-use
arithmetic, and a traced smoke run whose per-part times add up. No timing assertions."""

import json
import os

import jax
import jax.numpy as jnp
import pytest

from resnorm_jax.hardware import step_profile as profile_step

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hlo(fn, *args) -> str:
  return jax.jit(fn).lower(*args).compile().as_text()


def test_parse_hlo_lists_the_ops_of_a_loop_body():
  def scanned(w, x):
    y, _ = jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=3)
    return jnp.sum(y)

  ops = profile_step.parse_hlo(_hlo(jax.grad(scanned), jnp.ones((4, 4)), jnp.ones((2, 4))))
  assert not any(op.opcode in ("while", "call") for op in ops.values())  # no double counting
  in_loop = [op for op in ops.values() if "while" in op.source and op.has_dot]
  assert {op.part for op in in_loop} == {"forward", "backward"}  # both loops' bodies


def test_parse_hlo_finds_dots_and_tells_forward_from_backward():
  x, w = jnp.ones((8, 4)), jnp.ones((4, 3))
  loss = lambda w, x: jnp.sum(jnp.tanh(x @ w))
  fwd = profile_step.parse_hlo(_hlo(loss, w, x))
  assert any(op.has_dot for op in fwd.values())
  assert {op.part for op in fwd.values()} == {"update"}  # no autodiff: nothing is jvp
  grad_ops = profile_step.parse_hlo(_hlo(jax.grad(loss), w, x))
  dots = [op for op in grad_ops.values() if op.has_dot]
  assert dots and {op.part for op in dots} <= {"forward", "backward"}
  assert any(op.part == "backward" for op in dots)  # dW = x^T @ dy
  assert all(op.shape.startswith(("f32", "(")) for op in grad_ops.values() if op.has_dot)
  with pytest.raises(ValueError, match="ENTRY"):
    profile_step.parse_hlo("HloModule m\n")


def test_busy_union_counts_overlaps_once():
  assert profile_step.busy_union_us([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
  assert profile_step.busy_union_us([]) == 0


@pytest.mark.long  # a profiled step
def test_profile_step_parts_add_up(tmp_path, run_script):
  out = tmp_path / "profile.json"
  proc = run_script(
    [
      "scripts/profile_step.py",
      "--config=configs/smoke.py",
      "--config.model.num_layers=2",
      "--config.model.d_model=16",
      "--config.model.d_ff=16",
      "--config.train.seq_len=16",
      "--config.model.max_seq_len=16",
      "--steps=2",
      "--warmup=1",
      "--top=1000",
      f"--out={out}",
    ],
    timeout=180,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "backward" in proc.stdout
  r = json.loads(out.read_text())
  assert r["matched_ops"] > 10 and len(r["top"]) == r["matched_ops"]  # --top: all of them
  # The stack is scanned (model.scan_unroll=1): the ops of the loop body are matched too.
  assert any("/while/body/" in o["source"] for o in r["top"] if o["dot"])
  cells = {(p["part"], p["kind"]): p for p in r["parts"]}
  assert sum(p["ms"] for p in r["parts"]) == pytest.approx(r["kernel_ms"], rel=1e-6)
  for part in ("forward", "backward"):
    assert cells[(part, "dot")]["ms"] > 0 and cells[(part, "dot")]["ops"] > 0
  assert cells[("update", "other")]["ops"] > 0  # the optimizer's elementwise work
  assert 0 < r["any_thread_busy_ms"] <= r["kernel_ms"] * (1 + 1e-9)
  assert r["top"] == sorted(r["top"], key=lambda o: -o["ms"])
  sources = {(o["part"], o["source"]) for o in r["by_source"]}
  assert {("forward", "dot_general"), ("backward", "dot_general")} <= sources


def test_short_source_drops_the_wrappers():
  short = profile_step.short_source
  assert short("jit(train_step)/transpose(jvp())/closed_call/dot_general") == "dot_general"
  assert short("jit(train_step)/jvp()/closed_call/tanh") == "tanh"
  loop_body = "jit(train_step)/transpose(jvp())/while/body/closed_call/checkpoint/"
  assert short(loop_body + "rematted_computation/dot_general") == "rematted_computation/dot_general"
  assert short(loop_body + "mul") == "mul"
  assert short("") == "(none)"
