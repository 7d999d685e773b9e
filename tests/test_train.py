"""End-to-end: the train entry point, its workdir contract, bad input and divergence."""

import glob
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMED = sorted(
  os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "configs", "*_*L.py"))
)


def train(*args, timeout=300):
  """Runs experiments.train in a subprocess; returns the CompletedProcess."""
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run(
    [sys.executable, "-m", "experiments.train", *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def load_config(name: str, arg=None):
  spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", f"{name}.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.get_config(arg) if arg else mod.get_config()


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("smoke"))
  proc = train("--config=configs/smoke.py", f"--workdir={workdir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  return workdir, proc


@pytest.mark.slow  # smoke_run: a training process
def test_workdir_contract(smoke_run):
  workdir, proc = smoke_run
  for name in ("config.json", "metrics.jsonl", "summary.json"):
    assert os.path.isfile(os.path.join(workdir, name)), name
  # TensorBoard events straight in the workdir (the run is listed by its folder name), and
  # the HParams file of resnorm_jax.train.hparams beside them.
  assert glob.glob(os.path.join(workdir, "events.out.tfevents.*"))
  assert len(glob.glob(os.path.join(workdir, "events.out.tfevents.*.hparams"))) == 1
  assert not os.path.exists(os.path.join(workdir, "tb"))
  assert os.listdir(os.path.join(workdir, "ckpt"))
  config = json.load(open(os.path.join(workdir, "config.json")))
  assert config["model"]["num_layers"] == 2 and config["resolved_model"]["final_norm"] is False
  rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
  assert [r["step"] for r in rows] == [5, 10, 15, 20]
  for r in rows:
    for key in ("train/loss", "lr", "grad_norm", "step_seconds"):
      assert math.isfinite(r[key]), (key, r)
    assert r["tokens"] == r["step"] * 8 * 32  # batch 8 x 32 tokens per step
    for key in ("stream_rms", "ffn_out_grad_norm", "attn_norm_in_rms", "grad_norm_layer"):
      assert len(r[key]) == 2 and all(math.isfinite(v) for v in r[key]), (key, r)
  assert "eval/loss" in rows[1] and "eval/loss" in rows[3] and "eval/loss" not in rows[0]
  summary = json.load(open(os.path.join(workdir, "summary.json")))
  assert summary["status"] == "completed" and summary["steps"] == 20
  for key in (
    "final_train_loss",
    "final_eval_loss",
    "best_eval_loss",
    "unigram_entropy",
    "tokens_per_second",
    "compile_seconds",
    "wall_seconds",
  ):
    assert isinstance(summary[key], float) and summary[key] > 0, key
  # The end-of-run eval (1,024 tokens at smoke scale, more than the periodic 512) is its
  # own entry; eval/loss stays on the periodic set.
  assert summary["final_eval_loss"] == rows[-1]["eval/final_loss"] != rows[-1]["eval/loss"]
  assert summary["final_eval_tokens"] == 1024
  assert summary["best_eval_loss"] == min(rows[1]["eval/loss"], rows[3]["eval/loss"])
  # A byte-level model starts near ln(256) = 5.55 and learns something in 20 steps.
  assert rows[0]["train/loss"] < 6.5 and rows[-1]["train/loss"] < rows[0]["train/loss"]
  assert "step     20/20" in proc.stdout and "ETA" in proc.stdout
  # The end: rounded numbers, where the summary is, how to compare in TensorBoard.
  end = proc.stdout[proc.stdout.index("completed (") :]
  assert f"eval {summary['final_eval_loss']:.4f}" in end
  assert f"summary: {os.path.join(workdir, 'summary.json')}" in end
  assert f"compare: tensorboard --logdir {os.path.dirname(workdir)}" in end
  assert "resume:" not in end


@pytest.mark.slow  # a training process
@pytest.mark.parametrize(
  "override, needle",
  [
    ("--config.model.nrom=layernorm", "nrom"),
    ("--config.model.norm=groupnorm", "groupnorm"),
    ("--config.model.residual=highway", "highway"),
    ("--config.data.path=/no/such/file.txt", "/no/such/file.txt"),
    ("--config.model.num_heads=3", "num_heads"),
    ("--config.train.steps=abc", "abc"),
  ],
)
def test_bad_input_exits_2_with_message(override, needle, tmp_path):
  args = ["--config=configs/smoke.py", f"--workdir={tmp_path}", override]
  if "data.path" in override:
    args.append("--config.data.source=text")
  proc = train(*args)
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
  assert needle in proc.stderr
  assert "Traceback" not in proc.stderr
  assert not os.path.exists(tmp_path / "ckpt")  # refused before anything ran


@pytest.mark.slow  # a training process
def test_unknown_variant_lists_valid_values(tmp_path):
  proc = train(
    "--config=configs/smoke.py", f"--workdir={tmp_path}", "--config.model.norm_position=middle"
  )
  assert proc.returncode == 2
  assert "model.norm_position='middle'" in proc.stderr and "peri" in proc.stderr


@pytest.mark.slow  # a training process
@pytest.mark.parametrize(
  "old, new",
  [
    ("train.remat=full", "model.remat"),
    ("train.dtype=bfloat16", "model.dtype"),
    ("train.scan_unroll=2", "model.scan_unroll"),
  ],
)
def test_moved_key_is_refused_naming_the_new_key(tmp_path, old, new):
  proc = train("--config=configs/smoke.py", f"--workdir={tmp_path}", f"--config.{old}")
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
  assert f"'{old.split('=')[0]}' moved to '{new}'" in proc.stderr
  assert f"--config.{new}=" in proc.stderr and "Traceback" not in proc.stderr
  assert not os.listdir(tmp_path)  # refused before anything ran


@pytest.mark.slow  # a training process
@pytest.mark.long  # a diverging run; its checkpoint and status: test_checkpoint_resume
def test_divergence_is_a_result(tmp_path):
  proc = train(
    "--config=configs/smoke.py",
    f"--workdir={tmp_path}",
    "--config.opt.lr=1e6",
    "--config.opt.name=sgd",
    "--config.train.steps=20",
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.load(open(tmp_path / "summary.json"))
  assert summary["status"] == "diverged"
  assert summary["steps"] < 20


@pytest.mark.parametrize("name", NAMED)
def test_named_configs_resolve(name):
  """Every named experiment builds its model config at every scale."""
  from resnorm_jax.model.config_types import model_config_from

  for arg in (None, "paper", "smoke"):
    config = load_config(name, arg)
    if arg == "paper":  # its vocabulary comes from the prepared data (test_prepare_data.py)
      assert config.model.vocab_size == 0 and config.data.source == "tokens"
      config.model.vocab_size = 50304
    mcfg = model_config_from(config)
    assert mcfg.num_layers == (
      min(int(name.split("_")[-1][:-1]), 2) if arg == "smoke" else int(name.split("_")[-1][:-1])
    )
    if arg is None:
      assert config.opt.warmup_steps == 0 and config.opt.lr == 1e-3
  if name.startswith("deepnorm"):
    assert mcfg.residual == "deepnorm" and mcfg.init == "deepnorm" and not mcfg.final_norm


def test_required_configs_exist():
  required = {
    "postnorm_96L",
    "prenorm_96L",
    "deepnorm_96L",
    "postnorm_1000L",
    "deepnorm_1000L",
    "rmsnorm_prenorm_96L",
    "sandwich_96L",
    "rezero_96L",
    "layerscale_96L",
    "dyt_96L",
    "parallel_96L",
    "batchnorm_96L",
    "noresidual_96L",
    "subln_96L",
    "admin_96L",
    "mixln_96L",
    "lnscale_96L",
    "hyperconn_96L",
    "ngpt_96L",
  }
  assert required <= set(NAMED)


@pytest.mark.slow  # two training runs in process, on this suite's 8 fake devices
@pytest.mark.long  # every named config's run: test_golden_losses
@pytest.mark.parametrize("name", ["admin_96L", "hyperconn_96L"])
def test_named_config_smoke_runs(name, tmp_path):
  """A named config's wiring runs end to end at smoke scale in process (8 fake devices).

  Every named config trains at smoke scale in tests/test_golden_losses.py (one device, its
  losses value by value); here, sharded: Admin's, whose profiled omegas are recorded in
  config.json, and hyper-connections', whose stream carries an extra axis of n copies.
  """
  from resnorm_jax.train import loop

  summary = loop.run(load_config(name, "smoke"), str(tmp_path))
  assert summary["status"] == "completed" and math.isfinite(summary["final_eval_loss"])
  if name == "admin_96L":  # the profiled omegas are recorded: 1 first, then growing
    omega = json.load(open(tmp_path / "config.json"))["resolved_model"]["admin_omega"]
    flat = [w for row in omega for w in row]
    assert flat[0] == 1.0 and all(b > a for a, b in zip(flat[:-1], flat[1:], strict=True)), omega


@pytest.mark.slow  # a training process
def test_the_loop_evaluates_on_the_held_out_split(tmp_path):
  """Through the real loop: a held-out file of bytes the training split never contains.

  An honest eval loss is then far above the training loss (the model has put almost no
  probability on those bytes); an eval on the training split, or a training split that
  also holds the val file (the glob matches it), would bring the two together.
  """
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "train.txt").write_bytes(b"abcdefgh" * 4000)
  # 64 ASCII bytes (space to underscore) the training text never holds: valid UTF-8, as a
  # text corpus must be
  (corpus / "val.txt").write_bytes(bytes(range(0x20, 0x60)) * 80)
  workdir = tmp_path / "run"
  proc = train(
    "--config=configs/smoke.py",
    f"--workdir={workdir}",
    "--config.data.source=text",
    f"--config.data.path={corpus / '*.txt'}",
    f"--config.data.val_path={corpus / 'val.txt'}",
    "--config.diag.per_layer=false",
    "--config.opt.lr=0.005",
    "--config.train.final_eval_tokens=16384",
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.load(open(workdir / "summary.json"))
  assert summary["final_train_loss"] < 2.0
  assert summary["final_eval_loss"] > summary["final_train_loss"] + 3.0
  # Both splits' sizes and how they were made, in the summary and the config.
  split = {
    "method": "val_path",
    "train_tokens": 32000,
    "val_tokens": 5120,
    "train_files": 1,
    "val_files": 1,
    "excluded_from_train": 1,
  }
  assert summary["data_split"] == split
  assert json.load(open(workdir / "config.json"))["data_split"] == split
  # The no-context baseline is the held-out cross-entropy: far above the train entropy.
  assert summary["heldout_unigram_entropy"] > summary["unigram_entropy"] + 3.0
  assert summary["final_eval_tokens"] >= 16384


@pytest.mark.slow  # trains, then resumes (about 15 s)
@pytest.mark.long  # two runs
def test_an_error_after_restore_closes_the_checkpointer_and_keeps_the_run(tmp_path, monkeypatch):
  """A failure after the checkpoint is restored (here: the step's compilation) still closes
  the async checkpointer (the loop's ExitStack), and the earlier checkpoint survives it."""
  from resnorm_jax.train import checkpoint as ckpt_lib
  from resnorm_jax.train import loop, run_setup

  config = load_config("postnorm_96L", "smoke")
  first = loop.run(config, str(tmp_path))  # 6 steps, checkpointed
  assert first["status"] == "completed"
  closed = []
  close = ckpt_lib.Checkpointer.close
  monkeypatch.setattr(ckpt_lib.Checkpointer, "close", lambda self: (closed.append(1), close(self)))

  def failing_compile(self):
    raise RuntimeError("compilation failed on purpose")

  monkeypatch.setattr(run_setup.RunSetup, "compile_step", failing_compile)
  config.train.steps = 9  # a longer run resumes from step 6 and then fails to compile
  with pytest.raises(RuntimeError, match="on purpose"):
    loop.run(config, str(tmp_path))
  assert closed == [1]
  monkeypatch.undo()
  resumed = loop.run(config, str(tmp_path))  # the checkpoint is still there and good
  assert resumed["status"] == "completed" and resumed["steps"] == 9
