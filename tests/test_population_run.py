"""A population as one program (resnorm_jax/train/population/run.py,
experiments/train_population.py): each member is the ordinary run its single run is. A sweep's
points grouped into populations (scripts/sweep.py --vmap) are tests/test_sweep_vmap.py.

The training runs are subprocesses on one CPU device with a shared compilation cache and
unoptimized LLVM (compiles in a third of the time; both sides of every comparison use it).
"""

import functools
import os
import shlex
import shutil
import signal

import numpy as np
import population_runs
import pytest
from population_runs import STABLE
from population_runs import ok as _ok
from population_runs import python as _python
from population_runs import read_json as _json
from population_runs import write_json as _write

from configs import smoke
from resnorm_jax.runs.metrics_file import read_metrics
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import resume_policy
from resnorm_jax.train.population import points as population_points

STEPS = 12
# checkpoint_every=5 is not a multiple of log_every=2: a resume starts mid log interval.
COMMON = {
  "train.steps": STEPS,
  "train.log_every": 2,
  "train.eval_every": 4,
  "train.checkpoint_every": 5,
}
WILD = [(1e-3, 0), (1e9, 0), (1e-3, 1)]  # member 1 diverges
# Members against their single runs: every logged value (losses, norms, per-layer
# statistics) within this. The batched matmuls sum in another order, so a step's result
# differs in the last bits (float32: 6e-8 relative) and Adam's normalised updates carry the
# difference on. Measured over these 12 steps: at most 2.5e-7 relative in any logged value
# (Post-LN and Pre-LN, default and unoptimised LLVM). 2e-5 leaves two orders of magnitude for
# other kernels; here another lr or seed moves the final eval loss by 0.06 nats or more.
RTOL = ATOL = 2e-5
TIMING = ("tokens_per_second", "step_seconds")
# Runs single runs (loop.run) and populations (population_run.run) of points files.
DRIVER = """
import json, sys
from resnorm_jax.train import loop
from resnorm_jax.train.population import points as population_points, run as population_run
spec = json.load(open(sys.argv[1]))
for path in spec["singles"]:
  for config, workdir in zip(*population_points.load_points(path)):
    loop.run(config, workdir)
for path in spec["populations"]:
  population_run.run(*population_points.load_points(path))
"""
# experiments.train_population sending signal SIGNUM to itself when the batches of step AT
# are built (while step AT+1 is being prepared): a real signal at a chosen step.
HOOKED_POPULATION = """
import os
from resnorm_jax.data import batches
at, signum = (int(v) for v in os.environ["TEST_SIGNAL_AT"].split(":"))
get_batch, sent = batches.get_batch, []
def hooked(*args, **kwargs):
  if kwargs["step"] == at and not sent:  # once: every member draws the batch of step AT
    sent.append(signum)
    os.kill(os.getpid(), signum)
  return get_batch(*args, **kwargs)
batches.get_batch = hooked
from absl import app
from experiments import train_population
from resnorm_jax.config import cli
app.run(train_population.main, flags_parser=cli.parse_flags_or_exit)
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
  return population_runs.child_env(tmp_path_factory.mktemp("jax_cache"))


def _points(config: str, members, folder, **overrides) -> list[dict]:
  return [
    {
      "config": config,
      "overrides": {**COMMON, **overrides, "opt.lr": lr, "seed": seed},
      "workdir": str(folder / f"lr{lr:g}-s{seed}"),
    }
    for lr, seed in members
  ]


def _drive(env, tmp, singles, populations):
  """Runs the single runs and populations (lists of points) in one subprocess."""
  spec = {
    "singles": [_write(tmp / f"single{i}.json", p) for i, p in enumerate(singles)],
    "populations": [_write(tmp / f"pop{i}.json", p) for i, p in enumerate(populations)],
  }
  return _ok(_python(env, ["-c", DRIVER, _write(tmp / "spec.json", spec)]))


def _rows(workdir):
  """metrics.jsonl without the wall-clock fields."""
  rows = read_metrics(os.path.join(workdir, "metrics.jsonl"))
  return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _ckpt_steps(workdir):
  return sorted(int(n) for n in os.listdir(os.path.join(workdir, "ckpt")) if n.isdigit())


def _assert_close_rows(got, want, rtol=RTOL, atol=ATOL):
  """The same logged steps and keys; every value within the tolerance."""
  assert [r["step"] for r in got] == [r["step"] for r in want]
  for g, w in zip(got, want, strict=True):
    assert set(g) == set(w), (g["step"], set(g) ^ set(w))
    for key in w:
      np.testing.assert_allclose(g[key], w[key], rtol=rtol, atol=atol, err_msg=f"{key}@{g['step']}")


def _largest_relative_difference(got, want, keys=("train/loss", "eval/loss")) -> float:
  return max(
    abs(g[k] - w[k]) / abs(w[k])
    for g, w in zip(got, want, strict=True)
    for k in keys
    if k in w and np.isfinite(w[k])
  )


def _runs(env, tmp, variant: str, wild: bool):
  """Single runs of the stable members (and of the wild one), the stable population and
  (wild) the population with a diverging member, as {kind: [workdir per member]}."""
  config = f"configs/{variant}_96L.py:smoke"
  folders = {k: tmp / k for k in ("single", "stable", "wild")}
  singles = [_points(config, STABLE, folders["single"])]
  pops = [_points(config, STABLE, folders["stable"])]
  if wild:
    singles.append(_points(config, WILD[1:2], folders["single"]))
    pops.append(_points(config, WILD, folders["wild"]))
  _drive(env, tmp, singles, pops)
  out = {k: [p["workdir"] for p in _points(config, STABLE, f)] for k, f in folders.items()}
  out["wild"] = [p["workdir"] for p in _points(config, WILD, folders["wild"])]
  out["single_wild"] = _points(config, WILD[1:2], folders["single"])[0]["workdir"]
  out["config"] = config
  return out


@pytest.fixture(scope="module")
def postnorm(env, tmp_path_factory):
  return _runs(env, tmp_path_factory.mktemp("postnorm"), "postnorm", wild=True)


@pytest.fixture(scope="module")
def prenorm(env, tmp_path_factory):
  return _runs(env, tmp_path_factory.mktemp("prenorm"), "prenorm", wild=False)


# --- members are their single runs ---------------------------------------------------------


@pytest.mark.slow  # single runs and populations, in a subprocess per variant
@pytest.mark.long  # a population and its single runs in processes, per variant
@pytest.mark.parametrize("variant", ["postnorm", "prenorm"])
def test_members_write_their_single_runs_folders(variant, request):
  runs = request.getfixturevalue(variant)
  worst = 0.0
  for member, single in zip(runs["stable"], runs["single"], strict=True):
    got, want = _rows(member), _rows(single)
    _assert_close_rows(got, want)
    worst = max(worst, _largest_relative_difference(got, want))
    assert _json(member, "config.json") == _json(single, "config.json")
    summary, single_summary = _json(member, "summary.json"), _json(single, "summary.json")
    assert set(summary) - set(single_summary) == {"population_size"}
    assert set(single_summary) <= set(summary)
    assert summary["population_size"] == len(STABLE)
    for key in ("status", "steps", "outcome", "escape_step", "diverged_step", "data_split"):
      assert summary[key] == single_summary[key], key
    for key in ("final_train_loss", "final_eval_loss", "best_eval_loss"):
      assert summary[key] == pytest.approx(single_summary[key], rel=RTOL, abs=ATOL), key
    assert summary["tokens_per_second"] > 0 and summary["compile_seconds"] > 0
    assert _ckpt_steps(member) == _ckpt_steps(single) == [10, 12]
    names = sorted(os.listdir(member))
    assert any(n.endswith(".hparams") for n in names) and "metrics.jsonl" in names
  print(f"{variant}: largest relative difference of a member's loss: {worst:.2e}")
  losses = [_json(m, "summary.json")["final_eval_loss"] for m in runs["stable"]]
  assert len(set(losses)) == len(losses)  # lr alone and seed alone change the run


@pytest.mark.slow  # uses the Post-LN runs
@pytest.mark.long  # the Post-LN population and its single runs, in processes
def test_a_diverging_member_is_recorded_and_leaves_the_others_unchanged(postnorm):
  stable, wild = postnorm["stable"], postnorm["wild"]
  for i in (0, 2):  # the same population size and program: bit for bit
    assert _rows(wild[i]) == _rows(stable[i])
    assert _json(wild[i], "summary.json")["status"] == "completed"
  summary, single = _json(wild[1], "summary.json"), _json(postnorm["single_wild"], "summary.json")
  assert summary["status"] == "diverged" and summary["outcome"] == "diverged"
  assert summary["diverged_step"] == single["diverged_step"] is not None
  assert summary["steps"] == single["steps"] < STEPS
  rows = _rows(wild[1])
  assert rows[-1]["step"] == summary["diverged_step"] and not np.isfinite(rows[-1]["train/loss"])
  assert not os.path.exists(os.path.join(wild[1], "ckpt")) or all(
    s <= summary["steps"] for s in _ckpt_steps(wild[1])
  )


# --- interrupted and resumed -----------------------------------------------------------------


@pytest.mark.slow  # four training subprocesses
@pytest.mark.long  # three population runs in processes
def test_an_interrupted_population_resumes_to_the_uninterrupted_losses(env, postnorm, tmp_path):
  points = _points(postnorm["config"], STABLE, tmp_path / "run")
  points_file = _write(tmp_path / "points.json", points)
  cmd = ["-m", "experiments.train_population", f"--points={points_file}"]
  hooked = ["-c", HOOKED_POPULATION, f"--points={points_file}"]
  stopped = _ok(_python(env, hooked, TEST_SIGNAL_AT=f"7:{int(signal.SIGTERM)}"))
  assert "signal 15: saving a checkpoint" in stopped.stdout
  assert f"resume: python -m experiments.train_population --points={points_file}" in stopped.stdout
  workdirs = [p["workdir"] for p in points]
  interrupted = [_json(w, "summary.json") for w in workdirs]
  for summary, w in zip(interrupted, workdirs, strict=True):
    assert (summary["status"], summary["steps"]) == ("interrupted", 8)
    assert _ckpt_steps(w) == [5, 8]
  copies = [shutil.copytree(w, str(tmp_path / "copy" / os.path.basename(w))) for w in workdirs]

  # The same points in another order: each member's checkpoint was written by another slot.
  swapped = _write(tmp_path / "swapped.json", [points[1], points[0], points[2]])
  refused = _python(env, ["-m", "experiments.train_population", f"--points={swapped}"])
  assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
  (line,) = refused.stderr.strip().splitlines()
  assert f"member {points[1]['workdir']}: its checkpoint of step 8" in line
  assert "written by a population of 3 as member 2" in line and "member 1 of this" in line
  assert f"Continue it with: python -m experiments.train_population --points={points_file}" in line

  _ok(_python(env, cmd))  # the same command: every member from step 8, bit for bit
  for w, reference, before in zip(workdirs, postnorm["stable"], interrupted, strict=True):
    assert _rows(w) == _rows(reference)
    summary = _json(w, "summary.json")
    assert summary["status"] == "completed"
    # Wall and compile time add up over the two segments (the second compiled again).
    assert summary["wall_seconds"] > before["wall_seconds"]
    assert summary["compile_seconds"] > before["compile_seconds"] > 0
  second = [
    _json(w, "summary.json")["compile_seconds"] - b["compile_seconds"]
    for w, b in zip(workdirs, interrupted, strict=True)
  ]
  assert second == pytest.approx([second[0]] * len(second), abs=1e-6)  # one program's compile

  # Members at different steps, one completed by its single run from the population's
  # checkpoint: member 0 at step 8, member 1 back at step 5, member 2 finished by
  # experiments.train. One program of 3 slots from step 5: member 0 held until step 8,
  # member 2 held throughout; members 0 and 1 end bit for bit as never interrupted.
  shutil.rmtree(os.path.join(copies[1], "ckpt", "8"))
  lr, seed = STABLE[2]
  overrides = [f"--config.{k}={v}" for k, v in {**COMMON, "opt.lr": lr, "seed": seed}.items()]
  single = ["-m", "experiments.train", f"--config={postnorm['config']}", f"--workdir={copies[2]}"]
  out = _ok(_python(env, single + overrides)).stdout
  assert "resuming from step 8" in out
  assert "note: the checkpoint of step 8 was written by experiments.train_population" in out
  finished = _json(copies[2], "summary.json")
  switched = finished["continued_from"]
  assert switched["step"] == 8 and f"--points={points_file}" in switched["written_by"]["command"]
  assert switched["written_by"] == population_points.written_by(
    3, 2, switched["written_by"]["command"]
  )
  points_file = _write(
    tmp_path / "copies.json", _points(postnorm["config"], STABLE, tmp_path / "copy")
  )
  resumed = _ok(_python(env, ["-m", "experiments.train_population", f"--points={points_file}"]))
  out = resumed.stdout
  assert "population of 3 from step 5" in out and "population of 1" not in out, out
  assert (
    f"[{os.path.basename(copies[0])}] held in its slot until the population reaches step 8" in out
  )
  assert f"[{os.path.basename(copies[2])}] already completed at step {STEPS}" in out
  assert _json(copies[2], "summary.json") == finished  # not rewritten
  for w, reference in zip(copies[:2], postnorm["stable"][:2], strict=True):
    assert _rows(w) == _rows(reference)  # exact floats, not close
    assert _json(w, "summary.json")["status"] == "completed"
    assert _ckpt_steps(w) == [10, 12]
  _assert_close_rows(_rows(copies[2]), _rows(postnorm["stable"][2]))  # its single run's tail


@pytest.mark.slow  # a single run continued after the population refused its checkpoint
@pytest.mark.long  # runs in processes
def test_a_single_runs_checkpoint_is_refused_as_a_member_naming_its_command(
  env, postnorm, tmp_path
):
  """A member whose newest checkpoint a single run wrote would train on in another program
  (its losses off in the last bits): refused before compiling, in one line naming the
  command that continues it; once that completes it, the population holds it."""
  folder = tmp_path / "single"
  for w in postnorm["single"]:
    shutil.copytree(w, str(folder / os.path.basename(w)))
  points = _points(postnorm["config"], STABLE, folder)
  member = points[1]["workdir"]
  os.remove(os.path.join(member, "summary.json"))  # killed after its last save
  points_file = _write(tmp_path / "points.json", points)
  population = ["-m", "experiments.train_population", f"--points={points_file}"]
  refused = _python(env, population)
  assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
  (line,) = refused.stderr.strip().splitlines()
  assert line.startswith(f"error: member {member}: its checkpoint of step {STEPS}")
  assert "written by a single run (experiments.train)" in line
  command = line.split("Continue it with: ")[1].split(" (once it is completed")[0]
  assert command.startswith(f"python -m experiments.train --config={postnorm['config']}")
  assert not os.path.exists(os.path.join(member, "summary.json"))  # nothing trained
  continued = _ok(_python(env, shlex.split(command)[1:]))  # the command it names
  assert f"resuming from step {STEPS}" in continued.stdout
  assert _json(member, "summary.json")["status"] == "completed"
  done = _ok(_python(env, population)).stdout
  assert done.count(f"already completed at step {STEPS}") == len(STABLE), done


def test_a_single_run_records_the_program_whose_checkpoint_it_went_on_from():
  ours = population_points.written_by(3, 1, "python -m experiments.train_population --points=p")
  single = ckpt_lib.SINGLE_RUN["program"]
  continued = functools.partial(resume_policy.continued_from, step=8, program=single)
  assert continued({}, ours) == {"step": 8, "written_by": ours}
  assert continued({}, ckpt_lib.SINGLE_RUN) is None  # its own program's checkpoint
  assert continued({}, None) is None  # written before writers were recorded: not compared
  # Saved again by the single run, then resumed: the first switch is kept, not step 12's.
  meta = {"summary": {"continued_from": {"step": 8, "written_by": ours}}}
  assert continued(meta, ckpt_lib.SINGLE_RUN, step=12) == {"step": 8, "written_by": ours}


def test_a_checkpoint_continues_only_in_the_program_that_wrote_it():
  refusal = functools.partial(
    population_points.writer_refusal, workdir="w", step=5, single_command="S"
  )
  ours = population_points.written_by(3, 1, "python -m experiments.train_population --points=p")
  assert refusal(ours, 3, 1) is None
  assert refusal(None, 3, 1) is None  # written before writers were recorded: unknown, goes on
  for size, slot in ((2, 1), (3, 0), (4, 1)):  # another size or another slot
    line = refusal(ours, size, slot)
    assert "written by a population of 3 as member 2" in line and "\n" not in line
    assert line.endswith(
      "Continue it with: python -m experiments.train_population --points=p (once it is "
      "completed, this population holds it in its slot)"
    )
  line = refusal(ckpt_lib.SINGLE_RUN, 3, 1)
  assert "member w: its checkpoint of step 5 was written by a single run" in line
  assert "Continue it with: S " in line
  assert "with the points file that wrote it" in refusal({**ours, "command": None}, 2, 0)
  command = population_points.single_run_command(
    "c.py:smoke", {"opt.lr": 0.001, "diag.per_layer": False, "seed": 3}, "d"
  )
  assert command == (
    "python -m experiments.train --config=c.py:smoke --workdir=d --config.opt.lr=0.001 "
    "--config.diag.per_layer=false --config.seed=3"
  )


# --- bad input -----------------------------------------------------------------------------


def test_members_must_differ_only_in_lr_and_seed(tmp_path):
  a, b = smoke.get_config(), smoke.get_config()
  b.opt.lr, b.seed = 2e-3, 5
  population_points.check_members([a, b], [str(tmp_path / "a"), str(tmp_path / "b")])
  b.model.num_layers, b.name = 3, "other"
  with pytest.raises(ValueError, match="these keys differ: model.num_layers, name"):
    population_points.check_members([a, b], [str(tmp_path / "a"), str(tmp_path / "b")])
  with pytest.raises(ValueError, match="share a workdir"):
    population_points.check_members([a, a], [str(tmp_path / "a"), str(tmp_path / "a")])
  with pytest.raises(ValueError, match="one per member"):
    population_points.check_members([a], [])


@pytest.mark.slow  # starts experiments.train_population
@pytest.mark.long  # population commands in processes
def test_train_population_refuses_bad_points_with_exit_2(env, tmp_path):
  good = {"config": "configs/smoke.py", "workdir": str(tmp_path / "a")}
  cases = {
    "differ": [
      good,
      {**good, "overrides": {"train.batch_size": 4}, "workdir": str(tmp_path / "b")},
    ],
    "key": [{**good, "overrides": {"opt.lrr": 1.0}}],
    "shape": [{"config": "configs/smoke.py"}],
  }
  messages = {
    "differ": "these keys differ: train.batch_size",
    "key": "opt.lrr",
    "shape": "expected {'config', 'workdir', 'overrides'}",
  }
  for name, points in cases.items():
    path = _write(tmp_path / f"{name}.json", points)
    proc = _python(env, ["-m", "experiments.train_population", f"--points={path}"])
    assert proc.returncode == 2, (name, proc.stdout[-2000:], proc.stderr[-2000:])
    assert messages[name] in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / "a" / "ckpt")  # refused before anything ran
