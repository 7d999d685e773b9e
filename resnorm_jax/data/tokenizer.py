"""Tokenizers for `experiments.prepare_data`: text documents -> token ids.

`--tokenizer` takes one of:
  bytes     UTF-8 bytes (ids 0-255) and a document separator, id 256: 257 ids (the model
            pads them to 384). Folders prepared before the separator hold 256 ids, none.
  gpt2      the GPT-2 BPE (50257 ids, <|endoftext|> = 50256) from the Hugging Face hub:
            needs internet once, when preparing
  train:V   a byte-level BPE of V ids (<|endoftext|> included) trained offline on the input's
            training documents (never the held-out ones); the same input gives the same one
  PATH      a tokenizer.json (Hugging Face `tokenizers`)
The BPE kinds use the `tokenizers` library (requirements-data.txt: without it they are refused
with that file named); nothing else imports it.
Each document starts with the end-of-text id (as llm.c does); a piece cut from a long document
(resnorm_jax.data.heldout) continues it, without one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable

import numpy as np

EOT = "<|endoftext|>"
BYTE_EOT = 256  # the bytes tokenizer's separator: the first id past the bytes
KINDS = ("bytes", "gpt2", "train:V", "PATH (a tokenizer.json)")


REQUIREMENTS = "requirements-data.txt"


def hf_tokenizers():
  """The `tokenizers` module (the BPE kinds'); ValueError naming the requirements file that
  installs it where it is missing (requirements.txt leaves it out)."""
  try:
    import tokenizers
  except ImportError:
    raise ValueError(
      "the BPE tokenizers (gpt2, train:V, a tokenizer.json) need the `tokenizers` library, "
      f"which requirements.txt leaves out: pip install -r {REQUIREMENTS}"
    ) from None
  return tokenizers


@dataclasses.dataclass(frozen=True)
class Spec:
  """What `--tokenizer` asked for: kind in (bytes, gpt2, train, file), train size, file."""

  kind: str
  vocab_size: int = 0
  path: str = ""


def parse(spec: str) -> Spec:
  """`--tokenizer` value -> Spec; ValueError naming the value and the valid kinds, or, for a
  BPE kind without the `tokenizers` library, the requirements file (before any text is read)."""
  out = _parse(spec)
  if out.kind != "bytes":
    try:
      hf_tokenizers()
    except ValueError as e:
      raise ValueError(f"--tokenizer={spec}: {e}") from None
  return out


def _parse(spec: str) -> Spec:
  if spec in ("bytes", "gpt2"):
    return Spec(spec)
  if spec.startswith("train:"):
    size = spec.partition(":")[2]
    if not size.isdigit() or not 256 < int(size) <= 2**32:
      raise ValueError(
        f"--tokenizer={spec!r}: train:V needs a vocabulary size V above 256 (the byte alphabet)"
      )
    return Spec("train", vocab_size=int(size))
  if spec.endswith(".json"):
    if not os.path.isfile(spec):
      raise ValueError(f"--tokenizer={spec!r}: no such tokenizer.json")
    return Spec("file", path=spec)
  raise ValueError(f"--tokenizer={spec!r} is not valid; valid: {', '.join(KINDS)}")


class Tokenizer:
  """encode(doc) -> uint32 ids; `json` rebuilds it in a worker process; `describe()` is what
  the manifest records."""

  def __init__(self, name: str, hf_json: str | None = None):
    self.name = name
    self.json = hf_json
    self._hf = None
    if hf_json is None:  # bytes
      self.vocab_size, self.eot = BYTE_EOT + 1, BYTE_EOT
    else:
      self._hf = hf_tokenizers().Tokenizer.from_str(hf_json)
      self.vocab_size = self._hf.get_vocab_size(with_added_tokens=True)
      self.eot = self._hf.token_to_id(EOT)

  def encode(self, text: str, starts_document: bool = True) -> np.ndarray:
    """uint32 ids, after the end-of-text id when `text` starts a document."""
    if self._hf is None:
      ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint32)
    else:
      ids = np.asarray(self._hf.encode(text, add_special_tokens=False).ids, dtype=np.uint32)
    if self.eot is None or not starts_document:
      return ids
    return np.concatenate([[np.uint32(self.eot)], ids])

  def describe(self) -> dict:
    out = {"name": self.name, "vocab_size": self.vocab_size, "eot_id": self.eot}
    if self.json is not None:
      out["file"] = "tokenizer.json"
      out["sha256"] = hashlib.sha256(self.json.encode()).hexdigest()
    return out

  def save(self, folder: str) -> None:
    """The tokenizer.json beside the shards (provenance, and to decode samples later)."""
    if self.json is not None:
      with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write(self.json)


def train_bpe(texts: Iterable[str], vocab_size: int) -> str:
  """A byte-level BPE of `vocab_size` ids (EOT the first) trained on `texts`: its JSON."""
  tokenizers = hf_tokenizers()
  decoders, models = tokenizers.decoders, tokenizers.models
  pre_tokenizers, trainers = tokenizers.pre_tokenizers, tokenizers.trainers

  tok = tokenizers.Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
    vocab_size=vocab_size,
    special_tokens=[EOT],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
  )
  tok.train_from_iterator(texts, trainer=trainer)
  return tok.to_str()


def build(spec: Spec, training_texts: Iterable[str] | None = None) -> Tokenizer:
  """The tokenizer a Spec names; `training_texts` feed train:V."""
  if spec.kind == "bytes":
    return Tokenizer("bytes")
  if spec.kind == "file":
    with open(spec.path) as f:
      return Tokenizer(f"file:{os.path.basename(spec.path)}", f.read())
  if spec.kind == "train":
    if training_texts is None:
      raise ValueError("train:V needs the input's texts")
    return Tokenizer(f"train:{spec.vocab_size}", train_bpe(training_texts, spec.vocab_size))
  hf_class = hf_tokenizers().Tokenizer  # gpt2: downloaded once from the Hugging Face hub
  try:
    hf = hf_class.from_pretrained("openai-community/gpt2")
  except Exception as e:  # noqa: BLE001 - no network, no hub: say what was needed
    raise ValueError(
      f"--tokenizer=gpt2 fetches GPT-2's tokenizer.json from the Hugging Face hub and that "
      f"failed ({type(e).__name__}: {str(e)[:200]}); on a machine without internet pass a "
      "saved tokenizer.json as --tokenizer=PATH"
    ) from None
  return Tokenizer("gpt2", hf.to_str())
