"""`data.source=tokens`: pre-tokenized shards (nanoGPT raw uint16 `.bin` and llm.c headered
shards). A folder made by `experiments.prepare_data` brings its manifest: splits, vocabulary
and token counts, so nothing is scanned at start. Several shards are read memory-mapped as one
view (token_files.ShardedTokens), never copied. A prepared folder at a URL
(`data.path=gs://...`) is copied once into a local cache, $RESNORM_DATA_CACHE (default
~/.cache/resnorm_jax/data), checked against its manifest. Every source carries a fingerprint
of the files it read (data_fingerprint.py: sizes and sha256s), which a resumed run compares
with its checkpoint's; a prepared folder's shards are compared with its manifest too, at every
start (token_files.check_shards: a large shard by its sampled sha256).
"""

import glob
import os

import numpy as np
from etils import epath

from resnorm_jax.data import data_fingerprint, fs
from resnorm_jax.data import token_files as shards_lib
from resnorm_jax.data.corpora import Corpus
from resnorm_jax.data.split import expand, held_out, split_info, train_and_val_paths
from resnorm_jax.data.token_files import DataError

CACHE_ENV = "RESNORM_DATA_CACHE"  # where a gs:// data folder is copied to
DEFAULT_CACHE = "~/.cache/resnorm_jax/data"


def _read_shard(path: str) -> np.ndarray:
  """Memory-maps one shard: llm.c (detected by its magic number) or nanoGPT raw uint16."""
  return shards_lib.read_shard(path)


def _checked_shard(path: str, vocab_size: int, vouched: dict[str, int]) -> np.ndarray:
  """One shard, memory-mapped. A shard the manifest lists (`vouched`: real path -> tokens)
  must hold as many tokens as it says; every shard's ids are checked against the vocabulary
  (a corrupt shard is bad input, not a divergence)."""
  shard = _read_shard(path)
  expected = vouched.get(os.path.realpath(path))
  if expected is not None and len(shard) != expected:
    raise DataError(f"{path!r} holds {len(shard)} tokens; its manifest says {expected}")
  shards_lib.check_token_ids(shard, vocab_size, path)
  return shard


def _read_shards(
  paths: list[str], vocab_size: int, vouched: dict | None = None, counts=None
) -> np.ndarray | shards_lib.ShardedTokens:
  """Shards checked against the vocabulary: one stays a memmap, several become one view."""
  parts = [_checked_shard(p, vocab_size, vouched or {}) for p in paths]
  if len(parts) == 1 and counts is None:
    return parts[0]
  return shards_lib.ShardedTokens(parts, counts=counts)


def prepared_folder(path: str) -> tuple[str, dict] | tuple[None, None]:
  """(folder, manifest) when data.path (local or a URL) is a prepared folder or a glob
  inside one."""
  folder = path if epath.Path(path).is_dir() else os.path.dirname(path) or "."
  if glob.has_magic(folder):
    return None, None
  manifest = shards_lib.read_manifest(folder)
  return (folder, manifest) if manifest is not None else (None, None)


def _load_prepared(
  folder: str, manifest: dict, path: str, val_path: str, vocab_size: int, source: str = ""
) -> Corpus:
  """A prepared folder: train = its train split (or the files data.path matches), held out
  = its val split (or data.val_path); never a held-out file in train. `source`: where the
  folder came from when `folder` is its local copy."""
  tok = manifest["tokenizer"]
  if tok["vocab_size"] > vocab_size:
    raise DataError(
      f"model.vocab_size={vocab_size} is smaller than {folder}'s tokenizer ({tok['name']}: "
      f"{tok['vocab_size']} ids)"
    )
  vouched = {
    os.path.realpath(os.path.join(folder, e["file"])): e["tokens"]
    for split in manifest["splits"].values()
    for e in split["shards"]
  }
  full = {s: shards_lib.split_files(folder, manifest, s) for s in ("train", "val")}
  for split, files in full.items():  # a shard the manifest lists and the folder lacks
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
      raise DataError(
        f"{missing[0]!r} is missing ({len(missing)} of the {len(files)} {split} shards "
        f"{folder}/{shards_lib.MANIFEST} lists): restore it, or prepare the folder again "
        "(python -m experiments.prepare_data)"
      )
  paths = full["train"] if os.path.isdir(path) else expand(path, "data.path")
  val_paths = expand(val_path, "data.val_path") if val_path else full["val"]
  held = {os.path.realpath(p) for p in val_paths}
  train_paths = [p for p in paths if os.path.realpath(p) not in held]
  if not train_paths:
    raise DataError(f"data.path={path!r} matches only held-out shards: nothing to train on")
  counts = _manifest_counts(folder, manifest)
  real = lambda ps: [os.path.realpath(p) for p in ps]  # noqa: E731

  def whole(ps: list[str], split: str):  # a whole split's counts apply to it, not a part
    return counts.get(split) if real(ps) == real(full[split]) else None

  ids = tok["vocab_size"]  # an id past the tokenizer's is corrupt, even below the padding
  train = _read_shards(train_paths, ids, vouched, whole(train_paths, "train"))
  val = _read_shards(val_paths, ids, vouched, whole(val_paths, "val"))
  split = split_info(
    "val_path" if val_path else "manifest",
    train,
    val,
    train_files=len(train_paths),
    val_files=len(val_paths),
    excluded_from_train=len(paths) - len(train_paths),
  )
  split["manifest"] = {
    "folder": source or os.path.abspath(folder),
    "fingerprint": manifest["fingerprint"],
    "tokenizer": tok["name"],
    "tokenizer_vocab_size": tok["vocab_size"],
  }
  description = (
    f"tokens {source or folder} ({tok['name']}, {tok['vocab_size']} ids, fingerprint "
    f"{manifest['fingerprint']}; {len(train_paths)} train shards, {len(val_paths)} held out): "
    f"train {len(train):,} tokens, val {len(val):,} tokens"
  )
  # Sampled: the manifest vouches for each file's full sha256, and a start reads none whole.
  files = data_fingerprint.files_record([*train_paths, *val_paths], root=folder, full_hash_bytes=0)
  warning = shards_lib.check_shards(folder, manifest, files, source)  # the samples read above
  fingerprint = {"manifest": manifest["fingerprint"], "files": files}
  return Corpus(train, val, description, split, fingerprint=fingerprint, warning=warning)


def _manifest_counts(folder: str, manifest: dict) -> dict[str, np.ndarray]:
  """Per-split token counts of a prepared folder (what unigram entropies need), if kept."""
  path = os.path.join(folder, shards_lib.COUNTS)
  if not manifest.get("token_counts") or not os.path.isfile(path):
    return {}
  try:
    with np.load(path) as f:
      return {k: np.asarray(f[k], dtype=np.int64) for k in f.files}
  except Exception as e:  # noqa: BLE001 - a damaged .npz: zip, pickle or array errors
    detail = " ".join(str(e).split())[:200]
    raise DataError(
      f"{path} cannot be read ({type(e).__name__}: {detail}): the file is damaged; check "
      f"the folder with python -m experiments.prepare_data --verify={folder}, or prepare it "
      "again"
    ) from None


def load_tokens(
  path: str, val_path: str, val_fraction: float, vocab_size: int, how: str = "tail"
) -> Corpus:
  """Pre-tokenized shards from a folder or glob; val from `val_path` or the tail of the
  tokens, or a prepared folder's own split (data.split does not apply: the folder's stands)."""
  path = os.path.expanduser(path) if path else path
  if fs.is_remote(path):
    return _load_remote(path, val_path, vocab_size)
  if path:
    if not glob.has_magic(path) and not os.path.exists(path):
      raise DataError(_missing_path(path))
    folder, manifest = prepared_folder(path)
    if manifest is not None:
      return _load_prepared(folder, manifest, path, val_path, vocab_size)
    if how == "hash":
      raise DataError(
        f"data.split='hash' needs documents: data.path={path!r} holds token shards without "
        "a manifest; prepare the text with experiments.prepare_data (held out by document "
        "hash) or use data.source=text"
      )
    if os.path.isdir(path):
      path = os.path.join(path, "*.bin")
  paths, val_paths, excluded = train_and_val_paths(path, val_path)
  tokens = _read_shards(paths, vocab_size)
  train, val, held, split = held_out(
    tokens,
    lambda: _read_shards(val_paths, vocab_size),
    paths,
    val_paths,
    excluded,
    val_fraction,
    "shards",
  )
  description = (
    f"tokens {path!r} ({len(paths)} shards, {tokens.dtype}; {held}): "
    f"train {len(train):,} tokens, val {len(val):,} tokens"
  )
  files = data_fingerprint.files_record([*paths, *val_paths])
  return Corpus(train, val, description, split, fingerprint={"files": files})


def _missing_path(path: str) -> str:
  """What to do about a data.path that does not exist: the command that makes it, for a
  folder of resnorm_jax/data/prepare.py's RECIPES (the :wide scale's)."""
  from resnorm_jax.data import prepare  # only for its RECIPES: no tokenizer library is imported

  where = "" if os.path.isabs(path) else f" (relative to {os.getcwd()})"
  command = prepare.recipe_command(path)
  make = (
    f"make it with: {command}"
    if command
    else "give a folder made by experiments.prepare_data or a glob of .bin shards"
  )
  return f"data.path={path!r} does not exist{where}: {make}"


def _load_remote(url: str, val_path: str, vocab_size: int) -> Corpus:
  """A prepared folder at a URL (or a glob inside one): its local copy, read as a folder."""
  folder, manifest = prepared_folder(url)
  if manifest is None:
    raise DataError(
      f"data.path={url!r} has no {shards_lib.MANIFEST}: a URL must name a folder made by "
      "experiments.prepare_data (or a glob inside one); copy other shards to a local disk"
    )
  local = shards_lib.local_copy(folder, manifest, os.environ.get(CACHE_ENV) or DEFAULT_CACHE)

  def localized(p: str, key: str) -> str:  # the same file in the local copy
    if not p.startswith(folder.rstrip("/")):
      raise DataError(f"{key}={p!r} is outside data.path's folder {folder!r}")
    return local + p[len(folder.rstrip("/")) :]

  path = localized(url, "data.path")
  val = localized(val_path, "data.val_path") if val_path else ""
  return _load_prepared(local, manifest, path, val, vocab_size, source=folder)
