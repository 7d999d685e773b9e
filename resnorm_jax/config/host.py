"""The platform JAX may start on this host, chosen before JAX starts a backend.

Left to choose, JAX starts every platform whose plugin is installed. With libtpu installed
(the test tools' requirements-dev.txt pins it for deviceless TPU compiles) on a host without a
TPU, every command prints libtpu's start-up errors; with the CUDA plugin
installed (requirements-gpu.txt, requirements-gpu-compile.txt) on a host without an NVIDIA
driver, it prints a traceback ("Unable to load CUDA. Is it installed?") and falls back to the
CPU, and the plugin's loader logs "Could not find cuda drivers" lines (no logging flag turns
them off). `choose()` keeps such a host on its other platforms, a user's JAX_PLATFORMS kept as
it is. Importing JAX itself loads the plugin's libraries: `import_jax_quietly()` (the JAX
packages' __init__ call it) imports JAX, and later discovers its plugins, with the loader's
lines held back on such a host. Nothing here imports JAX at module level.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable

# Files an NVIDIA driver makes (the device nodes, and the kernel module's version file).
NVIDIA_DRIVER_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia/version")
# Files of a TPU host's devices (as resnorm_jax/train/run_setup.py checks).
TPU_DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/[0-9]*")
CUDA_PLUGINS = ("jax_plugins.xla_cuda12", "jax_cuda12_plugin")


def _installed(name: str) -> bool:
  try:
    return importlib.util.find_spec(name) is not None
  except (ImportError, ValueError):  # a parent package missing
    return False


def platforms(
  installed: Callable[[str], bool] = _installed,
  exists: Callable[[str], bool] = os.path.exists,
  matches: Callable[[str], list] = glob.glob,
) -> str | None:
  """JAX_PLATFORMS for this host where an installed plugin has no device to run on: the CUDA
  plugin without an NVIDIA driver, or libtpu (requirements-dev.txt and -tpu.txt install it
  for deviceless TPU compiles) without a TPU's device files, whose start-up otherwise prints
  "Failed to find host bounds", "Logging before InitGoogle()" and an E0000 INVALID_ARGUMENT
  trace on every command. The platforms that have their device, then 'cpu' ('cpu', 'tpu,cpu',
  'cuda,cpu'); None (JAX chooses) where every installed plugin has its device."""
  cuda_installed = any(installed(p) for p in CUDA_PLUGINS)
  cuda = cuda_installed and any(exists(f) for f in NVIDIA_DRIVER_FILES)
  tpu_installed = installed("libtpu")
  tpu = tpu_installed and any(matches(g) for g in TPU_DEVICE_GLOBS)
  if cuda == cuda_installed and tpu == tpu_installed:
    return None
  return ",".join([*(["cuda"] if cuda else []), *(["tpu"] if tpu else []), "cpu"])


def choose(environ: dict | None = None, **probes) -> str | None:
  """Sets JAX_PLATFORMS (when unset) to `platforms()`. Returns the platforms set, or None.
  Call it before JAX starts a backend (the entry points of experiments/ do, on import)."""
  env = os.environ if environ is None else environ
  if env.get("JAX_PLATFORMS"):
    return None
  chosen = platforms(**probes)
  if chosen:
    env["JAX_PLATFORMS"] = chosen
  return chosen


# The lines the CUDA plugin's loader writes on a host without a driver, whatever the flags.
LOADER_NOISE = re.compile(
  r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine"
  r"|^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
)


def held_back(fn: Callable[[], object]) -> object:
  """fn() with what it writes to the standard error (file descriptor 2, the C++ loggers' as
  well as Python's) read back after it returns, LOADER_NOISE's lines left out."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as held:
    os.dup2(held.fileno(), 2)
    try:
      return fn()
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      held.seek(0)
      lines = held.read().decode(errors="replace").splitlines()
      kept = [line for line in lines if not LOADER_NOISE.search(line)]
      if kept:
        print("\n".join(kept), file=sys.stderr)


def import_jax_quietly(**probes) -> bool:
  """Imports JAX with the CUDA loader's lines (LOADER_NOISE) held back, on a host where
  `platforms()` leaves CUDA out, and holds them back likewise when JAX first starts a backend
  (its plugin discovery loads the plugin's libraries again); every other line is written on.
  A no-op where JAX is imported already or the host needs no choice. Returns whether it
  imported."""
  if "jax" in sys.modules or platforms(**probes) is None:
    return False
  held_back(lambda: importlib.import_module("jax"))
  from jax._src import xla_bridge  # where JAX discovers its plugins, once, at the first backend

  discover = getattr(xla_bridge, "discover_pjrt_plugins", None)
  if callable(discover):
    xla_bridge.discover_pjrt_plugins = functools.wraps(discover)(lambda: held_back(discover))
  return True
