"""What produced a run: the code's git commit (and whether the tree had uncommitted changes),
the versions of the packages results depend on, the host and the Python. Recorded in
config.json and summary.json; no JAX import (the device kind is the summary's `devices`).
"""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess

import resnorm_jax

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "ml_collections")
ROOT = resnorm_jax.ROOT


def _git(*args: str) -> str | None:
  """Output of a git command in the code's repository, None outside one (an installed copy)."""
  try:
    out = subprocess.run(
      ["git", "-C", ROOT, *args], capture_output=True, text=True, timeout=10, check=True
    )
  except (OSError, subprocess.SubprocessError):
    return None
  return out.stdout.strip()


def code_version() -> dict:
  """{"commit", "dirty"}: the checked-out commit and whether tracked files differ from it
  (untracked files, e.g. run folders, do not count); both None outside a git checkout."""
  commit = _git("rev-parse", "HEAD")
  if commit is None:
    return {"commit": None, "dirty": None}
  status = _git("status", "--porcelain", "--untracked-files=no")
  return {"commit": commit, "dirty": None if status is None else bool(status)}


def package_versions() -> dict[str, str | None]:
  """Installed version of each package in PACKAGES (None if absent)."""
  out = {}
  for name in PACKAGES:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  return out


def collect() -> dict:
  """The run's provenance: code version, packages, host and Python."""
  return {
    **code_version(),
    "packages": package_versions(),
    "host": socket.gethostname(),
    "python": platform.python_version(),
  }


def code_changed(recorded: dict | None, current: dict) -> str | None:
  """A one-line note when a resumed run's code differs from what wrote its config.json
  (another commit, or uncommitted changes then or now), else None. A warning, not a refusal:
  most commits do not change what a run computes, and the checkpoint's frozen config already
  refuses a resume into another experiment."""
  if not recorded or recorded.get("commit") is None or current.get("commit") is None:
    return None
  if recorded["commit"] != current["commit"]:
    return (
      f"note: this run was started by commit {recorded['commit'][:12]} and resumes with "
      f"{current['commit'][:12]}: the code changed in between"
    )
  if recorded.get("dirty") or current.get("dirty"):
    return "note: uncommitted changes in the code when this run started or now"
  return None
