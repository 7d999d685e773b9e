"""Bad input refused before anything is compiled, in one line naming the value: non-finite
or out-of-range config values, a run name or workdir that is not one folder, a workdir that
cannot be written or holds what no run writes, a misspelt key, a config file that is missing
or fails (exit status 2); a run that failed is not bad input."""

import errno
import os
import subprocess
import sys

import pytest

from configs import smoke
from resnorm_jax.config import cli
from resnorm_jax.runs import end_line
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.train import io_faults, loop, run_setup
from resnorm_jax.train.population import points as population_points


def test_a_lock_path_that_is_a_folder_is_bad_input_in_one_line(tmp_path):
  (tmp_path / workdir_lib.LOCK_FILE).mkdir()
  with pytest.raises(ValueError, match=r"\.lock is a folder, not the run's lock file: remove it"):
    with workdir_lib.hold(str(tmp_path)):
      pass


@pytest.mark.parametrize("key", ["opt.lr", "model.init_std", "opt.eps", "model.norm_eps"])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_config_values_are_refused_naming_the_key(key, value):
  config = smoke.get_config()
  config.update_from_flattened_dict({key: value})
  with pytest.raises(ValueError, match=rf"{key}=(inf|-inf|nan) must be a finite number"):
    run_setup.validate(config)


@pytest.mark.parametrize("value", [-1.0, 0.0, -1])
def test_a_negative_or_zero_init_std_is_refused_naming_the_range(value):
  """model.init_std=-1 trained (loss 13.3): a negative std is no init rule."""
  config = smoke.get_config()
  config.model.init_std = value
  with pytest.raises(ValueError, match=rf"model.init_std={float(value)!r} must be a number > 0"):
    run_setup.validate(config)


@pytest.mark.parametrize("key", ["residual_alpha", "branch_scale", "init_beta"])
@pytest.mark.parametrize("value", [-2.0, 0.0])
def test_a_negative_or_zero_residual_scale_or_init_gain_is_refused_naming_the_key(key, value):
  """model.residual_alpha=-2 flipped the skip path and trained; unset stays the default."""
  config = smoke.get_config()
  config.model.update({"residual": "deepnorm", "init": "deepnorm", key: value})
  with pytest.raises(ValueError, match=rf"model.{key}={value!r} must be > 0 or unset \("):
    run_setup.validate(config)
  config.model[key] = 0.5
  run_setup.validate(config)


@pytest.mark.parametrize("name", ["../../escaped", "a/b", ".", "..", "/abs"])
def test_a_run_name_that_is_not_one_folder_name_is_refused(name):
  """--config.name=../../escaped wrote the run outside runs/ (default_workdir)."""
  config = smoke.get_config()
  config.name = name
  with pytest.raises(ValueError, match=rf"name={name!r} is not a folder name"):
    run_setup.validate(config)


@pytest.mark.parametrize("workdir", ["", " ", ".", "./"])
def test_an_empty_or_current_folder_workdir_is_refused(workdir):
  """--workdir= (empty) wrote the run into the current folder."""
  with pytest.raises(ValueError, match=rf"--workdir={workdir!r} names no run folder"):
    loop._workdir(smoke.get_config(), workdir, {})
  with pytest.raises(ValueError, match=rf"a member's workdir={workdir!r} names no run folder"):
    population_points.check_members([smoke.get_config()], [workdir])


@pytest.mark.slow  # training processes
@pytest.mark.parametrize(
  "args, message",
  [
    (["--config.model.init_std=-1"], "model.init_std=-1.0 must be a number > 0"),
    (["--workdir="], "--workdir='' names no run folder"),
    (["--config.name=../../escaped"], "name='../../escaped' is not a folder name"),
  ],
)
def test_bad_names_and_values_exit_2_in_one_line_before_compiling(
  run_script, tmp_path, args, message
):
  """Run from a folder of its own: nothing may be written there or above it."""
  cwd = tmp_path / "a" / "b"
  cwd.mkdir(parents=True)
  argv = [sys.executable, "-m", "experiments.train", f"--config={smoke.__file__}", *args]
  if not any(a.startswith("--workdir") for a in args):
    argv.append(f"--workdir={cwd / 'run'}")
  proc = subprocess.run(
    argv,
    cwd=cwd,
    capture_output=True,
    text=True,
    timeout=120,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
  )
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith("error: ") and message in line, line
  assert "compiled in" not in proc.stdout
  assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] == ["a", "a/b"]


def test_a_missing_config_file_is_one_line_and_exit_2(capsys):
  with pytest.raises(SystemExit) as e:
    cli.parse_flags_or_exit(["train", "--config=/no/such/config.py:smoke"])
  assert e.value.code == 2
  err = capsys.readouterr().err
  assert (
    err == "error: --config=/no/such/config.py:smoke: config file '/no/such/config.py' not found\n"
  )


def test_an_unwritable_workdir_is_bad_input(tmp_path, monkeypatch):
  (tmp_path / "file").write_text("")
  with pytest.raises(ValueError, match=r"--workdir=.*file/run cannot be written: Not a directory"):
    workdir_lib.make_writable(str(tmp_path / "file" / "run"))

  # A read-only folder (a read-only mount, or no permission: root ignores mode bits here).
  def read_only(path, *args, **kwargs):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

  monkeypatch.setattr(workdir_lib.os, "open", read_only)
  with pytest.raises(ValueError, match="cannot be written: Read-only file system"):
    with workdir_lib.hold(str(tmp_path)):
      pass


@pytest.mark.slow  # a training process
def test_an_unwritable_workdir_exits_2_in_one_line_before_compiling(run_script, tmp_path):
  (tmp_path / "file").write_text("")
  proc = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/smoke.py",
      f"--workdir={tmp_path / 'file' / 'run'}",
    ]
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines() == [
    f"error: --workdir={tmp_path / 'file' / 'run'} cannot be written: Not a directory"
  ]
  assert "compiled in" not in proc.stdout


def test_failed_is_not_bad_input():
  assert io_faults.EXIT_FAILED not in (0, 2)
  summary = {"status": "failed", "steps": 14, "outcome": "unknown"}
  message = end_line.end_message(summary, "/w", ["--config=c.py"])
  assert "resume:  python -m experiments.train --config=c.py --workdir=/w" in message


def test_a_workdir_holding_what_no_run_writes_is_refused(tmp_path, monkeypatch):
  """--workdir=$PWD from the repository's root wrote the run into the repository; a sweep
  folder given as a workdir mixed a run's files with its points."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with pytest.raises(ValueError, match=r"holds what no run writes \(.* and \d+ more\)"):
    loop._workdir(smoke.get_config(), root, {})
  sweep = tmp_path / "sweep"
  (sweep / "point-s0").mkdir(parents=True)
  (sweep / "results.csv").write_text("name\n")
  with pytest.raises(ValueError, match=r"holds what no run writes \(point-s0, results\.csv\)"):
    loop._workdir(smoke.get_config(), str(sweep), {})
  # A run's own folder, a new one and a remote one (gcsfs taken as installed) are accepted.
  monkeypatch.setattr(workdir_lib.fs, "missing_filesystem", lambda path: None)
  run = tmp_path / "run"
  (run / "ckpt").mkdir(parents=True)
  for name in ("config.json", "summary.json", "metrics.jsonl", "train.log", "sweep_point.json",
               "summary.json.tmp", "events.out.tfevents.1.vm", ".lock"):  # fmt: skip
    (run / name).write_text("")
  for ok in (run, tmp_path / "new", "gs://bucket/run"):
    assert loop._workdir(smoke.get_config(), str(ok), {}) == str(ok)


def test_a_misspelt_key_is_named_even_after_another_config_flag(run_script):
  """--config.train.steps=6 --config.model.num_layerz=3 blamed --config.train.steps."""
  proc = run_script(
    [
      sys.executable,
      "-m",
      "experiments.train",
      "--config=configs/smoke.py",
      "--config.train.steps=6",
      "--config.model.num_layerz=3",
    ]  # fmt: skip
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.startswith("error: unknown config key in '--config.model.num_layerz'")


@pytest.mark.parametrize(
  "body, message",
  [
    ("def get_config():\n  return None\n", "get_config() returned a NoneType"),
    (
      "import json\ndef get_config():\n  return json.loads('{bad')\n",
      "failed at line 3: JSONDecodeError: Expecting property name",
    ),
  ],
)
def test_a_config_file_s_own_failure_is_its_line(run_script, tmp_path, body, message):
  """get_config() returning None said "--config=FILE is required"; one raising a
  JSONDecodeError lost its message."""
  path = tmp_path / "c.py"
  path.write_text(body)
  proc = run_script([sys.executable, "-m", "experiments.train", f"--config={path}",
                     f"--workdir={tmp_path / 'w'}"])  # fmt: skip
  assert proc.returncode == 2
  (line,) = proc.stderr.strip().splitlines()[-1:]
  assert line.startswith(f"error: --config={path}: ") and message in line, line
