"""A population as robust as a single run: a member's seed out of range is refused before
anything is written, and a full disk fails each member in one line and the same command
resumes it."""

import json
import os

import pytest

from conftest import fill_disk_at_metrics_row

# --- 5, 6, 8. a population as robust as a single run ----------------------------------------


def _members(tmp_path, seeds=(0, 1), **extra):
  from resnorm_jax.train.population import points as population_points

  overrides = {"train.steps": 6, "train.log_every": 2, "train.eval_every": 2}
  overrides.update({"train.checkpoint_every": 2, **extra})
  configs = [
    population_points.member_config("configs/smoke.py", {**overrides, "seed": s}) for s in seeds
  ]
  return configs, [str(tmp_path / f"s{s}") for s in seeds]


@pytest.mark.parametrize("seed", [-1, 2**31, True])
def test_a_member_seed_out_of_range_is_refused_before_anything_is_written(tmp_path, seed):
  """seed >= 2^31 raised OverflowError with a traceback after writing config.json; seed -1
  trained a single run, wrote its files, then exited 2 and refused the corrected run."""
  from resnorm_jax.train import loop
  from resnorm_jax.train.population import run as population_run

  configs, workdirs = _members(tmp_path, seeds=(0, 1))
  configs[1].seed = seed
  with pytest.raises(ValueError, match=r"seed=.* must be an integer in \[0, 2147483647\]"):
    population_run.run(configs, workdirs)
  with pytest.raises(ValueError, match=r"must be an integer in \[0, 2147483647\]"):
    loop.run(configs[1], str(tmp_path / "single"))
  assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.slow  # trains a population
@pytest.mark.long  # population runs in processes
def test_a_full_disk_fails_a_population_in_one_line_per_member_and_it_resumes(
  tmp_path, monkeypatch, capsys
):
  """A population on a full disk ended in a 289-line traceback, exit 1, and no member got a
  summary.json; a single run says it in one line and resumes."""
  import errno
  import time

  from orbax.checkpoint._src.handlers import json_checkpoint_handler as jch

  from resnorm_jax.train.population import run as population_run

  save_fn = jch.JsonCheckpointHandler._save_fn

  slow = [1.5]  # the full disk's first write takes 1.5 s: the first segment lasts > 1 s

  async def full_from_step_4(self, x, directory):
    step = directory.parent.name.split(".")[0]
    if step.isdigit() and int(step) >= 4:
      time.sleep(slow.pop() if slow else 0.0)
      raise OSError(errno.ENOSPC, "No space left on device", str(directory / "metadata"))
    return await save_fn(self, x, directory)

  monkeypatch.setattr(jch.JsonCheckpointHandler, "_save_fn", full_from_step_4)
  configs, workdirs = _members(tmp_path)
  summaries = population_run.run(configs, workdirs)  # no exception
  out = capsys.readouterr().out
  for workdir, summary in zip(workdirs, summaries, strict=True):
    assert (summary["status"], summary["steps"]) == ("failed", 2), summary
    assert json.load(open(os.path.join(workdir, "summary.json")))["status"] == "failed"
    name = os.path.basename(workdir)
    (line,) = [ln for ln in out.splitlines() if ln.startswith(f"[{name}] error: ")]
    assert "No space left on device" in line and "resumes from step 2" in line
  assert "Traceback" not in out
  monkeypatch.setattr(jch.JsonCheckpointHandler, "_save_fn", save_fn)  # space freed
  t0 = time.time()
  summaries = population_run.run(*_members(tmp_path))
  second = time.time() - t0
  assert [s["status"] for s in summaries] == ["completed", "completed"]
  # Both segments counted (the first compiled for seconds): not the last one alone.
  assert summaries[0]["wall_seconds"] > second + 1.0


@pytest.mark.slow  # trains a population
def test_a_member_stopped_by_another_member_s_full_disk_names_that_member(tmp_path, monkeypatch):
  """One program trains the population: member s0's metrics.jsonl met the full disk, and
  member s1's error line named s0's file as if it were its own (on s1's disk). Now s1's line
  says it stopped with member s0; s0's line is its own."""
  import io

  from resnorm_jax.train.population import run as population_run

  fill_disk_at_metrics_row(monkeypatch, 4)
  configs, workdirs = _members(tmp_path)
  out = io.StringIO()
  monkeypatch.setattr("sys.stdout", out)
  summaries = population_run.run(configs, workdirs)
  monkeypatch.undo()
  assert [s["status"] for s in summaries] == ["failed", "failed"]
  lines = {
    n: [ln for ln in out.getvalue().splitlines() if ln.startswith(f"[{n}] error: ")]
    for n in ("s0", "s1")
  }
  (own,) = lines["s0"]
  (other,) = lines["s1"]
  first = os.path.join(workdirs[0], "metrics.jsonl")
  assert f"(writing {first})" in own and "stopped with member" not in own
  assert other.startswith("[s1] error: stopped with member s0 (one program trains the population)")
  assert f"(writing {first})" in other and f"on the disk of {workdirs[0]};" in other
