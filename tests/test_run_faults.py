"""The quieter ways a run lost or misreported work: the bookkeeping of a diverged or resumed
run, eval rows' speed, metrics.jsonl's lines and mode, hand-edited times, a signal at start-up,
a full disk met by metrics.jsonl or summary.json, a TensorBoard write error. Bad input refused
before compiling: test_run_input.py; damaged checkpoints: test_checkpoint_*.py."""

import errno
import json
import os
import stat
import time

import pytest

from configs import smoke
from conftest import fill_disk_at_metrics_row
from resnorm_jax.config import cli
from resnorm_jax.runs import metrics_file
from resnorm_jax.runs import workdir as workdir_lib
from resnorm_jax.train import io_faults, loop, run_log
from resnorm_jax.train.trainer import Trainer
from resnorm_jax.train.writers import MetricWriter


class _Rows:
  """A MetricWriter stand-in that keeps the rows."""

  def __init__(self):
    self.rows = []

  def write(self, step, row):
    self.rows.append((step, row))

  def flush(self):
    pass


def _log(resumed=None, interval=()):
  config = smoke.get_config()
  return run_log.RunLog(config, lambda n: 1e-3, _Rows(), resumed or {}, list(interval))


def _metrics(loss):
  return {"loss": loss, "grad_norm": 1.0}


def test_a_diverged_run_keeps_its_last_finite_train_loss():
  """log_every=5: steps 1-3 finite, step 4 NaN. final_train_loss was null."""
  log = _log()
  assert all(log.record_step(n, _metrics(loss)) for n, loss in ((1, 3.0), (2, 2.0), (3, 1.0)))
  assert not log.record_step(4, _metrics(float("nan")))
  assert log.results()["final_train_loss"] == 2.0  # the mean of the finite steps since a row


class _Pending:
  """A state whose step is still running on the device for `seconds`."""

  def __init__(self, seconds):
    self.done = time.time() + seconds

  def block_until_ready(self):
    time.sleep(max(0.0, self.done - time.time()))
    return self


def test_an_eval_does_not_count_its_step_as_eval_time():
  """The step's compute finished inside the eval's pause: eval rows showed 15x the speed."""
  log = _log()
  t = smoke.get_config().train
  trainer = Trainer.__new__(Trainer)
  trainer.config, trainer.log, trainer.n_final_eval = smoke.get_config(), log, t.eval_batches
  trainer.eval_batches = [None] * t.eval_batches
  trainer.eval_fn = lambda state, batch: float(state.block_until_ready() is not None)
  log.t_last = time.time()
  trainer.evaluate_at(_Pending(0.3), n=1)
  # The 0.3 s of the step stay in the interval's training time; the eval's own time is out.
  assert time.time() - log.t_last >= 0.3


def test_wall_and_compile_seconds_add_up_over_the_segments_of_a_resumed_run():
  log = _log(resumed={"wall_seconds": 100.0, "compile_seconds": 7.0})
  log.wall_start, log.compile_seconds = time.time() - 5.0, 2.0
  totals = log.totals()
  assert totals["compile_seconds"] == 9.0
  assert 105.0 <= totals["wall_seconds"] < 110.0
  assert _log().totals()["compile_seconds"] == 0.0  # a first segment: its own


def test_checkpoint_blocking_seconds_add_up_over_the_segments_of_a_resumed_run():
  """summary.json counted the last segment's saves only (8 s of a run's 42 s)."""
  saves = [1.5]
  config = smoke.get_config()
  resumed = {"checkpoint_blocking_seconds": 40.0}
  log = run_log.RunLog(config, lambda n: 1e-3, _Rows(), resumed, [], saves)
  saves.append(0.5)  # the checkpointer's own list, read as it grows
  assert log.totals()["checkpoint_blocking_seconds"] == 42.0
  assert _log().totals()["checkpoint_blocking_seconds"] == 0.0


@pytest.mark.slow  # trains twice (in this process)
def test_an_extended_run_s_summary_counts_every_segment_s_checkpoint_blocking(
  tmp_path, monkeypatch
):
  """The first segment's saves are made to block 1 s more (a real sleep, so the run's wall
  time holds it as a slow disk's would); the extended run's summary keeps them (the
  checkpoint of step 10 and summary.json's last save), not the second's alone."""
  from resnorm_jax.train import checkpoint as ckpt_lib

  save = ckpt_lib.Checkpointer.save

  def slow_save(self, *args, **kwargs):
    saved = save(self, *args, **kwargs)
    time.sleep(1.0)
    self.save_seconds[-1] += 1.0
    return saved

  config = smoke.get_config()
  config.train.steps = 10
  monkeypatch.setattr(ckpt_lib.Checkpointer, "save", slow_save)
  first = loop.run(config, str(tmp_path))["checkpoint_blocking_seconds"]
  monkeypatch.undo()
  assert first >= 1.0
  config.train.steps = 20
  second = loop.run(config, str(tmp_path))
  assert second["steps"] == 20 and second["checkpoint_blocking_seconds"] > first


def test_unreadable_metrics_lines_are_found_and_a_failed_run_is_cut_in_place(tmp_path):
  path = tmp_path / "metrics.jsonl"
  rows = [json.dumps({"step": s, "train/loss": 1.0}) for s in (5, 10, 15, 20)]
  path.write_text("\n".join([rows[0], '{"step": 1', rows[1], "\x00\x00", *rows[2:], '{"st']))
  assert metrics_file.unreadable_rows(str(path)) == [5, 10]  # the torn last line is a redone step
  os.chmod(path, 0o644)
  metrics_file.cut_metrics(str(path), 12)
  assert path.read_text() == "\n".join([rows[0], '{"step": 1', rows[1]]) + "\n"
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_metrics_jsonl_keeps_its_mode_when_a_resume_truncates_it(tmp_path):
  first = MetricWriter(str(tmp_path))
  first.write(5, {"train/loss": 1.0})
  first.write(10, {"train/loss": 0.5})
  first.close()
  path = tmp_path / "metrics.jsonl"
  os.chmod(path, 0o644)  # readable by a TensorBoard server or a colleague
  resumed = MetricWriter(str(tmp_path), truncate_after=5)
  resumed.close()
  assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [5]
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o644  # a temporary file's 0600 before


def test_a_resume_whose_metrics_jsonl_is_gone_says_so(tmp_path, capsys):
  first = MetricWriter(str(tmp_path))
  first.write(5, {"train/loss": 1.0})
  first.close()
  os.remove(tmp_path / "metrics.jsonl")
  MetricWriter(str(tmp_path), truncate_after=5).close()
  out = capsys.readouterr().out
  assert "metrics.jsonl is missing: the logged rows of steps 1-5 are lost" in out, out
  MetricWriter(str(tmp_path / "fresh"), truncate_after=0).close()  # a fresh start: no rows yet
  assert "missing" not in capsys.readouterr().out


@pytest.mark.slow  # trains
@pytest.mark.long  # a run, then its folder read only
def test_a_completed_run_on_a_read_only_folder_has_nothing_to_do(tmp_path, monkeypatch, capsys):
  config = smoke.get_config()
  config.train.steps = 4
  workdir = str(tmp_path / "run")
  summary = loop.run(config, workdir)
  files = {n: (tmp_path / "run" / n).read_text() for n in ("config.json", "summary.json")}

  def read_only(path):
    raise workdir_lib.not_writable(path, OSError(errno.EROFS, "Read-only file system"))

  monkeypatch.setattr(workdir_lib, "make_writable", read_only)
  capsys.readouterr()
  assert loop.run(config, workdir) == summary
  assert "already completed at step 4: nothing to do (read only)" in capsys.readouterr().out
  assert {n: (tmp_path / "run" / n).read_text() for n in files} == files
  with pytest.raises(workdir_lib.NotWritable, match="Read-only file system"):
    loop.run(config, str(tmp_path / "new"))  # nothing completed there: bad input, exit 2


@pytest.mark.parametrize("text", ["Infinity", "NaN", "-3.0", '"10s"'])
def test_a_finished_run_s_hand_edited_time_is_refused_naming_the_key(tmp_path, text):
  """summary.json's wall_seconds=Infinity ended a rerun of the completed run in an
  OverflowError traceback (the end line's duration); now one line naming the file and key."""
  path = tmp_path / "summary.json"
  for status in ("completed", "stopped_early"):
    body = f'{{"status": "{status}", "steps": 4, "wall_seconds": {text}, "stop_step": 4}}'
    path.write_text(body)
    with pytest.raises(ValueError, match=r"summary.json: wall_seconds=.* is not a number >= 0"):
      if status == "completed":
        workdir_lib.completed_summary(str(tmp_path), 4, has_checkpoint=True)
      else:
        config = smoke.get_config()
        config.train.stop_when = "configs/stop_rules/x.json"
        from resnorm_jax.train import stop_rule

        stop_rule.stopped_run(config, str(tmp_path))
  path.write_text('{"status": "completed", "steps": 4, "wall_seconds": 12.5}')
  assert workdir_lib.completed_summary(str(tmp_path), 4, has_checkpoint=True)["steps"] == 4


def test_a_signal_while_the_program_starts_stops_it_in_one_line(capsys):
  """A Ctrl-C while JAX imports is recorded, not raised (a traceback, or lost in a callback):
  the entry point stops before writing anything (exit 130), or the run's StopSignals takes it
  over and stops at the first step it can save."""
  import signal

  from resnorm_jax.train import preemption, startup_signals

  old = {sig: signal.getsignal(sig) for sig in startup_signals.SIGNALS}
  try:
    startup_signals.hold()
    startup_signals.stop_if_received()  # nothing yet: goes on
    os.kill(os.getpid(), signal.SIGINT)
    assert startup_signals.received() == signal.SIGINT
    with preemption.StopSignals() as signals:
      assert signals.should_stop(0)  # handed over to the run
    with pytest.raises(SystemExit) as e:
      startup_signals.stop_if_received()
    assert e.value.code == startup_signals.EXIT_INTERRUPTED == 130
    err = capsys.readouterr().err
    assert err == "signal 2 before the run started: stopped, nothing written\n"
  finally:
    startup_signals._received.clear()
    for sig, handler in old.items():
      signal.signal(sig, handler)


@pytest.mark.slow  # trains twice (in this process)
def test_a_metrics_write_error_fails_the_run_in_one_line_and_it_resumes(
  tmp_path, monkeypatch, capsys
):
  """A full disk met by metrics.jsonl (file.write names no file) at the row of step 15: a
  traceback and exit status 1 before; now status failed, one line naming the file, the
  curve cut back to checkpoint 10, and the same config resumes from there."""
  config = smoke.get_config()  # 20 steps, rows every 5, checkpoints at 10 and 20
  fill_disk_at_metrics_row(monkeypatch, 15)
  summary = loop.run(config, str(tmp_path))
  out = capsys.readouterr().out
  assert summary["status"] == "failed" and summary["steps"] == 10
  assert summary["failed_at_step"] in (15, 16)
  (line,) = [ln for ln in out.splitlines() if ln.startswith("error: ")]
  assert f"No space left on device (writing {tmp_path / 'metrics.jsonl'})" in line
  assert "MB free of" in line and "resumes from step 10" in line
  assert json.load(open(tmp_path / "summary.json"))["status"] == "failed"
  rows = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert rows == [5, 10]
  monkeypatch.undo()
  resumed = loop.run(config, str(tmp_path))
  assert "resuming from step 10" in capsys.readouterr().out
  assert resumed["status"] == "completed" and resumed["steps"] == 20
  rows = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert rows == [5, 10, 15, 20]


def _full_disk_for(name):
  """cli.write_json that fails with ENOSPC for files called `name` (a full disk there)."""
  write_json = cli.write_json

  def write(path, obj, *args, **kwargs):
    if os.path.basename(path) == name:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return write_json(path, obj, *args, **kwargs)

  return write


@pytest.mark.slow  # trains twice (in this process)
def test_a_summary_the_full_disk_refused_is_never_named_as_written(tmp_path, monkeypatch, capsys):
  """The end line named summary.json after the disk refused it (the run's fault said,
  then `summary: <path>` of a file that was never written); and a disk that fills at the
  summary itself ended in a traceback. Now the end line says it could not be written, and
  the second is one RunFailed line naming the file, the status and how to write it."""
  config = smoke.get_config()  # 20 steps, rows every 5, checkpoints at 10 and 20
  write = MetricWriter.write
  fill_disk_at_metrics_row(monkeypatch, 15)
  monkeypatch.setattr(cli, "write_json", _full_disk_for("summary.json"))
  summary = loop.run(config, str(tmp_path / "a"))
  out = capsys.readouterr().out
  assert summary["status"] == "failed" and not (tmp_path / "a" / "summary.json").exists()
  assert f"summary: {tmp_path / 'a' / 'summary.json'} could not be written" in out
  monkeypatch.setattr(MetricWriter, "write", write)  # the disk fills at the summary only
  with pytest.raises(io_faults.RunFailed) as e:
    loop.run(config, str(tmp_path / "b"))
  where = tmp_path / "b" / "summary.json"
  assert str(e.value).startswith(
    f"writing summary.json failed: No space left on device (writing {where})"
  )
  assert "the run ended completed at step 20 without it" in str(e.value)
  monkeypatch.undo()  # space freed: the same command writes it
  assert loop.run(config, str(tmp_path / "b"))["status"] == "completed"
  assert json.load(open(tmp_path / "b" / "summary.json"))["steps"] == 20


@pytest.mark.slow  # trains (in this process)
def test_a_tensorboard_write_error_is_one_line_and_recorded_in_the_summary(
  tmp_path, monkeypatch, capsys
):
  """The event file's disk fills (/dev/full: every flush fails with ENOSPC) while
  metrics.jsonl's has room: TensorBoard's writer thread died without a word before. Now one
  warning line names the error and the file, the run completes on metrics.jsonl, and
  summary.json records the error; the HParams session is written all the same."""
  from tensorboardX import record_writer

  if not os.path.exists("/dev/full"):
    pytest.skip("needs /dev/full (Linux)")
  monkeypatch.setattr(record_writer, "open_file", lambda path: open("/dev/full", "wb"))
  summary = loop.run(smoke.get_config(), str(tmp_path))
  out = capsys.readouterr().out
  assert summary["status"] == "completed" and summary["steps"] == 20
  error = summary["tensorboard_error"]
  assert error.startswith("No space left on device [ENOSPC] (writing ")
  assert f"{tmp_path}/events.out.tfevents." in error
  (line,) = [ln for ln in out.splitlines() if "TensorBoard" in ln]
  assert line.startswith(f"WARNING: TensorBoard events stopped: {error}")
  assert json.load(open(tmp_path / "summary.json"))["tensorboard_error"] == error
  rows = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert rows == [5, 10, 15, 20]
  assert len([f for f in os.listdir(tmp_path) if f.endswith(".hparams")]) == 1
