"""Loud but ugly: faults whose result was right and whose message was not (a traceback, dozens
of lines, no file named). Each ends in one line naming the file, with the exit status of
docs/usage.md's table (2: bad input, refused before compiling; 1: a fault at run time), and
a run never writes through a symbolic link."""

import errno
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from configs import smoke
from resnorm_jax.config import cli
from resnorm_jax.data import fs
from resnorm_jax.files import nofollow
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import run_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")


def _one_error_line(text: str) -> str:
  """The only line of `text` (stderr of a refused command), with no traceback."""
  assert "Traceback" not in text, text[-3000:]
  (line,) = text.strip().splitlines()
  assert line.startswith("error: "), line
  return line


# --- a full disk: orbax's and asyncio's records held, one line of the run's -----------------


def _user_namespaces() -> bool:
  try:
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
  except OSError:
    return False


@pytest.mark.slow  # trains (a process)
@pytest.mark.long  # a run on a filled disk; a write error in process: test_run_faults
def test_a_real_full_disk_ends_the_run_in_one_error_line_without_a_traceback(tmp_path):
  """A 500 kB tmpfs (mounted in a user namespace, no root needed) fills at the second
  checkpoint: orbax's error records and the save's write futures printed dozens of lines."""
  if not shutil.which("unshare") or not _user_namespaces():
    pytest.skip("needs unshare -rm (user namespaces) to mount a small tmpfs")
  disk = tmp_path / "disk"
  disk.mkdir()
  workdir = disk / "run"
  train = [
    sys.executable,
    "-m",
    "experiments.train",
    "--config=configs/smoke.py",
    "--config.train.checkpoint_every=4",
    f"--workdir={workdir}",
  ]
  script = f"mount -t tmpfs -o size=500k tmpfs {disk} && exec {' '.join(train)}"
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_backend_optimization_level=0"}
  proc = subprocess.run(
    ["unshare", "-rm", "sh", "-c", script],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  out = proc.stdout + proc.stderr
  assert proc.returncode == 1, out[-3000:]
  assert "Traceback" not in out and "never retrieved" not in out, out[-3000:]
  assert "Event loop is closed" not in out, out[-3000:]
  assert not [ln for ln in out.splitlines() if ln[:1] == "E" and ln[1:5].isdigit()], out[-3000:]
  # One error line: summary.json, TensorBoard's events and HParams that the full disk also
  # refuses are the same fault, not said again (a second error line, two WARNING lines).
  (line,) = [ln for ln in out.splitlines() if ln.startswith("error:")]
  assert line.startswith("error: saving the checkpoint"), out[-3000:]
  assert "No space left on device" in line and f"{workdir}/ckpt/" in line, line
  assert "WARNING" not in out, out[-3000:]


# --- a population on a folder that cannot be written ----------------------------------------


def test_a_population_on_a_folder_that_cannot_be_written_is_refused_like_a_single_run(tmp_path):
  """A single run exits 2 in one line; a population ended in an OSError traceback."""
  from resnorm_jax.train.population import points as population_points
  from resnorm_jax.train.population import run as population_run

  (tmp_path / "file").write_text("")
  overrides = {"train.steps": 2, "train.log_every": 1, "train.eval_every": 2}
  configs = [
    population_points.member_config("configs/smoke.py", {**overrides, "seed": s}) for s in (0, 1)
  ]
  workdirs = [str(tmp_path / "file" / f"s{s}") for s in (0, 1)]
  with pytest.raises(workdir_lib.NotWritable) as e:
    population_run.run(configs, workdirs)
  assert str(e.value) == f"--workdir={workdirs[0]} cannot be written: Not a directory"
  assert sorted(os.listdir(tmp_path)) == ["file"]


def test_a_population_member_completed_on_a_read_only_folder_has_nothing_to_do(
  tmp_path, monkeypatch
):
  from resnorm_jax.train.population import run as population_run

  done = {"status": "completed", "steps": 2}
  calls = []

  def read_only(path):
    calls.append(path)
    raise workdir_lib.not_writable(path, OSError(errno.EROFS, "Read-only file system"))

  monkeypatch.setattr(workdir_lib, "make_writable", read_only)
  monkeypatch.setattr(run_files, "completed_run", lambda config, workdir: dict(done))
  shared = type("Shared", (), {"corpus": type("C", (), {"split": {}})()})()
  m = population_run._open(
    shared, smoke.get_config(), str(tmp_path / "m"), None, {}, "python -m experiments.train"
  )
  assert m.summary == done and calls == [str(tmp_path / "m")]


# --- ckpt replaced by a file -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_a_ckpt_that_is_not_a_folder_is_refused_before_training(tmp_path, kind):
  """`ckpt` replaced by a file trained 10 steps, then advised to free space."""
  path = tmp_path / "ckpt"
  if kind == "file":
    path.write_text("not a checkpoint")
  else:
    path.symlink_to(tmp_path / "nowhere")
  with pytest.raises(ckpt_lib.CheckpointError, match=r"not the run's checkpoint folder") as e:
    ckpt_lib.Checkpointer(str(path))
  assert str(e.value).startswith(f"{path} is a")
  assert isinstance(e.value, ValueError)  # exit status 2


# --- a deleted metrics.jsonl: escape_step from partial metrics is marked ---------------------


def _rows(path, steps, eval_loss=1.0):
  with open(path, "w") as f:
    for s in steps:
      row = {"step": s, "train/loss": 2.0}
      if s % 10 == 0:
        row["eval/loss"] = eval_loss
      f.write(json.dumps(row) + "\n")


@pytest.mark.parametrize("steps, partial", [((5, 10, 15, 20), False), ((15, 20), True), ((), True)])
def test_an_escape_step_from_metrics_that_lost_their_first_rows_is_marked(tmp_path, steps, partial):
  """metrics.jsonl deleted, then the run resumed from step 10: escape_step 20 where the run
  escaped at 10, without a mark."""
  (tmp_path / "config.json").write_text(json.dumps(smoke.get_config().to_dict()))  # log 5
  _rows(tmp_path / "metrics.jsonl", steps)
  summary = {"status": "completed", "steps": 20, "unigram_entropy": 3.0, "curve_baseline": 3.0}
  summary.update(final_eval_loss=1.0, eval_baseline=3.0)
  run_files.add_outcome(summary, str(tmp_path), 256)
  if partial:
    assert summary["escape_step_partial"] is True
    assert summary["metrics_lost_from_step"] == 5
  else:
    assert "escape_step_partial" not in summary and "metrics_lost_from_step" not in summary


# --- config files are Python: each failure in one line, exit 2 -------------------------------


CONFIG_FILES = {
  "syntax": ("def get_config(:\n  pass\n", "failed at line 1: SyntaxError: invalid syntax"),
  "raises": ("raise RuntimeError('no GPU here')\n", "failed at line 1: RuntimeError: no GPU here"),
  "raises_in_get_config": (
    "def get_config():\n  return 1 / 0\n",
    "failed at line 2: ZeroDivisionError: division by zero",
  ),
  "dict": (
    "def get_config():\n  return {'name': 'x'}\n",
    "get_config() returned a dict, not an ml_collections.ConfigDict",
  ),
  "no_get_config": ("X = 1\n", "defines no get_config()"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_FILES))
def test_a_config_file_that_fails_is_one_line_for_a_population_point(tmp_path, case):
  text, message = CONFIG_FILES[case]
  path = tmp_path / f"{case}.py"
  path.write_text(text)
  with pytest.raises(ValueError) as e:
    cli.load_config_file(str(path))
  assert message in str(e.value) and "\n" not in str(e.value), str(e.value)
  assert str(path) in str(e.value)


@pytest.mark.parametrize("case", sorted(CONFIG_FILES))
def test_a_config_file_that_fails_exits_2_in_one_line(tmp_path, run_script, case):
  """A syntax error, one that raises and one that returns a dict ended in a traceback (exit
  1); the dict one deep in the run (`'dict' object has no attribute 'dist'`)."""
  text, message = CONFIG_FILES[case]
  path = tmp_path / f"{case}.py"
  path.write_text(text)
  cmd = [sys.executable, "-m", "experiments.train", f"--config={path}"]
  proc = run_script([*cmd, f"--workdir={tmp_path / 'run'}"])
  assert proc.returncode == 2, proc.stderr[-2000:]
  line = _one_error_line(proc.stderr)
  assert line.startswith(f"error: --config={path}: ") and message in line, line
  assert not (tmp_path / "run").exists()


def test_a_misspelt_override_is_still_an_unknown_key_not_a_config_file_error(run_script):
  cmd = [sys.executable, "-m", "experiments.train", "--config=configs/smoke.py"]
  proc = run_script([*cmd, "--config.model.nope=3"])
  assert proc.returncode == 2, proc.stderr[-2000:]
  line = _one_error_line(proc.stderr)
  assert line.startswith("error: unknown config key in '--config.model.nope'"), line


# --- experiments.sample: a damaged newest checkpoint, a prompt that is not UTF-8 -------------


@pytest.mark.slow  # compiles for seconds: out of the fast tier
def test_sample_on_a_damaged_newest_checkpoint_names_it_in_one_line_and_uses_the_previous(
  tmp_path, capsys
):
  """A 70-line TensorStore spec per damaged checkpoint before (140 lines when all were)."""
  import jax

  from resnorm_jax.probes import generate
  from resnorm_jax.train import resume_policy, run_setup

  config = smoke.get_config()
  run = run_setup.build(config, jax.devices()[:1])
  state = run.init_state()
  c = ckpt_lib.Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  meta = resume_policy.run_meta(config.to_dict(), [], {})
  c.save(state, meta, force=True)
  c.save(state.replace(step=state.step + 1), meta, force=True)
  c.close()
  for path in (tmp_path / "ckpt" / "1" / "state").rglob("d/*"):
    if path.is_file():
      path.write_bytes(path.read_bytes()[:10])
  capsys.readouterr()
  restored, step = generate.restore(str(tmp_path), run)
  assert step == 0
  captured = capsys.readouterr()
  (line,) = captured.err.strip().splitlines()
  assert line.startswith(f"WARNING: checkpoint step 1 at {tmp_path / 'ckpt' / '1'} (")
  assert line.endswith("is damaged: sampling step 0, the newest intact one"), line
  assert "TensorStore({" not in line and captured.out == ""
  shutil.rmtree(tmp_path / "ckpt" / "0" / "state")  # none intact: one line, exit 2
  with pytest.raises(ValueError) as e:
    generate.restore(str(tmp_path), run)
  assert str(e.value).startswith(f"no checkpoint of {tmp_path} reads back intact: step 1 at ")
  assert "\n" not in str(e.value) and "; step 0 at " in str(e.value)
  assert capsys.readouterr().err == ""


def test_a_prompt_that_is_not_utf8_is_refused_in_one_line(tmp_path, run_script):
  """Bytes \\xff\\xfe from the shell: "surrogates not allowed" before."""
  prompt = os.fsdecode(b"ab\xff\xfecd")
  cmd = [sys.executable, "-m", "experiments.sample", f"--workdir={tmp_path}", f"--prompt={prompt}"]
  proc = run_script(cmd)
  assert proc.returncode == 2, proc.stderr[-2000:]
  line = _one_error_line(proc.stderr)
  assert line == (
    "error: --prompt is not valid UTF-8 text (bytes b'\\xff\\xfe' at byte 2): refused, not "
    "guessed; give the prompt as UTF-8 (the tokenizers encode text as UTF-8)"
  )


# --- compile_for --json into a missing folder -------------------------------------------------


def test_compile_for_json_into_a_missing_folder_is_refused_and_makes_no_folder(
  tmp_path, run_script
):
  """The folders were made silently; now a misspelt path is one line, before compiling."""
  target = tmp_path / "no" / "such" / "r.json"
  cmd = ["-m", "experiments.compile_for", "--config=configs/smoke.py", "--topology=v5e:2x2"]
  proc = run_script([sys.executable, *cmd, f"--json={target}"])
  assert proc.returncode == 2, proc.stderr[-2000:]
  line = _one_error_line(proc.stderr)
  assert line == (
    f"error: --json={target}: its folder {target.parent} does not exist (it is not made): "
    "create it first"
  )
  assert os.listdir(tmp_path) == []


def test_compile_for_json_that_is_a_symlink_is_refused_before_compiling(tmp_path, run_script):
  """It compiled, then wrote through the link's check as a traceback; now one line, first."""
  notes = tmp_path / "notes.json"
  notes.write_text("{}")
  target = tmp_path / "r.json"
  os.symlink(notes, target)
  cmd = ["-m", "experiments.compile_for", "--config=configs/smoke.py", "--topology=v5e:2x2"]
  proc = run_script([sys.executable, *cmd, f"--json={target}"])
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert _one_error_line(proc.stderr).startswith(f"error: --json: {target} is a symbolic link")
  assert notes.read_text() == "{}"


# --- no file of a run is written through a symbolic link -------------------------------------


@pytest.mark.parametrize("name", workdir_lib.RUN_FILES)
def test_a_run_file_that_is_a_symlink_is_refused_when_the_run_starts(tmp_path, name):
  target = tmp_path / "elsewhere.txt"
  target.write_text("precious")
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / name).symlink_to(target)
  with pytest.raises(nofollow.SymlinkRefused) as e:
    with workdir_lib.hold(str(workdir)):
      pass
  assert str(e.value).startswith(f"{workdir / name} is a symbolic link (to {str(target)!r})")
  assert isinstance(e.value, ValueError)  # exit status 2
  assert target.read_text() == "precious"
  assert not (workdir / workdir_lib.LOCK_FILE).exists()  # released


def test_the_writers_never_follow_a_symlink_made_after_the_start(tmp_path):
  """Each writer of a run file opens it with O_NOFOLLOW (or checks the link first)."""
  from resnorm_jax.runs import metrics_file
  from resnorm_jax.train.writers import MetricWriter

  target = tmp_path / "elsewhere.txt"
  target.write_text("precious")
  run = tmp_path / "run"
  run.mkdir()
  (run / "metrics.jsonl").symlink_to(target)
  with pytest.raises(nofollow.SymlinkRefused):
    MetricWriter(str(run))
  with pytest.raises(nofollow.SymlinkRefused):
    metrics_file.cut_metrics(str(run / "metrics.jsonl"), 0)
  with pytest.raises(nofollow.SymlinkRefused):
    fs.replace_text(str(run / "metrics.jsonl"), "x")
  for name in ("summary.json", "config.json.tmp"):
    (run / name).symlink_to(target)
  with pytest.raises(nofollow.SymlinkRefused):
    cli.write_json(str(run / "summary.json"), {"a": 1})
  with pytest.raises(nofollow.SymlinkRefused):
    cli.write_json(str(run / "config.json"), {"a": 1})  # its temporary file is the link
  assert target.read_text() == "precious"
  cli.write_json(str(tmp_path / "plain.json"), {"a": 1})  # a plain file: written
  assert json.loads((tmp_path / "plain.json").read_text()) == {"a": 1}
  with fs.open_nofollow(tmp_path / "plain.json", "a") as f:
    f.write("\n")
  assert np.isfinite(1.0)


# --- a sweep point whose train.log is a symbolic link ---------------------------------------


def test_a_sweep_point_whose_train_log_is_a_symlink_fails_that_point_in_one_line(tmp_path, capsys):
  """The sweep opened each point's train.log following a symbolic link (appending to the
  file it points to, anywhere): now that point fails with one line in its sweep_point.json
  and results row, its target unchanged, and the other points run."""
  from resnorm_jax.runs import sweep_point as sweep_records
  from resnorm_jax.sweeps import grid as sweep_grid
  from resnorm_jax.sweeps import jobs as sweep_jobs
  from resnorm_jax.sweeps import runner as sweep_runner
  from resnorm_jax.sweeps import slots as sweep_slots

  target = tmp_path / "elsewhere.txt"
  target.write_text("precious")
  points = sweep_grid.parse_points([{"config": "c.py", "name": n} for n in ("linked", "plain")])
  child = "print('trained')"
  jobs = [
    sweep_jobs.Job(p, str(tmp_path / p.name), [sys.executable, "-c", child], 1.0) for p in points
  ]
  (tmp_path / "linked").mkdir()
  (tmp_path / "linked" / "train.log").symlink_to(target)
  codes = sweep_runner.run_points(jobs, [sweep_slots.Slot("0", None, {})], progress_every=0)
  out = capsys.readouterr().out
  assert codes == {"linked": 2, "plain": 0}
  assert target.read_text() == "precious"
  assert "Traceback" not in out
  assert (tmp_path / "plain" / "train.log").read_text() == "trained\n"
  record = json.loads((tmp_path / "linked" / sweep_records.POINT_FILE).read_text())
  assert record["returncode"] == 2
  (error,) = record["error"].splitlines()
  assert error.startswith(f"not started: {tmp_path / 'linked' / 'train.log'} is a symbolic link")
  (line,) = [ln for ln in out.splitlines() if "linked" in ln]
  assert line == f"[1] linked: failed ({error})"
  rows = [{"name": "linked", "outcome": "pending"}, {"name": "plain", "outcome": "trained"}]
  failed, plain = sweep_records.with_failures(rows, str(tmp_path))
  assert failed["outcome"] == "failed" and failed["exit_code"] == 2 and failed["error"] == error
  assert plain["error"] is None
