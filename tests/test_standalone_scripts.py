"""Scripts that promise to run without the project's requirements keep that promise.

scripts/torch_reference.py is the PyTorch baseline of the JAX step: its docstring says
`pip install torch numpy` is all it needs. Two checks: every import it makes (at any
depth of the file) is the standard library, torch or numpy; and it imports in a fresh
interpreter that sees only stand-in torch and numpy packages, not the venv's site-packages
(no jax, ml_collections, etils, nor the project itself).
"""

import ast
import os
import subprocess
import sys
import textwrap

from resnorm_jax.files import pysource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_REFERENCE = os.path.join(ROOT, "scripts", "torch_reference.py")
ALLOWED = {"torch", "numpy"}


def _imported_roots(path: str) -> set[str]:
  """The top-level package of every import statement in a file (relative imports as '.')."""
  roots = set()
  for node in ast.walk(pysource.parse_file(path)):
    if isinstance(node, ast.Import):
      roots.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      roots.add("." if node.level else node.module.split(".")[0])
  return roots


def test_torch_reference_imports_only_stdlib_torch_numpy():
  roots = _imported_roots(TORCH_REFERENCE)
  foreign = {r for r in roots if r not in sys.stdlib_module_names and r not in ALLOWED}
  assert not foreign, f"scripts/torch_reference.py imports {sorted(foreign)}"
  assert ALLOWED <= roots  # the check reads the right file


def test_imported_roots_sees_nested_and_from_imports(tmp_path):
  """The check above can fail: a project import inside a function is found."""
  src = tmp_path / "x.py"
  src.write_text("import os\ndef f():\n  from resnorm_jax import cli\n  import etils.epath\n")
  assert _imported_roots(str(src)) == {"os", "resnorm_jax", "etils"}


# Just enough of torch and numpy for the module body to run: classes subclass nn.Module.
_STUBS = {
  "torch/__init__.py": "from torch import nn\n",
  "torch/nn/__init__.py": "class Module:\n  pass\n",
  "torch/nn/functional.py": "",
  "numpy/__init__.py": "ndarray = object\n",
}


def test_torch_reference_imports_without_the_project_requirements(tmp_path):
  for rel, text in _STUBS.items():
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(text)
  probe = textwrap.dedent(
    f"""
    import runpy, sys
    runpy.run_path({TORCH_REFERENCE!r}, run_name="torch_reference")
    project = ("resnorm_jax", "jax", "ml_collections", "etils")
    leaked = sorted(m for m in project if m in sys.modules)
    print("LEAKED", leaked)
    """
  )
  # -I: no PYTHONPATH, user site or script folder; -S: no site-packages (the venv's jax,
  # ml_collections, etils); cwd is the stub folder, not the repository.
  proc = subprocess.run(
    [
      sys.executable,
      "-I",
      "-S",
      "-c",
      f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + probe,
    ],
    cwd=tmp_path,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "LEAKED []" in proc.stdout
