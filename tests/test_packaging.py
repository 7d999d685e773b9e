"""Packaging a user expects: pyproject.toml declares the runtime dependencies as ranges that
requirements.txt's exact pins satisfy, every package the library imports is pinned, and each
console command names a callable that exists."""

import ast
import glob
import os
import re
import subprocess
import sys
import tomllib

import pytest

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


def _console(command: str) -> str:
  """The path of a console command installed with this checkout (pip install -e .)."""
  path = os.path.join(os.path.dirname(sys.executable), command)
  if not os.path.exists(path):
    pytest.skip(f"{command} is not installed (pip install -e .)")
  return path


@pytest.mark.parametrize(
  "command", ["resnorm-train", "resnorm-sample", "resnorm-prepare", "resnorm-config"]
)
def test_each_console_command_prints_the_full_help(command):
  """--help prints the module's usage text and every flag it defines, as `python -m` does
  (absl lists only the flags of the module that is sys.argv[0]: the console wrapper's, none).
  It exits before any JAX work; from another folder, as a user runs it."""
  module = _project()["scripts"][command].partition(":")[0]
  source = open(os.path.join(ROOT, *module.split(".")) + ".py").read()
  run = subprocess.run(
    [_console(command), "--help"], capture_output=True, text=True, timeout=120, cwd="/"
  )
  doc = ast.get_docstring(ast.parse(source))
  assert doc.splitlines()[0] in run.stdout, run.stdout
  for name in re.findall(r"DEFINE_\w+\(\s*\"(\w+)\"", source):
    assert f"--{name}:" in run.stdout, (name, run.stdout)


def test_resnorm_train_help_is_what_python_m_prints():
  console = subprocess.run(
    [_console("resnorm-train"), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
  )
  module = subprocess.run(
    [sys.executable, "-m", "experiments.train", "--help"],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
  )
  # the same text but the header naming the program the flags belong to
  header = re.compile(r"^\S+(resnorm-train|experiments/train\.py):$", flags=re.M)
  assert header.sub("PROGRAM:", console.stdout) == header.sub("PROGRAM:", module.stdout)
  assert "--workdir:" in console.stdout
