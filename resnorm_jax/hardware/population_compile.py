"""A population's vmapped step compiled for one TPU chip this host does not have: per-chip
memory, FLOPs and the step time the TPU compiler's cost model estimates, against M single
steps of the same run.

A population trains on one device (population/run.py), so both programs are compiled for
the first chip of a topology (`v5e:2x2`, `v5p:2x2x1`) on a 1x1x1 mesh: (a) the single run's
train step, `run_setup.build(...).step_fn` on its abstract state and batch, and (b) the step
of M members exactly as population_run jits it (`population_step`: the members' batches
stacked inside the program, the lrs an array, the states donated), with its arguments placed
as population_run places them. Each is compiled twice, at 1 and 2 layers per iteration of the
scanned stack, and loop-corrected (target_compile.loop_corrected). A population the chip
cannot hold is a result (`fits` False, the compiler's RESOURCE_EXHAUSTED kept), not an error.

Every time and ratio here is the TPU compiler's cost-model estimate (target_compile.ESTIMATE),
not a measurement: `ratio` = M single steps' estimated time over one population step's (above
1: batching pays). Both times come from the same source (`optimal_seconds`, or, where the
compiler gives none for either program, the roofline of its FLOPs and bytes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ml_collections import ConfigDict

from resnorm_jax.hardware import target_compile as tc
from resnorm_jax.hardware import target_report, tpu_target

ROOFLINE = "roofline of FLOPs and bytes"


@dataclasses.dataclass(frozen=True)
class StepCost:
  """One step compiled for one chip: memory or the compiler's refusal, loop-corrected cost."""

  members: int  # 0: the single run's train step
  memory: dict[str, int]  # run_setup.aot_memory of the 1-layer-per-iteration compile
  oom: str  # the compiler's RESOURCE_EXHAUSTED message ('' when it compiled)
  cost: dict[str, float]  # per chip, loop-corrected where `corrected`
  costs: tuple[dict[str, float], ...]  # each compile's own cost (for step_estimate)
  corrected: bool
  cpu_seconds: float  # CPU time of its compiles
  hbm_limit: int  # bytes the compiler allows on the chip

  @property
  def fits(self) -> bool:
    total = self.memory.get("total")
    return not self.oom and total is not None and total <= self.hbm_limit

  @property
  def per_chip_bytes(self) -> int | None:
    """Total resident bytes, or the temporaries the compiler refused."""
    return self.memory.get("total") or tpu_target.bytes_in(tpu_target.HLO_TEMPS, self.oom)


@dataclasses.dataclass(frozen=True)
class Comparison:
  """M members' population step against the single step on one chip: times are estimates."""

  topology: str
  chip: tpu_target.Chip
  members: int
  single: StepCost
  population: StepCost
  single_seconds: float | None  # one single step (target_report.ESTIMATE)
  population_seconds: float | None  # one population step of `members` (target_report.ESTIMATE)
  source: str  # 'optimal_seconds' or ROOFLINE: both times' source
  label: str = target_report.ESTIMATE

  @property
  def ratio(self) -> float | None:
    """M single steps over one population step (target_report.ESTIMATE); above 1: batching pays."""
    if not (self.single_seconds and self.population_seconds):
      return None
    return self.members * self.single_seconds / self.population_seconds


def one_chip(topology: str) -> tuple[tpu_target.Chip, str, list]:
  """(chip, topology name, [its first compile-only device]): a population's one device."""
  chip, name, devices = tpu_target.topology_devices(topology)
  return chip, name, devices[:1]


def population_args(run, members: int) -> tuple:
  """Abstract (lrs, states, member batches, active) placed as population_run places them: lrs,
  the stacked states and the members' active mask on the device, each member's batch the
  single run's (a pair of [B, T])."""
  import jax
  import jax.numpy as jnp

  one = jax.sharding.SingleDeviceSharding(run.mesh.devices.flat[0])
  lrs = jax.ShapeDtypeStruct((members,), jnp.float32, sharding=one)
  states = jax.tree.map(
    lambda a: jax.ShapeDtypeStruct((members, *a.shape), a.dtype, sharding=one), run.abstract
  )
  active = jax.ShapeDtypeStruct((members,), jnp.bool_, sharding=one)
  return lrs, states, (run.abstract_batch,) * members, active


def lower_population(run, members: int):
  """The population step of `members` traced as population_run jits it (nothing allocated)."""
  from resnorm_jax.train.population import run as population_run

  return population_run.population_step(run, run.config).lower(*population_args(run, members))


def lower_single(run, members: int):
  """The single run's train step traced on its abstract state and batch (`members` unused)."""
  del members
  return run.lower_step()


def step_cost(
  config: ConfigDict,
  devices: Sequence,
  members: int,
  lower: Callable,
  *,
  vocab_size: int,
  hbm_limit: int,
) -> StepCost:
  """Compiles `lower(run, members)` for `devices` at 1 and, when it compiled and the stack has
  two layers or more, 2 layers per scan iteration; the cost loop-corrected."""
  from resnorm_jax.train import run_setup

  def compiled(c: ConfigDict) -> target_report.Compiled:
    run = run_setup.build(c, devices, vocab_size=vocab_size, platform="tpu")
    return tc.compile_lowered(lower(run, members))

  first = compiled(config)
  cost, costs, corrected, cpu = dict(first.cost), (first.cost,), False, first.cpu_seconds
  layers = int(config.model.num_layers)
  if not first.oom and layers >= 2 and int(config.model.scan_unroll) == 1:
    unroll = tc.correction_unroll(layers)
    second = compiled(tc.with_overrides(config, {"model.scan_unroll": unroll}))
    cpu += second.cpu_seconds
    if not second.oom:
      cost = tc.loop_corrected(first.cost, second.cost, layers, unroll)
      costs, corrected = (first.cost, second.cost), True
  return StepCost(members, first.memory, first.oom, cost, costs, corrected, cpu, hbm_limit)


def estimates(single: StepCost, pop: StepCost, chip: tpu_target.Chip) -> tuple[float | None, ...]:
  """(single seconds, population seconds, source), both from one source: the roofline for
  both where step_estimate falls back to it for either; None for a step that does not fit."""
  if not (single.fits and pop.fits and single.cost and pop.cost):
    s = tc.step_estimate(single.costs, single.cost, chip)[0] if single.fits else None
    return s, None, ""
  (s, s_src), (p, p_src) = (tc.step_estimate(x.costs, x.cost, chip) for x in (single, pop))
  if s_src != p_src:
    s, p = (roofline(x.cost, chip) for x in (single, pop))
    s_src = ROOFLINE
  return s, p, s_src


def roofline(cost: dict[str, float], chip: tpu_target.Chip) -> float:
  """max(FLOPs / bf16 peak, bytes accessed / HBM bandwidth): seconds per step on one chip."""
  return max(cost["flops"] / chip.bf16_flops, cost.get("bytes accessed", 0) / chip.hbm_bandwidth)


def compare(
  config: ConfigDict,
  topology: str,
  members: int,
  *,
  vocab_size: int = 0,
  single: StepCost | None = None,
) -> Comparison:
  """`config`'s population of `members` against its single step on one chip of `topology`.

  `single`: the single step's StepCost from an earlier call with the same config and chip
  (compiled here when None). TargetError for a bad topology, no libtpu or a bad config."""
  chip, name, devices = one_chip(topology)
  vocab, _ = tc.resolve_vocab(config, vocab_size)
  limit = tpu_target.hbm_limit(devices[0]) or chip.hbm_bytes
  kw = {"vocab_size": vocab, "hbm_limit": limit}
  try:
    if single is None:
      single = step_cost(config, devices, 0, lower_single, **kw)
    pop = step_cost(config, devices, members, lower_population, **kw)
  except ValueError as e:
    raise tpu_target.TargetError(f"{name}: {e}") from None
  s, p, source = estimates(single, pop, chip)
  return Comparison(name, chip, members, single, pop, s, p, source)
