"""What a named experiment is expected to show, and whether a run showed it.

A named config (configs/<name>.py) may declare, beside `get_config`,

  EXPECTED = Expected("stuck", "as Xiong et al. 2020 report for Post-LN without warmup at depth")

the outcome the experiment reproduces at its default scale. It speaks for that config only:
a run with a scale argument (`:smoke`, `:paper`) or with an override of a key its results
depend on (anything but what only changes logging, speed or memory) is another experiment,
and its summary and end line say nothing about the expectation. No JAX here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from resnorm_jax.config import same_experiment
from resnorm_jax.runs import status

OUTCOMES = (status.TRAINED, status.STUCK, status.DIVERGED)
# Overrides that leave the experiment as named: what it logs, how fast or in how much memory
# its step runs, whether a stop rule may end it early (the keys a resume may change,
# same_experiment.py; a run stopped early has no verdict: `record`).
_SAME_EXPERIMENT = (
  same_experiment.LOGGING_ONLY + same_experiment.SPEED_ONLY + same_experiment.RUN_CONTROL
)


@dataclasses.dataclass(frozen=True)
class Expected:
  outcome: str  # trained | stuck | diverged
  because: str  # who reports it, for what: "as <paper> reports for <setting>"

  def __post_init__(self):
    if self.outcome not in OUTCOMES:
      raise ValueError(f"Expected outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")


def applies(scale_arg: str | None, overrides: Mapping[str, Any]) -> bool:
  """Whether a run of the named config with this scale argument and these command-line
  overrides ({dotted key: value}) is the experiment its expectation speaks for."""
  if scale_arg not in (None, "", "cpu"):
    return False
  return all(same_experiment.matches_key(key, _SAME_EXPERIMENT) for key in overrides)


def record(expected: Expected, outcome: str | None) -> dict[str, Any]:
  """summary.json's `expected`: the outcome the experiment reproduces, why, and whether this
  run's outcome is it (None while the run has no verdict: interrupted or failed)."""
  reproduced = None if outcome not in OUTCOMES else outcome == expected.outcome
  return {"outcome": expected.outcome, "because": expected.because, "reproduced": reproduced}


def line(rec: Mapping[str, Any], outcome: str | None) -> str:
  """The end line's `expected:` line for summary.json's `expected` record."""
  head = f"  expected: {rec['outcome']}, {rec['because']}"
  if rec.get("reproduced") is None:
    return f"{head} (no verdict yet: the run is {outcome})"
  if rec["reproduced"]:
    return f"{head}: reproduced"
  return f"{head}: NOT reproduced (this run: {outcome})"


def from_module(module: Any) -> Expected | None:
  """A config module's EXPECTED, checked; None when it declares none."""
  value = getattr(module, "EXPECTED", None)
  if value is not None and not isinstance(value, Expected):
    raise ValueError(f"EXPECTED must be an Expected(outcome, because), got {value!r}")
  return value


def for_config_file(spec: str) -> tuple[Expected | None, str]:
  """(the EXPECTED of the config file FILE[:ARG], ARG): the module is read again as
  config_flags reads it; a file that declares none gives (None, ARG)."""
  import importlib.util  # the config module, by path: the library never imports configs/

  path, _, arg = spec.partition(":")
  module_spec = importlib.util.spec_from_file_location("_expected_of_config", path)
  if module_spec is None or module_spec.loader is None:
    return None, arg
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return from_module(module), arg
