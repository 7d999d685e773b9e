"""Compile a run for a TPU slice or GPUs this host does not have (deviceless compilation).

python -m experiments.compile_for --config=configs/postnorm_1000L.py:paper --topology=v5p:2x2x2
python -m experiments.compile_for --config=configs/smoke.py --topology=v5litepod-4
python -m experiments.compile_for --config=configs/postnorm_96L.py:paper --topology=h100:8

TPUs need libtpu (requirements-tpu.txt or requirements-dev.txt); GPUs the CUDA plugin's
compiler (requirements-gpu-compile.txt), which gives memory per GPU but no cost model. The
command chooses its own platform: JAX on this host runs on the CPU (JAX_PLATFORMS=cpu, set
here), whatever accelerator plugins are installed.

Builds the run as training does (run_setup.build on the topology's devices), compiles the
train and eval steps for the TPU and prints per-chip memory against the chip's HBM, fits or
not, compile seconds and the TPU compiler's cost-model estimates (FLOPs per step, step time,
tokens/s, MFU; loop-corrected for the scanned stack). A config that does not fit: the
first of the next remat policy, a whole-slice fsdp axis, a smaller batch that compiles
within HBM is named. Exit 0: fits; 2: does not fit, or bad input (one line, before
compiling). Results for the :paper configs: docs/tpu_compile/README.md.

--tune (a TPU topology): compiles the candidates that keep the experiment and differ only in
how it runs (mesh, remat, attention, XLA flags; resnorm_jax/hardware/tune.py), one line each,
and names the fastest that fits (exit 2 where none fits). Results are cached in --tune_cache.
"""

from absl import app, flags
from ml_collections import config_flags

from resnorm_jax.config import cli

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (FILE[:ARG]).", lock_config=True
)
_TOPOLOGY = flags.DEFINE_string(
  "topology", None, "v5e:4x4, v5p:2x2x2, ..., v5litepod-16, v5p-8, or h100:N."
)
_VOCAB = flags.DEFINE_integer("vocab_size", 0, "Vocabulary (0: the run's; no data here: 50304).")
_EVAL = flags.DEFINE_bool("eval", True, "Also compile the eval step.")
_LOOP = flags.DEFINE_bool("loop_correction", True, "Correct the cost for the scanned stack.")
_SEARCH = flags.DEFINE_integer("search", 6, "Does not fit: try up to N candidate settings.")
_TUNE = flags.DEFINE_bool("tune", False, "Compile the candidate ways to run it; name the fastest.")
_TUNE_CACHE = flags.DEFINE_string(
  "tune_cache",
  "",
  "--tune's cache of compiled candidates (default ~/.cache/resnorm_jax/tune.json).",
)
_JSON = flags.DEFINE_string(
  "json", "", "Also write the result as one JSON object to this file (its folder must exist)."
)


def _check_json_path(path: str) -> None:
  """Bad input (exit status 2, one line) when --json names a file in a folder that does not
  exist, or a folder: the folder is not made (a misspelt path would leave folders behind);
  a symbolic link, never written through (the file it points to would be overwritten)."""
  import os

  from resnorm_jax.files.nofollow import SymlinkRefused, refuse_symlink

  try:
    refuse_symlink(path)
  except SymlinkRefused as e:
    cli.fail(f"--json: {e}")
  folder = os.path.dirname(os.path.abspath(path))
  if os.path.isdir(path):
    cli.fail(f"--json={path} is a folder: name the file to write (e.g. {path}/result.json)")
  if not os.path.isdir(folder):
    cli.fail(f"--json={path}: its folder {folder} does not exist (it is not made): create it first")


def _tune(c) -> None:
  """--tune: one line per candidate and the winner; exit 2 where none fits or bad input."""
  from resnorm_jax.hardware import tune

  try:
    tuned = tune.tune(
      c,
      _TOPOLOGY.value,
      vocab_size=_VOCAB.value,
      cache_path=_TUNE_CACHE.value or tune.DEFAULT_CACHE,
      log=lambda s: print(s, flush=True),
    )
  except ValueError as e:
    cli.fail(str(e))
  if tuned.best is None:
    cli.fail(f"{c.name}: no candidate fits {tuned.target.name} at this global batch")


def main(argv):
  if len(argv) > 1 or _CONFIG.value is None or not _TOPOLOGY.value:
    cli.fail("usage: --config=FILE[:ARG] --topology=v5e:4x4 [--config.k=v ...]")
  if _JSON.value:  # before compiling; a folder is never made for it
    _check_json_path(_JSON.value)
  from resnorm_jax.hardware import target_compile as tc
  from resnorm_jax.hardware import target_report

  tc.use_cpu_host()  # before any JAX work: the target's compiler, not this host's devices
  c = _CONFIG.value
  if _TUNE.value:
    _tune(c)
    return
  try:
    tc.target_devices(_TOPOLOGY.value)  # bad target or no compiler for it: before compiling
    r = tc.compile_for(
      c, _TOPOLOGY.value, vocab_size=_VOCAB.value, eval_step=_EVAL.value, correct_loop=_LOOP.value
    )
  except ValueError as e:
    cli.fail(str(e))
  print("\n".join(target_report.describe(r)), flush=True)
  row = target_report.csv_row(r, c.name)
  if not r.fits:
    fit = tc.find_fit(c, r.topology, max_tries=_SEARCH.value, vocab_size=_VOCAB.value)
    if fit:
      row["recommendation"] = fit[0]
      print(f"recommendation: {fit[0]} fits ({target_report.size(fit[2].per_chip_bytes)} per chip)")
    else:
      row["recommendation"] = "a larger slice"
      print("recommendation: a larger slice (none of the candidate settings fits this one)")
  if _JSON.value:
    _check_json_path(_JSON.value)  # a link made while it compiled: one line, not a traceback
    cli.write_json(_JSON.value, row)
  if not r.fits:
    cli.fail(f"{c.name} does not fit on {r.topology}: {row['recommendation']}")


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
