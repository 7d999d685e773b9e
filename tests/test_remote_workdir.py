"""gs:// workdirs: the loop's JSON files and the checkpoint folder checks go through
etils.epath, so a URL reaches the GCS filesystem unmangled (never os.path.abspath'd into a
local 'gs:/...' folder). Here fsspec's `gs` protocol is a local folder (no network): the
same code path as on GCS up to the filesystem. Local workdirs take the same code in every
training test. A real bucket is checked on a cluster (README, Scale-out)."""

import json
import os
import sys

import pytest
from etils import epath
from fsspec.implementations.local import LocalFileSystem

from resnorm_jax import checkpoint as ckpt_lib
from resnorm_jax import cli


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
