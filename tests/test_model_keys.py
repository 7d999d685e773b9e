"""The core model keys are declared once (resnorm_jax/config/model_keys.py), and the schema's
model section, ModelConfig's fields and checks, the same-experiment policy and the HParams
table's model columns are what that declaration says."""

import ast
import dataclasses
import glob
import os
import re

import pytest
from ml_collections import ConfigDict

from conftest import ROOT, TINY
from resnorm_jax.config import keys, model_keys, same_experiment, schema, variant_keys
from resnorm_jax.config.keys import Key
from resnorm_jax.config.model_keys import KEYS, Registry
from resnorm_jax.files import pysource
from resnorm_jax.model import config_types, variants
from resnorm_jax.model.config_types import ModelConfig, model_config_from
from resnorm_jax.model.depth_param import DEPTH_PARAMS
from resnorm_jax.model.initializers import INITS
from resnorm_jax.model.width_param import WIDTH_PARAMS
from resnorm_jax.train import hparams

VARIANT_KEYS = variant_keys.declared()
# The stabilizers' keys (docs/stabilizers), each an HParams column, in the table's order.
STABILIZERS = (
  *("qk_norm", "attn_softcap", "final_softcap", "attn_gate", "attn_out_scale", "attn_gate_bias"),
  *("attn_gate_frozen", "attn_sinks"),
)
# Each registry the declarations name, as the model holds it.
REGISTRIES = {
  "norm": variants.names("norm"),
  "norm_position": variants.names("norm_position"),
  "residual": variants.names("residual"),
  "init": INITS,
  "depth_param": tuple(DEPTH_PARAMS),
  "width_param": WIDTH_PARAMS,
}


def test_every_model_config_field_is_declared_once():
  fields = [f.name for f in dataclasses.fields(ModelConfig)]
  assert fields == [*KEYS, *VARIANT_KEYS]
  assert not set(KEYS) & set(VARIANT_KEYS)
  for f in dataclasses.fields(ModelConfig):
    if f.name in KEYS:
      assert f.type == (KEYS[f.name].field_type or KEYS[f.name].type).__name__, f.name
  for key, decl in KEYS.items():
    assert decl.type in (bool, int, float, str), key
    assert decl.default is None or type(decl.default) is decl.type, key
    assert decl.text and "{choices}" not in decl.text, key


def test_the_schema_model_section_is_the_declaration_in_order():
  assert model_keys.VARIANTS_AFTER in KEYS
  model = schema.get_config().model
  keys = list(KEYS)
  at = keys.index(model_keys.VARIANTS_AFTER) + 1
  in_order = keys[:at] + list(VARIANT_KEYS) + keys[at:]
  assert sorted(model) == sorted(in_order)
  for key, decl in KEYS.items():
    assert model[key] == decl.default, key
  # `python -m resnorm_jax.config model.` lists them in that order, each with its description.
  described = {k: (d, text) for k, d, text in schema.describe() if k.startswith("model.")}
  assert list(described) == [f"model.{k}" for k in in_order]
  for key, decl in KEYS.items():
    assert described[f"model.{key}"] == (decl.default, decl.text), key
  assert described["model.ffn_activation"][1] == "gelu | relu | swiglu"


def test_an_unset_default_stays_a_placeholder_of_its_type():
  unset = [k for k, d in KEYS.items() if d.default is None]
  assert unset == ["residual_alpha", "branch_scale", "init_beta"]
  model = schema.get_config().model
  for key in unset:
    assert model[key] is None
    model[key] = 2.0
    with pytest.raises(TypeError):
      model[key] = "two"


def test_the_same_experiment_policy_reads_the_declaration():
  speed = {k for k in same_experiment.SPEED_ONLY if k.startswith("model.")}
  assert speed == {f"model.{k}" for k, d in KEYS.items() if not d.affects_results}
  assert speed == {"model.remat", "model.scan_unroll"}
  added = {k for k in same_experiment.CHECKPOINT_ADDED if k.startswith("model.")}
  assert added == {f"model.{k}" for k, d in KEYS.items() if d.added}
  assert "model.attention" in added and "model.dtype" not in added


def test_the_hparams_model_columns_are_the_declared_ones():
  columns = {name: key for name, key in hparams.AXES if key.startswith("model.")}
  every = {**KEYS, **variants.keys()}
  assert columns == {d.hparam.name: f"model.{k}" for k, d in every.items() if d.hparam}
  names = [name for name, _ in hparams.AXES]
  assert len(names) == len(set(names))
  # The table's columns, in order: a column added or moved is a deliberate change here.
  assert names == [
    *("config", "norm", "norm_position", "residual", "block", "init", "num_layers", "d_model"),
    *("num_heads", "d_ff", "ffn_activation", "position", "depth_param", "base_depth"),
    *("width_param", "base_width", *STABILIZERS, "optimizer", "lr", "warmup_steps"),
    *("schedule", "weight_decay", "clip_norm", "batch_size", "seq_len", "steps", "dtype"),
    *("data", "seed"),
  ]
  flat = schema._flat(schema.get_config().to_dict())
  assert all(key in flat for _, key in hparams.AXES)


def _config_with(key, value):
  c = schema.get_config()
  c.model.update(TINY)
  c.model[key] = value
  return c


@pytest.mark.parametrize("key", [k for k, d in KEYS.items() if d.choices is not None])
def test_a_key_with_choices_refuses_a_bad_value_naming_them(key):
  decl = KEYS[key]
  valid = REGISTRIES[key] if isinstance(decl.choices, Registry) else decl.choices
  assert isinstance(decl.choices, Registry) == (key in REGISTRIES)
  with pytest.raises(ValueError) as err:
    model_config_from(_config_with(key, "bogus"), platform="cpu")
  msg = str(err.value)
  assert f"model.{key}='bogus'" in msg
  for value in valid:
    assert value in msg, value


def test_model_config_refuses_a_bad_literal_choice_itself():
  fields = dataclasses.asdict(model_config_from(_config_with("block", "parallel")))
  literal = [k for k, d in KEYS.items() if d.literal_choices and d.field_type is None]
  assert literal == ["ffn_activation", "position", "block", "attention", "remat", "dtype"]
  for key in literal:
    with pytest.raises(ValueError, match=f"model.{key}='bogus' is not valid"):
      ModelConfig(**{**fields, key: "bogus"})
  # ModelConfig holds the implementation `fused` resolves to, never `fused` itself.
  with pytest.raises(ValueError, match="valid values: dense, xla, cudnn, splash$"):
    ModelConfig(**{**fields, "attention": "fused"})
  assert config_types.BLOCKS == KEYS["block"].choices


# A value of another type than each key's: the wrong type for a bool, int, float, str key.
_WRONG = {bool: "yes", int: 2.5, float: "x", str: 3}


def test_every_model_key_is_one_class_that_checks_its_type_in_one_line():
  every = {**KEYS, **variants.keys()}
  assert set(every) == set(KEYS) | set(VARIANT_KEYS)
  for key, decl in every.items():
    assert type(decl) is Key, key  # core and variant keys: one record, one check
    wrong = _WRONG[decl.type]
    with pytest.raises(ValueError) as err:
      decl.validate(key, wrong)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"model.{key}={wrong!r} must be "), msg
    assert msg.endswith(f"(a {decl.type.__name__} key)"), msg
    if decl.default is not None:
      decl.validate(key, decl.default)  # its default passes
  with pytest.raises(ValueError, match=r"^model\.d_model='64' must be an integer \(a int key\)$"):
    KEYS["d_model"].validate("d_model", "64")


def test_a_variant_key_declares_the_same_key_its_source_reads():
  for key, decl in variants.keys().items():
    assert decl.declared() == VARIANT_KEYS[key].key, key  # its column and type too
  with pytest.raises(ValueError, match="needs a type"):
    Key(None, "an unset key of no type")


def test_the_stabilizers_keys_are_hparams_columns_and_an_older_run_still_reads():
  columns = dict(hparams.AXES)
  for key in STABILIZERS:
    assert columns[key] == f"model.{key}", key
  config = schema.get_config()
  config.model.attn_gate, config.model.attn_softcap, config.model.attn_sinks = (
    "headwise",
    50.0,
    True,
  )
  h = hparams.run_hparams(config, {"status": "completed", "outcome": "trained"})
  assert (h["attn_gate"], h["attn_softcap"], h["attn_sinks"], h["qk_norm"]) == (
    "headwise",
    50.0,
    True,
    False,
  )
  # A config.json written before these columns (or these keys) existed: the rest of its row.
  older = ConfigDict(schema.get_config().to_dict())
  with older.unlocked():
    for key in STABILIZERS:
      del older.model[key]
  h = hparams.run_hparams(older, {"status": "completed"})
  assert not set(STABILIZERS) & set(h) and h["norm"] == "layernorm" and h["final_norm"] is False
  assert len(hparams.summaries(h, "completed")) == 2


def test_the_range_checks_are_shared_not_copied():
  """One copy of each check (keys.py): the variants' keys hold the shared function itself, and
  no module of the config or the model spells a check's complaint or defines its own copy."""
  shared = {
    "hyperconn_rate": keys.positive_int,
    "mhc_rate": keys.positive_int,
    "mhc_sinkhorn_iters": keys.positive_int,
    "mixln_post_fraction": keys.unit_interval,
    "valueres_lambda_init": keys.unit_interval,
    "attn_softcap": keys.nonnegative,
    "final_softcap": keys.nonnegative,
  }
  for key, check in shared.items():
    assert variants.keys()[key].invalid is check, key
  complaints = ("must be a positive integer", "not in [0, 1]", "must be a number >= 0")
  complaints += ("must be true or false",)
  copies = ("_bool", "_positive_int", "_unit_interval", "_nonnegative", "_cap")
  for folder in ("config", "model"):
    for path in glob.glob(os.path.join(ROOT, "resnorm_jax", folder, "**", "*.py"), recursive=True):
      if path.endswith(os.path.join("config", "keys.py")):
        continue
      text = open(path, encoding="utf-8").read()
      for complaint in complaints:
        assert complaint not in text, (path, complaint)
      assert not re.search(r"not isinstance\(\w+, bool\)", text), path  # an int's type check
      for node in ast.walk(pysource.parse(text)):
        if isinstance(node, ast.FunctionDef):
          assert node.name not in copies, (path, node.name)
