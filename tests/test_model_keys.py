"""The core model keys are declared once (resnorm_jax/config/model_keys.py), and the schema's
model section, ModelConfig's fields and checks, the same-experiment policy and the HParams
table's model columns are what that declaration says."""

import dataclasses

import pytest

from conftest import TINY
from resnorm_jax.config import model_keys, same_experiment, schema, variant_keys
from resnorm_jax.config.model_keys import KEYS, Registry
from resnorm_jax.model import config_types, variants
from resnorm_jax.model.config_types import ModelConfig, model_config_from
from resnorm_jax.model.depth_param import DEPTH_PARAMS
from resnorm_jax.model.initializers import INITS
from resnorm_jax.model.width_param import WIDTH_PARAMS
from resnorm_jax.train import hparams

VARIANT_KEYS = variant_keys.declared()
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
  assert columns == {d.hparam.name: f"model.{k}" for k, d in KEYS.items() if d.hparam}
  names = [name for name, _ in hparams.AXES]
  assert len(names) == len(set(names))
  assert names[:3] == ["config", "norm", "norm_position"]
  assert names[-3:] == ["dtype", "data", "seed"]
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
