"""Where a sweep's jobs run: pinned groups of cores or one device each (`make_slots`), and a
child's environment in its slot (`child_env`). No JAX here.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Sequence

from resnorm_jax.sweeps.grid import ROOT


@dataclasses.dataclass(frozen=True)
class Slot:
  """Where one job runs: the cores it is pinned to and the environment it adds."""

  label: str
  cpus: tuple[int, ...] | None  # None: not pinned (all cores)
  env: dict[str, str]


ACCELERATORS = ("cpu", "gpu", "tpu")
# One device per job: the variables that make a process see only its own device.
_DEVICE_ENV = {
  "gpu": lambda i: {"CUDA_VISIBLE_DEVICES": str(i)},
  "tpu": lambda i: {
    "TPU_VISIBLE_CHIPS": str(i),
    "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
    "TPU_PROCESS_BOUNDS": "1,1,1",
    "TPU_PROCESS_PORT": str(8476 + i),
    "TPU_MESH_CONTROLLER_PORT": str(8476 + i),
  },
}


def available_cpus() -> list[int]:
  """The cores this process may run on."""
  return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def count_devices(accelerator: str) -> int:
  """Accelerators visible here: CUDA_VISIBLE_DEVICES / nvidia-smi for GPUs, /dev/accel* TPUs."""
  if accelerator == "gpu":
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
      return len([v for v in visible.split(",") if v.strip()])
    try:
      out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
      return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())
  if accelerator == "tpu":
    import glob

    return len(glob.glob("/dev/accel*")) or len(glob.glob("/dev/vfio/[0-9]*"))
  return 0


def make_slots(
  jobs: str, threads_per_job: int, accelerator: str = "cpu", cpus: Sequence[int] | None = None
) -> list[Slot]:
  """The job slots of `--jobs` (a number or 'auto'): pinned core groups, or devices.

  One job on a CPU stays unpinned (it uses every core, as a single run does). Several jobs
  get disjoint groups of `threads_per_job` cores; with one core per job XLA:CPU is made
  single-threaded too (its Eigen pool would otherwise start a thread per machine core).
  """
  if accelerator not in ACCELERATORS:
    raise ValueError(f"--accelerator={accelerator!r} is not one of {', '.join(ACCELERATORS)}")
  if threads_per_job < 1:
    raise ValueError(f"--threads_per_job={threads_per_job} must be >= 1")
  if accelerator != "cpu":
    n_dev = count_devices(accelerator)
    if n_dev < 1:
      raise ValueError(f"--accelerator={accelerator}: no {accelerator.upper()} is visible here")
    n = n_dev if jobs == "auto" else _positive_jobs(jobs)
    if n > n_dev:
      raise ValueError(f"--jobs={jobs}: only {n_dev} {accelerator.upper()}s are visible")
    return [Slot(f"{accelerator}{i}", None, _DEVICE_ENV[accelerator](i)) for i in range(n)]
  cpus = list(available_cpus() if cpus is None else cpus)
  groups = max(1, len(cpus) // threads_per_job)
  n = groups if jobs == "auto" else _positive_jobs(jobs)
  if n == 1:
    return [Slot("all cores", None, {})]
  if n * threads_per_job > len(cpus):
    raise ValueError(
      f"--jobs={jobs} x --threads_per_job={threads_per_job} needs {n * threads_per_job} cores; "
      f"{len(cpus)} are available ({cpus})"
    )
  slots = []
  for i in range(n):
    group = tuple(cpus[i * threads_per_job : (i + 1) * threads_per_job])
    flags = os.environ.get("XLA_FLAGS", "")
    if threads_per_job == 1:
      flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    label = f"cpu{group[0]}" if len(group) == 1 else f"cpu{group[0]}-{group[-1]}"
    slots.append(Slot(label, group, {"XLA_FLAGS": flags}))
  return slots


def _positive_jobs(jobs: str) -> int:
  try:
    n = int(jobs)
  except ValueError:
    n = 0
  if n < 1:
    raise ValueError(f"--jobs={jobs!r} must be 'auto' or a positive integer")
  return n


def child_env(slot: Slot) -> dict[str, str]:
  """A child's environment: this one, the slot's, and this code's root first on PYTHONPATH
  (with the root as working folder, `python -m experiments.train` imports this checkout's
  package, not an editable install of another one)."""
  path = os.environ.get("PYTHONPATH", "")
  return {**os.environ, **slot.env, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, path) if p)}
