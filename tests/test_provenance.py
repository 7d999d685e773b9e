"""Provenance (resnorm_jax/train/provenance.py): what produced a run, and the resume note's rule."""

import importlib.metadata

from resnorm_jax.config.same_experiment import SWEEP, changed_keys
from resnorm_jax.train import provenance


def _changed(recorded, expected) -> list[str]:
  return changed_keys(recorded, expected, SWEEP)


def test_collect_names_the_commit_the_packages_and_the_host():
  p = provenance.collect()
  assert p["commit"] is None or len(p["commit"]) == 40  # None only outside a git checkout
  assert p["packages"]["jax"] == importlib.metadata.version("jax")
  assert p["packages"]["orbax-checkpoint"] == importlib.metadata.version("orbax-checkpoint")
  assert p["host"] and p["python"].count(".") == 2


def test_the_resume_note_says_when_the_code_changed():
  a, b = {"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": False}
  assert provenance.code_changed(a, dict(a)) is None
  assert "aaaaaaaaaaaa" in provenance.code_changed(
    a, b
  ) and "bbbbbbbbbbbb" in provenance.code_changed(a, b)
  assert "uncommitted" in provenance.code_changed(a, {**a, "dirty": True})
  assert provenance.code_changed(None, b) is None  # a run from before provenance was recorded


def test_provenance_is_not_part_of_what_a_sweep_compares():
  from configs import smoke

  expected = smoke.get_config().to_dict()
  recorded = {**expected, "provenance": provenance.collect()}
  assert _changed(recorded, expected) == []
