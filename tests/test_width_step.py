"""The width step (docs/width_step/): the `:wide` scale of every named config, its prepared BPE
corpus (one command, a clear refusal when it is missing), the sweep grid, and a tiny run on a
BPE folder made here."""

import glob
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from configs import base
from resnorm_jax.data import prepare, sources
from resnorm_jax.data import tokenizer as tok_lib
from resnorm_jax.data.token_files import DataError
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.sweeps import grid as sweep_grid
from resnorm_jax.train import loop, run_setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")
GRID = os.path.join(ROOT, "configs", "sweeps", "width_step.py")
# Every config built on base.experiment (the named experiments and configs/xiong_rescue.py).
NAMED = sorted(
  os.path.basename(p)[:-3]
  for p in glob.glob(os.path.join(ROOT, "configs", "*.py"))
  if "base.experiment(" in open(p).read()
)


def _config(name: str, arg: str | None = "wide"):
  spec = importlib.util.spec_from_file_location(f"_wide_{name}", f"{ROOT}/configs/{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def test_named_configs_are_found():
  assert {"postnorm_96L", "prenorm_96L", "deepnorm_96L", "xiong_rescue"} <= set(NAMED)
  assert "wide" in base.SCALES


@pytest.mark.parametrize("name", NAMED)
def test_wide_scale_shape_and_data(name):
  """d 256, 4 heads, FFN 1024, batch 32 x 256 BPE-4096 tokens of the prepared stdlib folder,
  >= 2,000 steps, remat by depth; it validates without the folder (the vocabulary is set)."""
  c = _config(name)
  m, t = c.model, c.train
  assert (m.d_model, m.num_heads, m.d_ff, m.max_seq_len) == (256, 4, 1024, 256)
  assert (t.batch_size, t.seq_len, t.steps >= 2000) == (32, 256, True)
  assert t.eval_every == 50 and t.steps % t.eval_every == 0 and t.steps % t.checkpoint_every == 0
  assert (c.data.source, c.data.path, m.vocab_size) == ("tokens", base.WIDE_DATA, 4096)
  assert m.remat == ("full" if m.num_layers > 24 else "none")
  assert c.name.endswith("-wide") and m.dtype == "float32"
  assert model_config_from(c).vocab_size == 4096
  run_setup.validate(c)  # every device-free check of a run, the folder absent or not


def test_wide_data_is_made_by_its_recipe_and_ignored_by_git():
  command = prepare.recipe_command(base.WIDE_DATA)
  assert command == (
    "python -m experiments.prepare_data --input=stdlib --tokenizer=train:4096 "
    "--val_fraction=0.1 --out=data/prepared/stdlib_bpe4096"
  )
  assert base.WIDE_DATA.startswith(prepare.PREPARED_DIR + "/")
  assert prepare.recipe_command("data/prepared/elsewhere") is None
  ignored = subprocess.run(
    ["git", "check-ignore", "-q", base.WIDE_DATA + "/manifest.json"], cwd=ROOT
  )
  assert ignored.returncode == 0


def test_stdlib_input_reads_the_stdlib_corpus_files():
  """--input=stdlib: the files data.source=stdlib reads, one document each."""
  source, documents = prepare.stdlib_documents()
  corpus = sources.load_corpus(base.get_config().data, 256, 128)
  assert f"({source['files']} files;" in corpus.description
  assert source["input"] == "stdlib" and source["bytes"] == len(corpus.train) + len(corpus.val)
  first = next(documents())
  assert isinstance(first, str) and first


def test_a_missing_folder_names_the_path_and_the_command(tmp_path):
  c = _config("postnorm_96L")
  missing = str(tmp_path / "stdlib_bpe4096")
  c.data.path = missing
  with pytest.raises(DataError) as e:
    sources.load_corpus(c.data, c.model.vocab_size, c.train.seq_len)
  assert f"data.path={missing!r} does not exist" in str(e.value)
  assert f"--input=stdlib --tokenizer=train:4096 --val_fraction=0.1 --out={missing}" in str(e.value)
  c.data.path = str(tmp_path / "other")  # no recipe of that name: what to give instead
  with pytest.raises(DataError, match="does not exist: give a folder made by"):
    sources.load_corpus(c.data, c.model.vocab_size, c.train.seq_len)


def test_a_missing_folder_is_refused_before_compiling(tmp_path, monkeypatch):
  """The run stops at its data: nothing compiled, no state made, no workdir written."""

  def never(*args, **kwargs):
    raise AssertionError("compiled before the data was checked")

  for name in ("compile_step", "compile_eval", "init_state"):
    monkeypatch.setattr(run_setup.RunSetup, name, never)
  c = _config("postnorm_96L")
  c.model.num_layers = 2
  c.data.path = str(tmp_path / "stdlib_bpe4096")
  with pytest.raises(DataError, match="make it with: python -m experiments.prepare_data"):
    loop.run(c, str(tmp_path / "run"))
  assert not (tmp_path / "run").exists()


def test_a_missing_folder_exits_2_with_the_command(tmp_path, run_script):
  missing = tmp_path / "stdlib_bpe4096"
  proc = run_script(
    [sys.executable, "-m", "experiments.train", "--config=configs/prenorm_96L.py:wide",
     f"--workdir={tmp_path / 'r'}", f"--config.data.path={missing}"],
    timeout=300,
  )  # fmt: skip
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert f"data.path='{missing}' does not exist" in proc.stderr
  assert "python -m experiments.prepare_data --input=stdlib --tokenizer=train:4096" in proc.stderr
  assert not (tmp_path / "r").exists()


def test_grid_names_unique_points_valid_and_in_priority_order():
  points = sweep_grid.load_grid(GRID)  # shapes, value types, unique plain names
  names = [p.name for p in points]
  assert len(names) == len(set(names)) == 19  # 3 variants x 2 depths x 3 lrs + the rescue
  assert names[:2] == ["postnorm-L24-const-lr0.0005-w0-s0", "prenorm-L24-const-lr0.0005-w0-s0"]
  assert names[-1] == "postnorm-L12-const-lr0.001-w1000-s0"  # its control is in the grid:
  assert "postnorm-L12-const-lr0.001-w0-s0" in names
  seen = set()
  for point in points:
    overrides, config = sweep_grid.resolve(point, {}, None)  # the device-free checks of a run
    m, t, o = config["model"], config["train"], config["opt"]
    assert point.config.endswith(":wide") and (m["d_model"], t["seq_len"]) == (256, 256)
    assert t["steps"] >= 2000 and o["schedule"] == "constant" and config["seed"] == 0
    axes = (m["norm_position"], m["residual"], m["num_layers"], o["lr"], o["warmup_steps"])
    assert f"-L{m['num_layers']}-const-lr{o['lr']:g}-w{o['warmup_steps']}-s0" in point.name
    assert m["remat"] == "none"  # 12 and 24 layers
    seen.add(axes)
  assert len(seen) == len(points)  # names differ where the runs do


def _texts(folder, n=4, size=40_000) -> str:
  raw = open(SHAKESPEARE, "rb").read()[: n * size]
  folder.mkdir()
  for i in range(n):
    (folder / f"doc{i}.txt").write_bytes(raw[i * size : (i + 1) * size])
  return str(folder / "doc*.txt")


@pytest.mark.slow
@pytest.mark.long  # prepare and train in processes
def test_prepare_a_bpe_folder_then_train_a_shrunk_wide_config(tmp_path):
  """The width step end to end, shrunk: a train:V folder of a text sample, then 3 steps of the
  :wide config (BPE tokens, vocabulary from the folder) at a toy shape."""
  source, documents = prepare.local_documents(_texts(tmp_path / "texts"))
  out = tmp_path / "prepared"
  manifest = prepare.prepare(
    documents, source, tok_lib.parse("train:300"), str(out), shard_tokens=50_000, workers=1,
    val_fraction=0.1, log=lambda s: None,
  )  # fmt: skip
  assert manifest["tokenizer"]["name"] == "train:300"
  assert manifest["held_out"]["tokenizer_trained_on"] == "train"
  c = _config("postnorm_96L")
  c.data.path, c.model.vocab_size = str(out), 0  # 0: from the folder (300 ids -> 384)
  c.model.num_layers, c.model.remat = 2, "none"
  c.model.d_model, c.model.num_heads, c.model.d_ff, c.model.max_seq_len = 32, 2, 64, 32
  c.train.batch_size, c.train.seq_len, c.train.steps = 8, 32, 3  # 8: the test devices
  c.train.eval_every = c.train.checkpoint_every = c.train.log_every = 3
  c.train.eval_batches, c.train.final_eval_tokens = 1, 256
  summary = loop.run(c, str(tmp_path / "run"))
  assert summary["status"] == "completed" and summary["steps"] == 3
  config = json.loads((tmp_path / "run" / "config.json").read_text())
  assert config["resolved_model"]["vocab_size"] == 384
  assert config["data_split"]["manifest"]["tokenizer"] == "train:300"


def test_base_stays_importable_without_jax():
  code = "import sys; from configs import base; base.experiment('x', 12, 'wide'); "
  code += "assert 'jax' not in sys.modules, 'jax imported'"
  proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
