"""The population step compiled for one TPU chip without a TPU (resnorm_jax/hardware/
population_compile.py). Skipped where libtpu (requirements-dev.txt) is not installed."""

import pytest

from resnorm_jax.config import cli
from resnorm_jax.hardware import population_compile as pc
from resnorm_jax.hardware import target_report, tpu_target

needs_libtpu = pytest.mark.skipif(
  not tpu_target.importlib.util.find_spec("libtpu"),
  reason="libtpu (the TPU compiler) is not installed: pip install -r requirements-dev.txt",
)


def _step(flops: float, seconds: float, nbytes: float = 1.0, members: int = 0) -> pc.StepCost:
  memory = {"total": 1}
  cost = {"flops": flops, "optimal_seconds": seconds, "bytes accessed": nbytes}
  return pc.StepCost(members, memory, "", cost, (cost,), False, 0.0, 2)


def test_ratio_is_m_singles_over_one_population_step():
  chip = tpu_target.CHIPS["v5e"]
  single, pop = _step(1.0, 1e-3), _step(4.0, 2e-3, members=4)
  s, p, source = pc.estimates(single, pop, chip)
  r = pc.Comparison("v5e:2x2", chip, 4, single, pop, s, p, source)
  assert (s, p, source) == (1e-3, 2e-3, "optimal_seconds")
  assert r.ratio == pytest.approx(2.0)
  assert r.label == target_report.ESTIMATE


def test_one_source_for_both_times():
  """A population whose optimal_seconds is negative: both times from the roofline."""
  chip = tpu_target.CHIPS["v5e"]
  single, pop = _step(1e12, 1e-3, 1e9), _step(4e12, -1.0, 4e9, members=4)
  s, p, source = pc.estimates(single, pop, chip)
  assert source == pc.ROOFLINE
  assert s == pytest.approx(max(1e12 / chip.bf16_flops, 1e9 / chip.hbm_bandwidth))
  assert p == pytest.approx(max(4e12 / chip.bf16_flops, 4e9 / chip.hbm_bandwidth))


def test_a_population_the_chip_cannot_hold_has_no_time():
  chip = tpu_target.CHIPS["v5e"]
  oom = "RESOURCE_EXHAUSTED: ... HLO temporaries (20.5G)"
  refused = pc.StepCost(64, {}, oom, {}, (), False, 1.0, 2)
  assert not refused.fits and refused.per_chip_bytes == int(20.5 * tpu_target.GIB)
  s, p, _ = pc.estimates(_step(1.0, 1e-3), refused, chip)
  assert s == 1e-3 and p is None
  r = pc.Comparison("v5e:2x2", chip, 64, _step(1.0, 1e-3), refused, s, p, "")
  assert r.ratio is None


@pytest.mark.slow  # a population compiled for a TPU topology (about 16 s)
@needs_libtpu
@pytest.mark.long  # a TPU compile of a population
def test_smoke_population_of_four_on_v5e():
  config = cli.load_config_file("configs/smoke.py")
  r = pc.compare(config, "v5e:2x2", 4, vocab_size=256)
  assert r.topology == "v5e:2x2" and r.members == 4
  assert r.single.fits and r.population.fits
  assert r.single.corrected and r.population.corrected
  assert 0 < r.single.per_chip_bytes < r.population.per_chip_bytes <= r.population.hbm_limit
  assert r.single.cost["flops"] > 0
  assert 3 < r.population.cost["flops"] / r.single.cost["flops"] < 5  # 4 members' work
  assert r.single_seconds > 0 and r.population_seconds > 0 and r.ratio > 0
  assert r.source in ("optimal_seconds", pc.ROOFLINE)
  assert r.label == target_report.ESTIMATE
