"""gs:// workdirs and data folders: everything a run writes and reads itself goes through
etils.epath (resnorm_jax.data.fs), so a URL reaches the GCS filesystem unmangled (never
os.path.abspath'd into a local 'gs:/...' folder). Here fsspec's `gs` protocol is a local folder
(no network): the same code path as on GCS up to the filesystem. Local workdirs take the same
code in every training test.

Orbax writes a checkpoint's arrays through TensorStore, whose own GCS driver this stand-in
cannot serve: the whole-run test points the checkpointer at the bucket's local folder, and
checkpoints on a real bucket are checked on a cluster (README, Clusters)."""

import json
import os
import stat
import sys
import tempfile

import numpy as np
import pytest
from etils import epath
from fsspec.implementations.local import LocalFileSystem

from configs import smoke
from resnorm_jax.config import cli
from resnorm_jax.data import prepare, sources, token_files, tokens_source
from resnorm_jax.data import tokenizer as tok_lib
from resnorm_jax.data import vocab as vocab_lib
from resnorm_jax.data.token_files import DataError
from resnorm_jax.runs import metrics_file
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import hparams, tb_events, writers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeGCS(LocalFileSystem):
  """gs://BUCKET/... -> <root>/BUCKET/... (root: the current test's folder)."""

  protocol = ("gs", "gcs")
  root = ""

  def __init__(self, finalize_on_close=False, **kwargs):  # etils passes finalize_on_close
    super().__init__(**kwargs)

  @classmethod
  def _strip_protocol(cls, path):
    path = str(path).removeprefix("gs://")
    return path if path.startswith(cls.root) else os.path.join(cls.root, path.lstrip("/"))


@pytest.fixture
def fake_gcs(tmp_path, monkeypatch):
  """etils.epath asks fsspec for 'gcs': here a local folder (filesystems are cached, so one
  class whose root moves with the test)."""
  monkeypatch.setattr(FakeGCS, "root", str(tmp_path))
  registry = sys.modules["fsspec.registry"]._registry  # the writable table of fsspec.registry
  for name in ("gs", "gcs"):
    monkeypatch.setitem(registry, name, FakeGCS)
  return tmp_path


def test_loop_writes_json_to_a_gs_workdir(fake_gcs):
  workdir = "gs://bucket/runs/a"
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  cli.write_json(os.path.join(workdir, "config.json"), {"seed": 0})
  assert json.loads((fake_gcs / "bucket/runs/a/config.json").read_text()) == {"seed": 0}
  assert not (fake_gcs / "bucket/runs/a/config.json.tmp").exists()
  assert not os.path.exists("gs:")  # nothing written to a local folder named after the URL


def test_checkpoint_folder_checks_read_a_gs_folder(fake_gcs):
  assert ckpt_lib.absolute("gs://bucket/runs/a/ckpt") == "gs://bucket/runs/a/ckpt"
  assert ckpt_lib.absolute("runs/a/ckpt") == os.path.abspath("runs/a/ckpt")
  (fake_gcs / "bucket/ckpt/7.orbax-checkpoint-tmp-123").mkdir(parents=True)
  (fake_gcs / "bucket/ckpt/5").mkdir()
  assert ckpt_lib._unfinished("gs://bucket/ckpt") == ["7.orbax-checkpoint-tmp-123"]
  assert ckpt_lib._unfinished("gs://bucket/none") == []


def _prepare_bytes(out) -> dict:
  """A prepared bytes folder of a slice of Shakespeare (three documents) at `out`."""
  raw = open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb").read()[:120_000]
  docs = [raw[i : i + 40_000].decode() for i in range(0, len(raw), 40_000)]
  return prepare.prepare(
    lambda: iter(docs), {"bytes": len(raw)}, tok_lib.parse("bytes"), str(out),
    val_fraction=0.1, shard_tokens=50_000, workers=1, log=lambda s: None,
  )  # fmt: skip


def _cfg(path, val_path=""):
  return type("D", (), dict(source="tokens", path=path, val_path=val_path, val_fraction=0.1))


def test_a_gs_data_folder_is_read_through_a_checked_local_copy(fake_gcs, monkeypatch):
  manifest = _prepare_bytes(fake_gcs / "bucket/data")
  monkeypatch.setenv(tokens_source.CACHE_ENV, str(fake_gcs / "cache"))
  local = sources.load_corpus(_cfg(str(fake_gcs / "bucket/data")), 384, 32)
  remote = sources.load_corpus(_cfg("gs://bucket/data"), 384, 32)
  np.testing.assert_array_equal(np.asarray(remote.train), np.asarray(local.train))
  np.testing.assert_array_equal(np.asarray(remote.val), np.asarray(local.val))
  assert remote.split["manifest"]["folder"] == "gs://bucket/data"  # where it came from
  copy = fake_gcs / "cache" / manifest["fingerprint"]
  assert sorted(p.name for p in copy.iterdir()) == sorted(
    [e["file"] for e in token_files.listed_files(manifest)] + ["manifest.json"]
  )
  vocab = manifest["tokenizer"]["vocab_size"]
  assert vocab_lib.manifest_vocab_size(_cfg("gs://bucket/data"))[0] == vocab
  glob = sources.load_corpus(_cfg("gs://bucket/data/train_*.bin"), 384, 32)  # a glob inside it
  assert len(glob.train) == len(local.train)
  # A damaged file in the bucket is refused, not copied; a folder without a manifest is named.
  (copy / manifest["splits"]["val"]["shards"][0]["file"]).unlink()
  (fake_gcs / "bucket/data" / manifest["splits"]["val"]["shards"][0]["file"]).write_bytes(b"x")
  with pytest.raises(DataError, match="does not match the sha256"):
    sources.load_corpus(_cfg("gs://bucket/data"), 384, 32)
  assert not list(copy.glob("*.tmp"))
  (fake_gcs / "bucket/other").mkdir()
  with pytest.raises(DataError, match=r"'gs://bucket/other' has no manifest.json"):
    sources.load_corpus(_cfg("gs://bucket/other"), 384, 32)
  c = smoke.get_config()
  c.data.source, c.data.path, c.model.vocab_size = "tokens", "gs://bucket/other", 0
  with pytest.raises(DataError, match=r"data.path='gs://bucket/other' has none"):
    vocab_lib.resolve_vocab_size(c.data, 0)


def test_truncation_on_resume_keeps_the_file_mode(tmp_path):
  path = tmp_path / "metrics.jsonl"
  path.write_text("".join(json.dumps({"step": s}) + "\n" for s in (5, 10, 15)) + '{"step": 2')
  path.chmod(0o644)
  writers.MetricWriter(str(tmp_path), truncate_after=10).close()
  assert [r["step"] for r in metrics_file.read_metrics(str(path))] == [5, 10]
  assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not a temporary file's 0600
  assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("events")) == [
    "metrics.jsonl"
  ]


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
  """{tag: [(step, value)]} of the TensorBoard event files in a folder."""
  from tensorboard.backend.event_processing import event_accumulator

  acc = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0})
  acc.Reload()
  return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_a_gs_workdir_is_uploaded_at_flush_and_close_and_staged_nowhere_else(fake_gcs, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(fake_gcs))
  w = writers.MetricWriter("gs://bucket/w", sync_seconds=3600)
  metrics = fake_gcs / "bucket/w/metrics.jsonl"
  w.write(1, {"train/loss": 3.0})
  assert not metrics.exists() or metrics.read_text() == ""  # staged: uploaded at intervals
  w.flush()  # the loop flushes before each checkpoint
  assert [r["step"] for r in metrics_file.read_metrics("gs://bucket/w/metrics.jsonl")] == [1]
  assert _scalars(fake_gcs / "bucket/w")["train/loss"] == [(1, 3.0)]
  w.write(2, {"train/loss": 2.0})
  w.close()
  assert [r["step"] for r in metrics_file.read_metrics(str(metrics))] == [1, 2]
  assert sorted(p.name for p in fake_gcs.iterdir()) == ["bucket"]  # the staging folder is gone
  # A resumed segment: the bucket's file truncated to the checkpoint, then appended to.
  w = writers.MetricWriter("gs://bucket/w", truncate_after=1, sync_seconds=3600)
  assert [r["step"] for r in metrics_file.read_metrics(str(metrics))] == [1]
  w.write(2, {"train/loss": 1.5})
  w.close()
  assert [r["train/loss"] for r in metrics_file.read_metrics(str(metrics))] == [3.0, 1.5]


def _tree(folder) -> list[str]:
  return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow  # two training runs (25 steps)
@pytest.mark.long  # a whole run on a fake bucket
def test_a_whole_run_on_a_gs_workdir_writes_every_file_under_the_bucket(fake_gcs, monkeypatch):
  """Train from a gs:// data folder into a gs:// workdir, then resume it longer: config.json,
  summary.json, metrics.jsonl, the TensorBoard curves and hparams all land in the bucket,
  nothing in the working directory, and the staging folders are gone."""
  from resnorm_jax.train import loop

  _prepare_bytes(fake_gcs / "bucket/data")
  cwd, tmp = fake_gcs / "cwd", fake_gcs / "tmp"
  cwd.mkdir(), tmp.mkdir()
  monkeypatch.chdir(cwd)
  monkeypatch.setattr(tempfile, "tempdir", str(tmp))
  monkeypatch.setenv(tokens_source.CACHE_ENV, str(fake_gcs / "cache"))

  class BucketFolderCheckpointer(ckpt_lib.Checkpointer):
    """Orbax on the bucket's local folder: TensorStore's GCS driver cannot use the stand-in."""

    def __init__(self, directory, **kw):
      assert directory == "gs://bucket/runs/a/ckpt"
      super().__init__(FakeGCS._strip_protocol(directory), **kw)

  monkeypatch.setattr(ckpt_lib, "Checkpointer", BucketFolderCheckpointer)
  config = smoke.get_config()
  config.data.source, config.data.path = "tokens", "gs://bucket/data"
  config.model.vocab_size = 0
  first = loop.run(config, "gs://bucket/runs/a")
  assert first["status"] == "completed" and first["steps"] == 20
  run = fake_gcs / "bucket/runs/a"
  files = _tree(run)
  for name in ("config.json", "summary.json", "metrics.jsonl"):
    assert name in files
  events = [f for f in files if f.startswith("events.out.tfevents.")]
  assert len(events) == 2 and sum(tb_events.is_hparams_file(f) for f in events) == 1
  assert any(f.startswith("ckpt/20/") for f in files)
  assert json.loads((run / "summary.json").read_text())["data_split"]["manifest"]["folder"] == (
    "gs://bucket/data"
  )
  config.train.steps = 25  # extended: resumes at 20, the curve continues in the bucket
  second = loop.run(config, "gs://bucket/runs/a")
  assert second["status"] == "completed" and second["steps"] == 25
  steps = [r["step"] for r in metrics_file.read_metrics(str(run / "metrics.jsonl"))]
  assert steps == sorted(set(steps)) and steps[-1] == 25 and 20 in steps
  events = [f for f in _tree(run) if f.startswith("events.out.tfevents.")]
  assert len(events) == 3 and sum(tb_events.is_hparams_file(f) for f in events) == 1
  assert [s for s, _ in _scalars(run)["train/loss"]][-2:] == [20, 25]  # both segments' curves
  hp = hparams.write_run("gs://bucket/runs/a", config, second)  # replaced, not added to
  assert hp.startswith("gs://bucket/runs/a/events.out.tfevents.")
  assert sum(tb_events.is_hparams_file(f) for f in _tree(run)) == 1
  assert _tree(cwd) == [] and _tree(tmp) == []  # nothing local but the data cache
  assert not os.path.exists(os.path.join(cwd, "gs:"))


def test_a_gs_workdir_without_gcsfs_is_one_line_naming_it(monkeypatch):
  """Without gcsfs the run failed at its first write, in a 59-line traceback; now the
  workdir's check says what is missing, before anything compiles."""
  from resnorm_jax.runs import workdir as workdir_lib

  registry = sys.modules["fsspec.registry"]._registry
  for name in ("gs", "gcs"):
    monkeypatch.delitem(registry, name, raising=False)
  known = dict(sys.modules["fsspec.registry"].known_implementations)
  known["gcs"] = {"class": "no_such_gcsfs_module.GCSFileSystem", "err": "Please install gcsfs"}
  monkeypatch.setattr(sys.modules["fsspec.registry"], "known_implementations", known)
  with pytest.raises(ValueError, match=r"--workdir='gs://b': a gs:// folder needs gcsfs"):
    workdir_lib.check_workdir("gs://b")


def test_a_gs_workdir_with_a_filesystem_for_it_passes_the_check(fake_gcs):
  from resnorm_jax.runs import workdir as workdir_lib

  workdir_lib.check_workdir("gs://b/run")
