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

from resnorm_jax.files import pysource

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
  # optional extras, imported lazily where they are used (requirements-data.txt / -tpu.txt);
  # torch: hardware/matmul_floor.py's PyTorch comparison, skipped where it is not installed;
  # fsspec: gcsfs's, asked for only for a gs:// workdir (data/fs.py, one line when missing)
  optional = {"tokenizers", "datasets", "gcsfs", "libtpu", "torch", "fsspec"}
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


# extra -> the requirements file that pins the same packages (each file also reads
# requirements.txt with `-r`, which the extras leave to the project's own dependencies)
EXTRAS = {
  "tpu": "requirements-tpu.txt",
  "gpu": "requirements-gpu.txt",
  "gpu-compile": "requirements-gpu-compile.txt",
  "data": "requirements-data.txt",
  "dev": "requirements-dev.txt",
}


def _requirement_lines(name: str) -> set[str]:
  """A requirements file's requirements, comments, `-r` and `-e` lines left out."""
  from packaging.requirements import Requirement

  out = set()
  with open(os.path.join(ROOT, name)) as f:
    for line in f:
      line = line.split("#")[0].strip()
      if line and not line.startswith("-"):
        out.add(str(Requirement(line)))
  return out


def test_each_extra_pins_exactly_what_its_requirements_file_pins():
  from packaging.requirements import Requirement

  extras = _project()["optional-dependencies"]
  assert set(extras) == set(EXTRAS)
  for extra, name in EXTRAS.items():
    declared = {str(Requirement(r)) for r in extras[extra]}
    assert declared == _requirement_lines(name), (extra, name)
    for r in map(Requirement, extras[extra]):  # pinned, one version each
      assert [s.operator for s in r.specifier] == ["=="], (extra, str(r))
    with open(os.path.join(ROOT, name)) as f:
      reads = f.read()
    assert name == "requirements-data.txt" or "-r requirements.txt" in reads, name


def test_the_metadata_is_complete_and_the_license_is_apache_2():
  project = _project()
  assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
  assert project["readme"] == "README.md" and project["requires-python"] == ">=3.11"
  assert project["authors"] and project["classifiers"]
  assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639
  with open(os.path.join(ROOT, "LICENSE")) as f:
    text = f.read()
  assert "Apache License\n                           Version 2.0, January 2004" in text
  assert "Copyright 2026 The resnorm_jax Authors" in text


def _backend():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    system = tomllib.load(f)["build-system"]
  import importlib.util

  (folder,) = system["backend-path"]
  path = os.path.join(ROOT, folder, system["build-backend"] + ".py")
  spec = importlib.util.spec_from_file_location("_resnorm_build_backend", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_a_regular_install_is_refused_in_one_line_naming_the_editable_one(tmp_path, capsys):
  """`pip install .` asks the backend for a wheel: refused (exit 1, one line on stderr saying
  to run pip install -e .); the editable hooks are setuptools' own. No pip, no network."""
  from setuptools import build_meta

  backend = _backend()
  for hook in (backend.build_wheel, backend.get_requires_for_build_wheel):
    args = (str(tmp_path),) if hook is backend.build_wheel else ()
    with pytest.raises(SystemExit) as e:
      hook(*args)
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "pip install -e ." in err
  assert not list(tmp_path.iterdir())  # nothing built
  for name in ("build_editable", "get_requires_for_build_editable",
               "prepare_metadata_for_build_editable", "build_sdist"):  # fmt: skip
    assert getattr(backend, name) is getattr(build_meta, name), name
