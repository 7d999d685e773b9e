"""Packaging a user expects: pyproject.toml declares the runtime dependencies as ranges that
requirements.txt's exact pins satisfy, every package the library imports is pinned, and each
console command names a callable that exists."""

import ast
import glob
import os
import re
import sys
import tomllib

from resnorm_jax.config import pysource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


def _pins(name: str = "requirements.txt") -> dict[str, str]:
  pins = {}
  with open(os.path.join(ROOT, name)) as f:
    for line in f:
      m = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s#]+)", line)
      if m:
        pins[re.sub(r"\[.*\]", "", m.group(1)).lower().replace("_", "-")] = m.group(2)
  return pins


def _norm(name: str) -> str:
  return name.lower().replace("_", "-")


def test_the_pins_satisfy_the_declared_ranges():
  from packaging.requirements import Requirement

  pins = _pins()
  for spec in _project()["dependencies"]:
    req = Requirement(spec)
    assert _norm(req.name) in pins, f"{req.name} is a dependency but requirements.txt pins none"
    assert req.specifier.contains(pins[_norm(req.name)]), (spec, pins[_norm(req.name)])


def test_every_third_party_package_the_library_imports_is_pinned():
  # import name -> distribution name, where they differ
  dist = {"absl": "absl-py", "orbax": "orbax-checkpoint", "tensorboardX": "tensorboardx"}
  local = {"resnorm_jax", "configs", "experiments", "scripts", "__future__"}
  pins = _pins()
  imported = set()
  for path in glob.glob(os.path.join(ROOT, "resnorm_jax", "**", "*.py"), recursive=True):
    tree = pysource.parse_file(path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        imported |= {a.name.split(".")[0] for a in node.names}
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        imported.add(node.module.split(".")[0])
  third_party = {m for m in imported - local if m not in sys.stdlib_module_names}
  # optional extras, imported lazily where they are used (requirements-data.txt / -tpu.txt)
  optional = {"tokenizers", "datasets", "gcsfs", "libtpu"}
  missing = {m for m in third_party - optional if _norm(dist.get(m, m)) not in pins}
  assert not missing, f"imported by resnorm_jax but not pinned in requirements.txt: {missing}"


def test_every_console_command_names_a_callable():
  scripts = _project()["scripts"]
  assert {"resnorm-train", "resnorm-sample", "resnorm-prepare", "resnorm-config"} <= set(scripts)
  for command, target in scripts.items():
    module, _, attr = target.partition(":")
    # read, not imported: the entry points define absl flags, once per process
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    tree = pysource.parse_file(path)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert attr in defined, f"{command}: {target} has no function {attr}"
