"""The config schema lives in the library, once: every key has a default and a description in
resnorm_jax/config/schema.py (`python -m resnorm_jax.config` lists them), configs/ holds named
experiments that build on it, and nothing in resnorm_jax/ imports configs/."""

import ast
import glob
import os

from resnorm_jax.config import __main__ as listing
from resnorm_jax.config import schema
from resnorm_jax.files import pysource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_key_has_its_default_and_a_description():
  rows = schema.describe()
  flat = schema._flat(schema.get_config().to_dict())
  assert sorted(k for k, _, _ in rows) == sorted(flat)  # every key, once
  assert not [k for k, _, text in rows if not text], "keys without a description"
  described = dict((k, (d, t)) for k, d, t in rows)
  assert described["opt.b2"][0] == 0.98 and "second-moment" in described["opt.b2"][1]
  # a description may be the comment lines above a key; a '--- section ---' line is not one
  assert described["model.depth_param"][1].startswith("sp (standard")


def test_named_configs_build_on_the_library_schema():
  from configs import base

  assert base.get_config is schema.get_config
  assert base.get_config().to_dict() == schema.get_config().to_dict()


def test_the_library_never_imports_configs():
  offenders = []
  for path in glob.glob(os.path.join(ROOT, "resnorm_jax", "**", "*.py"), recursive=True):
    tree = pysource.parse_file(path)
    for node in ast.walk(tree):
      names = []
      if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.module:
        names = [node.module]
      if any(n == "configs" or n.startswith("configs.") for n in names):
        offenders.append(os.path.relpath(path, ROOT))
  assert not offenders, offenders


def test_the_listing_prints_keys_under_a_prefix_and_refuses_an_unknown_one(capsys):
  assert listing.main(["x", "opt."]) == 0
  out = capsys.readouterr().out.splitlines()
  assert out and all(line.startswith("opt.") for line in out)
  assert any(line.startswith("opt.lr ") and "peak learning rate" in line for line in out)
  assert listing.main(["x", "nosuch."]) == 2
  assert "no config key starts with 'nosuch.'" in capsys.readouterr().err
