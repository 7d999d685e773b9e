"""The variant registry (resnorm_jax/model/variants/): every variant listed, an unknown name refused
with the choices before anything is built, each later variant's name in its own module and
nowhere else in the library, and each variant's own config keys declared once, in its module,
and read from there by the schema, ModelConfig and the checkpoint's policy. Every variant,
placement, residual and key name is read from the package, none written here."""

import ast
import dataclasses
import glob
import importlib
import os
import pkgutil

import pytest

from conftest import tiny_config
from resnorm_jax.config import schema, variant_keys
from resnorm_jax.config.keys import Key
from resnorm_jax.files import pysource
from resnorm_jax.model import residual as residual_lib
from resnorm_jax.model import variants
from resnorm_jax.model.config_types import ModelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules() -> dict[str, object]:
  """{module name: module} of every module of the variant package, imported."""
  return {
    info.name: importlib.import_module(f"resnorm_jax.model.variants.{info.name}")
    for info in pkgutil.iter_modules(variants.__path__)
    if info.name not in variants.NOT_VARIANTS
  }


# Every name below is read from the package: a new variant's module is guarded without
# editing this test.
RESIDUALS = {v.name for m in _modules().values() for v in m.VARIANTS if v.axis == "residual"}
PLACEMENTS = {v.name for m in _modules().values() for v in m.VARIANTS if v.axis == "norm_position"}
NORMS = {v.name for m in _modules().values() for v in m.VARIANTS if v.axis == "norm"}
# The features: no axis value selects them, their own keys turn them on.
FEATURES = {v.name for m in _modules().values() for v in m.VARIANTS if v.axis == variants.FEATURE}
# {key: its module} of every variant's own key, from the modules' VARIANTS.
KEYS = {k: name for name, m in _modules().items() for v in m.VARIANTS for k in v.keys}


def _declared_outside_standard() -> dict[str, str]:
  """{variant name: its module} of every variant the registry finds outside standard.py (the
  original axes, whose names the whole library uses): read from the package itself, so a new
  variant's module is guarded without editing this test."""
  return {v.name: name for name, m in _modules().items() if name != "standard" for v in m.VARIANTS}


# The variants added after the original axes, with the module that holds each.
LATER = _declared_outside_standard()
# The claims modules whose facts state numbers of named variants' runs in docs/results.md and
# the docs pages (a sentence about mHC's runs reads mHC's runs): text about results, as the
# README row of the later variants' stability map is, not model code.
STATES_FACTS = ("reproductions", "reproductions_facts", "lr_sensitivity_facts", "stabilizers")
# The figures colour and label runs by experiment name (configs/<name>_96L.py), not by config
# value: style.py's palette and runs/curves.py's aliases name variants without being model code,
# as the README row of the later variants' stability map names the variants it ran.
NOT_MODEL_CODE = {
  "resnorm_jax/analysis/style.py",
  "resnorm_jax/runs/curves.py",
  *(f"resnorm_jax/analysis/claims/{m}.py" for m in STATES_FACTS),
}


def test_registry_lists_every_variant():
  assert set(variants.names("residual")) == RESIDUALS
  assert set(variants.names("norm_position")) == PLACEMENTS
  assert set(variants.names("norm")) == NORMS
  assert variants.names("norm")[:5] == ("layernorm", "rmsnorm", "batchnorm", "dyt", "none")
  # standard.py holds the original residuals, residual.py's rules.
  assert set(residual_lib.RESIDUALS) <= RESIDUALS
  assert set(variants.names(variants.FEATURE)) == FEATURES
  every = variants.every()
  axes = (*variants.AXES, variants.FEATURE)
  assert len(every) == sum(len(variants.names(axis)) for axis in axes)
  for v in every:
    assert v.summary and v.axis in axes, v.name


def test_every_module_of_the_package_declares_variants():
  for name, module in _modules().items():
    declared = getattr(module, "VARIANTS", ())
    assert declared, name
    assert all(isinstance(v, variants.Variant) for v in declared), name


def test_every_variant_is_a_valid_config_value():
  for name in sorted(RESIDUALS):
    cfg = _selecting("residual", name)
    assert variants.residual(cfg.residual).name == name
  for name in sorted(PLACEMENTS):
    assert variants.placement(_selecting("norm_position", name).norm_position).name == name
  for name in sorted(NORMS):
    cfg = tiny_config(norm=name)
    assert cfg.norm == name and variants.get("norm", cfg.norm).name == name
  for name in sorted(FEATURES):  # each turned on by its own keys' non-default values
    feature = variants.get(variants.FEATURE, name)
    assert feature.keys and not feature.on(tiny_config()), name


@pytest.mark.parametrize("axis", variants.AXES)
def test_unknown_variant_is_refused_naming_the_choices(axis):
  from configs import base
  from resnorm_jax.train import run_setup

  config = base.get_config()
  config.model[axis] = "resnet"
  # run_setup.validate: the checks a run (and every sweep point) passes before anything is
  # built or compiled.
  with pytest.raises(ValueError) as err:
    run_setup.validate(config)
  msg = str(err.value)
  assert f"model.{axis}='resnet' is not valid" in msg
  for name in variants.names(axis):
    assert name in msg


def test_registry_refuses_a_name_declared_twice(monkeypatch, tmp_path):
  pkg = tmp_path / "fake_variants"
  pkg.mkdir()
  for module in ("a", "b"):
    (pkg / f"{module}.py").write_text(
      "from resnorm_jax.model.variants import Placement\nVARIANTS = (Placement('x', 'twice'),)\n"
    )
  variants._registry.cache_clear()
  monkeypatch.setattr(variants, "__path__", [str(pkg)])
  monkeypatch.setattr(variants, "__name__", "fake_variants")
  monkeypatch.syspath_prepend(str(tmp_path))
  try:
    with pytest.raises(ValueError, match="declared twice"):
      variants.names("norm_position")
  finally:
    monkeypatch.undo()
    variants._registry.cache_clear()
  assert "post" in variants.names("norm_position")


def _string_literals(path: str) -> set[str]:
  tree = pysource.parse_file(path)
  return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is str}


def test_each_later_variant_is_named_in_its_module_and_the_registry_only():
  paths = sorted(glob.glob(os.path.join(ROOT, "resnorm_jax", "**", "*.py"), recursive=True))
  literals = {os.path.relpath(p, ROOT): _string_literals(p) for p in paths}
  for name, module in LATER.items():
    own = {f"resnorm_jax/model/variants/{module}.py", "resnorm_jax/model/variants/__init__.py"}
    files = {p for p, lits in literals.items() if name in lits} - NOT_MODEL_CODE
    assert files <= own, f"{name!r} is named in {sorted(files - own)}"
    assert (
      f"resnorm_jax/model/variants/{module}.py" in files
    )  # the test sees the literal it looks for


def test_a_variant_newer_than_the_palette_is_named_by_no_module_but_its_own():
  """A variant added since style.py's palette (the 2025-26 ones, and any added later) is named
  by no module of the library, scripts/ or experiments/, figures and tables included: its
  named config declares its colour and label, its sweep grid (configs/) names it as data."""
  from resnorm_jax.analysis import style

  newer = {  # a later variant with a named config of its name that the palette lacks
    name: module
    for name, module in LATER.items()
    if name not in style.VARIANT_COLORS
    and os.path.exists(os.path.join(ROOT, "configs", f"{name}_96L.py"))
  }
  assert {"mhc", "hybridnorm", "denseformer", "valueres", "derf"} <= set(newer)
  paths = [
    p
    for folder in ("resnorm_jax", "scripts", "experiments")
    for p in glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True)
  ]
  literals = {os.path.relpath(p, ROOT): _string_literals(p) for p in paths}
  facts = {f"resnorm_jax/analysis/claims/{m}.py" for m in STATES_FACTS}
  for name, module in newer.items():
    own = {f"resnorm_jax/model/variants/{module}.py"}
    files = {p for p, lits in literals.items() if name in lits} - facts
    assert files == own, f"{name!r} is named in {sorted(files - own)}"
    declared = style.declared(os.path.join(ROOT, "configs", f"{name}_96L.py"))
    assert {"COLOR", "LABEL"} <= set(declared) <= set(style.DECLARED), name
    assert style.variant_color(name) == declared["COLOR"]
    assert style.variant_label(name) == declared["LABEL"]


def _names_used(path: str) -> set[str]:
  """String literals, attribute names and identifiers of a module."""
  tree = pysource.parse_file(path)
  out = _string_literals(path)
  out |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
  return out | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def test_the_guard_covers_every_later_variant_and_reads_its_own_keys_in_its_module_only():
  assert set(LATER.values()) == set(_modules()) - {"standard"}
  standard = {v.name for v in _modules()["standard"].VARIANTS}
  assert set(LATER) == (RESIDUALS | PLACEMENTS | NORMS | FEATURES) - standard
  assert KEYS  # the guard below sees the keys it looks for
  paths = sorted(glob.glob(os.path.join(ROOT, "resnorm_jax", "**", "*.py"), recursive=True))
  used = {os.path.relpath(p, ROOT): _names_used(p) for p in paths}
  for key, module in KEYS.items():
    # declared and read in its own module only: the schema, ModelConfig and the registry
    # read the declaration, never the name
    own = f"resnorm_jax/model/variants/{module}.py"
    files = {p for p, names in used.items() if key in names}
    assert files == {own}, f"model.{key} is named in {sorted(files - {own})}"


def test_a_variant_key_is_declared_once_and_read_by_the_schema_the_config_and_the_checkpoint():
  from resnorm_jax.train import resume_policy

  fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
  model = schema.get_config().model
  assert set(fields) <= set(model)  # every field's default is the schema's
  assert all(f.default is dataclasses.MISSING for f in fields.values())
  keys = variants.keys()
  assert set(keys) == set(KEYS)
  # The schema reads the declarations from the modules' source: the same keys as imported.
  declared = variant_keys.declared()
  assert {k: d.key for k, d in declared.items()} == {k: key.declared() for k, key in keys.items()}
  described = {k: text for k, _, text in schema.describe()}
  for name, key in keys.items():
    assert fields[name].type == key.type.__name__, name  # typed by its default
    assert model[name] == key.default, name
    assert described[f"model.{name}"] == f"{KEYS[name]}: {key.description}", name
    # A checkpoint written before the variant existed resumes with the key at its default.
    assert resume_policy.ADDED_KEYS[f"model.{name}"] == key.default, name


def test_a_config_json_without_a_variant_key_loads_at_its_default():
  from ml_collections import config_dict

  config = schema.get_config()
  older = config_dict.ConfigDict(config.to_dict())
  with older.unlocked():
    for name in KEYS:
      del older.model[name]
  from resnorm_jax.model.config_types import model_config_from

  cfg = model_config_from(older)
  for name, key in variants.keys().items():
    assert getattr(cfg, name) == key.default, name


def test_a_key_the_source_reader_cannot_read_is_refused(tmp_path):
  computed = tmp_path / "computed.py"
  computed.write_text("VARIANTS = (Residual('x', 's', keys={'x_rate': Key(2 ** 3, 'n')}),)\n")
  with pytest.raises(ValueError, match="literals"):
    variant_keys.read_module(str(computed))
  outside = tmp_path / "outside.py"
  outside.write_text(
    "RATE = Key(4, 'n')\nVARIANTS = (Residual('x', 's', keys={'x_rate': RATE}),)\n"
  )
  with pytest.raises(ValueError, match="keys dict literal"):
    variant_keys.read_module(str(outside))
  good = tmp_path / "good.py"
  good.write_text("N = 4\nVARIANTS = (Residual('x', 's', keys={'x_rate': Key(N, 'n', f)}),)\n")
  assert variant_keys.read_module(str(good)) == {
    "x_rate": variant_keys.Declared("good", Key(4, "n"))
  }
  # An HParams column is read from the source too; one built from anything but literals is not.
  column = tmp_path / "column.py"
  line = "VARIANTS = (F('x', 's', keys={{'x_on': Key(False, 'n', {})}}),)\n"
  column.write_text(line.format("hparam=Column('x', 9)"))
  read = variant_keys.read_module(str(column))["x_on"].key
  assert read == Key(False, "n", hparam=variant_keys.Column("x", 9)) and read.type is bool
  for bad in ("hparam=COLUMN", "hparam=Column(name='x', order=9)", "choices=('a',)"):
    column.write_text(line.format(bad))
    with pytest.raises(ValueError, match="column.py:1: a Key"):
      variant_keys.read_module(str(column))


def test_a_variant_key_is_validated_whichever_variant_is_selected():
  with pytest.raises(ValueError, match=r"model\.mixln_post_fraction=1\.5 not in \[0, 1\]"):
    tiny_config(norm_position="pre", mixln_post_fraction=1.5)
  with pytest.raises(ValueError, match=r"model\.hyperconn_rate=0 must be a positive integer"):
    tiny_config(hyperconn_rate=0)
  with pytest.raises(ValueError, match=r"model\.mhc_sinkhorn_iters=0 must be a positive integer"):
    tiny_config(mhc_sinkhorn_iters=0)
  with pytest.raises(ValueError, match=r"model\.valueres_lambda_init=-0\.1 not in \[0, 1\]"):
    tiny_config(valueres_lambda_init=-0.1)


def _selecting(axis: str, name: str) -> ModelConfig:
  """A tiny config that selects variant `name`, with what it needs from the other axes."""
  needs = {
    ("residual", "ngpt"): dict(
      norm_position="none", position="rope", ffn_activation="swiglu", final_norm="false"
    ),
    ("residual", "hyperconn"): dict(norm_position="pre"),
    ("residual", "mhc"): dict(norm_position="pre"),
  }
  return tiny_config(**{axis: name}, **needs.get((axis, name), {}))
