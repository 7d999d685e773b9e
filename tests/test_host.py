"""The host's platform choice before JAX starts (resnorm_jax/config/host.py): a CUDA plugin
on a host without an NVIDIA driver is left out, quietly; a user's choice is kept."""

import os
import subprocess
import sys

from resnorm_jax.config import host

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _probes(plugins=(), files=(), globs=()):
  return dict(
    installed=lambda name: name in plugins,
    exists=lambda path: path in files,
    matches=lambda pattern: [pattern] if pattern in globs else [],
  )


def test_a_cuda_plugin_without_a_driver_runs_on_the_cpu():
  assert host.platforms(**_probes(plugins={"jax_plugins.xla_cuda12"})) == "cpu"
  assert host.platforms(**_probes(plugins={"jax_cuda12_plugin"})) == "cpu"


def test_a_cuda_plugin_with_a_driver_or_no_plugin_leaves_the_choice_to_jax():
  cuda = {"jax_plugins.xla_cuda12"}
  assert host.platforms(**_probes(plugins=cuda, files={"/dev/nvidiactl"})) is None
  assert host.platforms(**_probes(plugins=cuda, files={"/proc/driver/nvidia/version"})) is None
  assert host.platforms(**_probes()) is None
  assert host.platforms(**_probes(plugins={"libtpu"}, globs={"/dev/accel*"})) is None


def test_a_tpu_host_with_a_stray_cuda_plugin_keeps_its_tpu():
  probes = _probes(plugins={"jax_plugins.xla_cuda12", "libtpu"}, globs={"/dev/accel*"})
  assert host.platforms(**probes) == "tpu,cpu"


def test_choose_sets_only_what_the_user_left_unset():
  no_driver = _probes(plugins={"jax_plugins.xla_cuda12"})
  env = {}
  assert host.choose(env, **no_driver) == "cpu"
  assert env == {"JAX_PLATFORMS": "cpu"}
  mine = {"JAX_PLATFORMS": "cuda"}
  assert host.choose(mine, **no_driver) is None
  assert mine == {"JAX_PLATFORMS": "cuda"}
  nothing = {}
  assert host.choose(nothing, **_probes()) is None
  assert nothing == {}


def test_every_command_chooses_before_it_imports_jax():
  """Importing the commands' package sets the platform before JAX is imported."""
  code = (
    "import sys, experiments; import os; "
    "print('jax' in sys.modules, 'resnorm_jax.config.host' in sys.modules)"
  )
  out = subprocess.run(
    [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
  )
  assert out.stdout.split() == ["False", "True"]


def test_held_back_drops_the_loaders_lines_and_writes_on_the_rest(capfd):
  def noisy():
    os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written")
    os.write(2, b" to STDERR\n")
    os.write(
      2,
      b"I0000 00:00:1.2 3 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
      b"GPU will not be used.\n",
    )
    os.write(2, b"E0000 something else went wrong\n")
    print("a Python warning", file=sys.stderr)
    return 7

  assert host.held_back(noisy) == 7
  err = capfd.readouterr().err
  # (under pytest sys.stderr is its capture, not file descriptor 2: the order is not kept)
  assert sorted(err.splitlines()) == ["E0000 something else went wrong", "a Python warning"]


def test_import_jax_quietly_is_a_no_op_where_the_host_needs_no_choice():
  import jax  # noqa: F401  (imported already: nothing to hold back, whatever the host)

  assert not host.import_jax_quietly(**_probes())  # no CUDA plugin
  assert not host.import_jax_quietly(**_probes(plugins={"jax_plugins.xla_cuda12"}))


def test_libtpu_without_a_tpu_is_left_out_and_quiet():
  """requirements-dev.txt installs libtpu on a CPU host: without a TPU's device files the
  commands run on the CPU (JAX would start libtpu and print its E0000 trace on each)."""
  assert host.platforms(**_probes(plugins={"libtpu"})) == "cpu"
  cuda_and_tpu = {"jax_plugins.xla_cuda12", "libtpu"}
  assert host.platforms(**_probes(plugins=cuda_and_tpu, files={"/dev/nvidiactl"})) == "cuda,cpu"
  assert host.platforms(**_probes(plugins=cuda_and_tpu)) == "cpu"


def test_a_command_on_this_host_prints_no_libtpu_noise(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  proc = subprocess.run(
    [sys.executable, "-c", "import experiments, jax; print(jax.devices()[0].platform)"],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  for noise in ("Failed to find host bounds", "InitGoogle", "E0000", "libtpu"):
    assert noise not in proc.stderr, proc.stderr
