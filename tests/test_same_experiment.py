"""What a result depends on: one flatten, one comparison, the policies of the sweeps, the
workdir and the checkpoint as data; committed runs stay finished and resumable under them."""

import copy
import json
import os
import subprocess
import sys

import pytest

from configs.base import get_config as base_config
from resnorm_jax.config import cli, same_experiment
from resnorm_jax.config.same_experiment import CHECKPOINT_STATE, SWEEP, WORKDIR
from resnorm_jax.data import fs
from resnorm_jax.runs import sweep_point
from resnorm_jax.sweeps import grid as sweep_grid
from resnorm_jax.train.resume_policy import CHECKPOINT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Committed finished sweep points, one per shape of record: written before the move of
# train.remat and before model.attention, hyperconn_* and data.sampling; before the move;
# before data.sampling only; with today's keys.
RUNS = (
  "docs/stability_boundary/runs/deepnorm-L12-lr0.00025-w0",
  "docs/runs/postnorm-L1000-lr0.0002-w50",
  "docs/deepnet_panel/runs/deepnorm-L18-invsqrt-w200",
  "docs/lr_sensitivity/budget/runs/postnorm-L12-const-lr0.0005-w0-s1",
)


def _config(**overrides) -> dict:
  config = base_config()
  config.update_from_flattened_dict(overrides)
  return json.loads(json.dumps(config.to_dict(), default=str))


def _without(config: dict, *keys: str) -> dict:
  """`config` (nested, or flat as a checkpoint's) without `keys`."""
  out = copy.deepcopy(config)
  for key in keys:
    section, _, name = key.rpartition(".")
    (out if key in out else out[section]).pop(key if key in out else name)
  return out


def _frozen(config: dict) -> dict:
  """A checkpoint's frozen config (resume_policy.frozen_config, without its JAX import)."""
  flat = same_experiment.flatten(config)
  return {k: v for k, v in flat.items() if CHECKPOINT.compares(k)}


# --- flatten -------------------------------------------------------------------------------


def test_flatten_gives_dotted_keys_and_json_values():
  tree = {"a": {"b": (1, 2), "c": {"d": None}}, "e": object}
  flat = same_experiment.flatten(tree)
  assert flat == {"a.b": [1, 2], "a.c.d": None, "e": str(object)}
  assert same_experiment.flatten(flat) == flat  # a checkpoint's flat config reads as itself


# --- the policies --------------------------------------------------------------------------


def test_a_result_key_is_caught_by_every_policy_that_compares_it():
  base = _config()
  lr = _config(**{"opt.lr": 2e-3})
  assert same_experiment.changed_keys(base, lr, SWEEP) == ["opt.lr"]
  assert same_experiment.changed_keys(base, lr, WORKDIR) == ["opt.lr"]
  assert same_experiment.changed_keys(base, lr, CHECKPOINT) == []  # the lr may change on resume
  deeper = _config(**{"model.num_layers": 12})
  for policy in (SWEEP, WORKDIR, CHECKPOINT, CHECKPOINT_STATE):
    assert same_experiment.changed_keys(base, deeper, policy) == ["model.num_layers"]


def test_speed_only_keys_are_ignored_on_resume_and_compared_by_the_sweeps():
  base = _config()
  faster = _config(**{"model.remat": "full", "model.scan_unroll": 2, "mesh.data": 2})
  assert same_experiment.changed_keys(base, faster, WORKDIR) == []
  assert same_experiment.changed_keys(_frozen(base), _frozen(faster), CHECKPOINT) == []
  # A sweep point run with another remat has always been another point's run.
  assert same_experiment.changed_keys(base, faster, SWEEP) == [
    "mesh.data",
    "model.remat",
    "model.scan_unroll",
  ]


def test_logging_keys_and_recorded_sections_are_never_compared():
  recorded = {**_config(), "provenance": {"commit": "abc"}, "resolved_model": {"alpha": 1.0}}
  logs = _config(**{"train.log_every": 1, "diag.per_layer": False, "dist.num_processes": 2})
  for policy in (SWEEP, WORKDIR):
    assert same_experiment.changed_keys(recorded, logs, policy) == []


def test_the_name_counts_for_the_workdir_only():
  base, named = _config(), _config(name="other")
  assert same_experiment.changed_keys(base, named, SWEEP) == []
  assert same_experiment.changed_keys(base, named, WORKDIR) == ["name"]
  # A record without a name is another run's, even at the schema's default name.
  assert same_experiment.changed_keys(_without(base, "name"), base, WORKDIR) == ["name"]
  assert same_experiment.changed_keys(_without(base, "name"), base, SWEEP) == []


def test_run_length_may_change_in_the_workdir_and_not_for_the_sweeps():
  base, longer = _config(), _config(**{"train.steps": 999})
  assert same_experiment.changed_keys(base, longer, WORKDIR) == []
  assert same_experiment.changed_keys(base, longer, SWEEP) == ["train.steps"]
  assert same_experiment.changed_keys(_frozen(base), _frozen(longer), CHECKPOINT) == []


def test_an_added_key_at_its_reproducing_default_is_accepted_and_another_value_refused():
  old = _without(_config(), "model.attention", "data.sampling", "model.hyperconn_rate")
  for policy in (SWEEP, WORKDIR):
    assert same_experiment.changed_keys(old, _config(), policy) == []
    fused = _config(**{"model.attention": "fused"})
    assert same_experiment.changed_keys(old, fused, policy) == ["model.attention"]
  old_frozen = _frozen(old)
  assert same_experiment.changed_keys(old_frozen, _frozen(_config()), CHECKPOINT) == []
  epoch = _frozen(_config(**{"data.sampling": "epoch"}))
  assert same_experiment.changed_keys(old_frozen, epoch, CHECKPOINT) == ["data.sampling"]
  # data_fingerprint is outside the schema: a checkpoint without one ran on no token folder.
  prepared = {**_frozen(_config()), "data_fingerprint": "abc"}
  assert same_experiment.changed_keys(old_frozen, prepared, CHECKPOINT) == ["data_fingerprint"]
  assert same_experiment.describe(["data_fingerprint"], old_frozen, prepared, CHECKPOINT) == (
    "data_fingerprint (None -> 'abc')"
  )


def test_the_checkpoint_reads_only_its_listed_added_keys_at_their_defaults():
  """A frozen key outside CHECKPOINT.added that a checkpoint lacks reads as None: accepted
  where the run's value is None (an unset placeholder), refused otherwise, as always."""
  base = _frozen(_config())
  assert "model.qk_norm" not in CHECKPOINT.added and base["model.residual_alpha"] is None
  no_alpha = _without(base, "model.residual_alpha")
  assert same_experiment.changed_keys(no_alpha, base, CHECKPOINT) == []
  alpha = _frozen(_config(**{"model.residual_alpha": 0.5}))
  assert same_experiment.changed_keys(no_alpha, alpha, CHECKPOINT) == ["model.residual_alpha"]
  no_qk = _without(base, "model.qk_norm")
  assert same_experiment.changed_keys(no_qk, base, CHECKPOINT) == ["model.qk_norm"]
  assert same_experiment.describe(["model.qk_norm"], no_qk, base, CHECKPOINT) == (
    "model.qk_norm (None -> False)"
  )
  # The sweeps read every schema key a record lacks at its default.
  assert same_experiment.changed_keys(_without(_config(), "model.qk_norm"), _config(), SWEEP) == []


def test_added_defaults_come_from_the_schema():
  schema = same_experiment.flatten(base_config().to_dict())
  assert dict(SWEEP.added) == schema
  assert dict(WORKDIR.added) == {k: v for k, v in schema.items() if k != "name"}
  from resnorm_jax.model import variants

  listed = {f"model.{n}" for n in variants.keys()} | set(same_experiment.CHECKPOINT_ADDED)
  assert set(CHECKPOINT.added) == listed
  assert CHECKPOINT.added["model.attention"] == schema["model.attention"] == "dense"
  assert CHECKPOINT.added["data.sampling"] == "random"
  assert CHECKPOINT.added["data_fingerprint"] is None


def test_a_moved_key_is_read_at_its_new_place():
  config = _config(**{"model.dtype": "bfloat16", "model.remat": "full"})
  old = _without(config, "model.dtype", "model.remat")
  old["train"].update(dtype="bfloat16", remat="full")
  assert {"train.dtype": "model.dtype", "train.remat": "model.remat"}.items() <= (
    cli.MOVED_KEYS.items()
  )
  for policy in (SWEEP, WORKDIR, CHECKPOINT_STATE):
    assert same_experiment.changed_keys(old, config, policy) == []
  float32 = _config(**{"model.remat": "full"})
  assert same_experiment.changed_keys(old, float32, SWEEP) == ["model.dtype"]
  assert same_experiment.describe(["model.dtype"], old, float32, SWEEP) == (
    "model.dtype ('bfloat16' -> 'float32')"
  )


# --- committed runs ------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
def test_committed_finished_points_stay_finished_and_resumable(run):
  """The point's config today (its sweep_point.json, moved keys renamed): the sweep skips the
  run, a rerun in its workdir continues it, and a checkpoint it had written would resume."""
  workdir = os.path.join(ROOT, run)
  point_file = fs.read_json(os.path.join(workdir, sweep_point.POINT_FILE))
  recorded = fs.read_json(os.path.join(workdir, "config.json"))
  overrides = cli.renamed_moved_keys(point_file["overrides"])
  point = sweep_grid.Point(point_file["name"], point_file["config"], overrides, 0)
  expected = sweep_grid.resolve(point, {}, None)[1]
  assert sweep_grid.run_state(workdir, expected) == "done"
  assert same_experiment.changed_keys(recorded, expected, WORKDIR) == []
  # A checkpoint of the run: its frozen keys as the run recorded them.
  saved = same_experiment.in_todays_keys(recorded)
  saved = {k: v for k, v in saved.items() if CHECKPOINT.compares(k)}
  assert same_experiment.changed_keys(saved, _frozen(expected), CHECKPOINT) == []
  other = json.loads(json.dumps(expected))
  other["opt"]["lr"] *= 2
  assert sweep_grid.run_state(workdir, other) == "conflict"
  assert same_experiment.changed_keys(recorded, other, WORKDIR) == ["opt.lr"]


@pytest.mark.slow  # a process
def test_the_schema_and_the_comparison_need_no_jax():
  code = (
    "import sys; from resnorm_jax.config import same_experiment as s; "
    "s.changed_keys({}, {}, s.SWEEP); dict(s.WORKDIR.added); "
    "assert 'jax' not in sys.modules, 'jax imported'"
  )
  subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
