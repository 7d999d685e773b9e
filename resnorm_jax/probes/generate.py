"""Text from a trained run: its config, its latest checkpoint, its tokenizer, a sampler.

Used by `python -m experiments.sample`. Everything is read from the run folder:
config.json (rebuilt onto today's defaults, so a run from before a key was added still
loads), ckpt/<step>/ (read only: nothing is moved, removed or locked, so a live run can be
sampled) and the tokenizer of its data (raw bytes for the text and stdlib sources, the
prepared folder's manifest otherwise: bytes with a separator, or its tokenizer.json).

Decoding is a full recompute: each new token runs the model over a fixed window of the
last train.seq_len tokens (one compiled shape, no KV cache), so it costs one forward pass
of a training sequence per token; experiments.sample prints the speed it got.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath
from ml_collections import ConfigDict

from resnorm_jax.config.same_experiment import RECORDED_NOT_CONFIG
from resnorm_jax.data import token_files
from resnorm_jax.data import tokenizer as tok_lib
from resnorm_jax.runs import record_files, status
from resnorm_jax.train import checkpoint as ckpt_lib
from resnorm_jax.train import checkpoint_integrity, orbax_quiet, run_setup

EOT_TEXT = tok_lib.EOT


def _tuples(value: Any) -> Any:
  return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _overlay(base: ConfigDict, recorded: dict) -> None:
  """`recorded`'s values onto `base`, key by key; keys `base` no longer has are skipped."""
  with base.unlocked():
    for key, value in recorded.items():
      if key not in base:
        continue
      if isinstance(base[key], ConfigDict) and isinstance(value, dict):
        _overlay(base[key], value)
      elif isinstance(base[key], tuple) and isinstance(value, list):
        base[key] = _tuples(value)  # JSON wrote the tuples (mesh.rules) as lists
      else:
        base[key] = value


def run_config(workdir: str) -> tuple[ConfigDict, dict]:
  """(config, config.json) of a run folder, its config on one device (the mesh of one
  device holds any checkpoint: orbax reshards on restore). ValueError without config.json."""
  from resnorm_jax.config import schema  # the defaults

  path = epath.Path(workdir, record_files.CONFIG)
  if not path.is_file():
    raise ValueError(f"{workdir} is not a run folder (no config.json)")
  recorded = json.loads(path.read_text())
  config = schema.get_config()
  _overlay(config, {k: v for k, v in recorded.items() if k not in RECORDED_NOT_CONFIG})
  vocab = recorded.get("resolved_model", {}).get("vocab_size")
  if vocab:  # a prepared folder's size was resolved from its manifest: no data needed now
    config.model.vocab_size = vocab
  config.mesh.data, config.mesh.fsdp, config.mesh.tensor = -1, 1, 1
  return config, recorded


@dataclasses.dataclass(frozen=True)
class RunTokenizer:
  """Text <-> ids the way the run's data was made; `eot`: the document separator or None."""

  name: str
  vocab_size: int  # ids the tokenizer makes (the model's table may be padded past it)
  eot: int | None
  hf: Any = None  # a `tokenizers.Tokenizer` for BPE data

  def encode(self, text: str) -> list[int]:
    """Ids of a prompt: a document start (the separator) first where the data has one."""
    if self.hf is not None:
      ids = list(self.hf.encode(text, add_special_tokens=False).ids)
    else:
      ids = list(text.encode("utf-8"))
    return ([self.eot] if self.eot is not None else []) + ids

  def decode(self, ids: list[int]) -> str:
    if self.hf is not None:
      return self.hf.decode(ids, skip_special_tokens=False)
    out, piece = [], bytearray()
    for i in ids:
      if i == self.eot:
        out.append(piece.decode("utf-8", errors="replace") + EOT_TEXT)
        piece = bytearray()
      else:
        piece.append(i)
    return "".join(out) + piece.decode("utf-8", errors="replace")


def shown_text(tokenizer: RunTokenizer, prompt_ids: list[int], new_ids: list[int]) -> str:
  """The prompt and its continuation as printed: the document separator that encode() puts
  first (the model's document start) is not shown as a literal `<|endoftext|>`."""
  if tokenizer.eot is not None and prompt_ids[:1] == [tokenizer.eot]:
    prompt_ids = prompt_ids[1:]
  return tokenizer.decode(prompt_ids) + tokenizer.decode(new_ids)


def ended_stuck_note(workdir: str) -> str:
  """One line when the sampled run's summary.json says it ended stuck (its loss on the
  no-context plateau: the text is unigram-level noise); '' otherwise or without a summary."""
  path = epath.Path(workdir, record_files.SUMMARY)
  try:
    summary = json.loads(path.read_text()) if path.is_file() else {}
  except (OSError, ValueError):
    return ""
  if not isinstance(summary, dict) or summary.get("outcome") != status.STUCK:
    return ""
  return (
    f"note: this run ended stuck at step {summary.get('steps', '?')} (its loss stayed at the "
    "no-context level): expect text with the corpus's letter frequencies, not words"
  )


def bytes_tokenizer() -> RunTokenizer:
  return RunTokenizer("bytes", 256, None)


def from_tokenizer_json(path: str, name: str = "") -> RunTokenizer:
  hf = tok_lib.hf_tokenizers().Tokenizer.from_str(epath.Path(path).read_text())
  eot = hf.token_to_id(tok_lib.EOT)
  return RunTokenizer(name or path, hf.get_vocab_size(with_added_tokens=True), eot, hf)


def run_tokenizer(config: ConfigDict) -> RunTokenizer:
  """The tokenizer of the run's data; ValueError where it cannot be found."""
  data = config.data
  if data.source in ("stdlib", "text"):
    return bytes_tokenizer()
  folder = os.path.expanduser(data.path)
  folder = folder if epath.Path(folder).is_dir() else os.path.dirname(folder) or "."
  path = epath.Path(folder, token_files.MANIFEST)
  # Only the tokenizer record is read: sampling needs none of the shards it lists.
  manifest = json.loads(path.read_text()) if path.is_file() else None
  if not isinstance(manifest, dict) or "tokenizer" not in manifest:
    raise ValueError(
      f"the run's data ({data.source}: {data.path!r}) has no manifest.json naming its "
      "tokenizer here; pass --tokenizer=PATH (a tokenizer.json) or --tokenizer=bytes"
    )
  record = manifest["tokenizer"]
  if record.get("file"):
    return from_tokenizer_json(os.path.join(folder, record["file"]), record.get("name", ""))
  return RunTokenizer(record.get("name", "bytes"), 256, record.get("eot_id"))


def restore(workdir: str, run: run_setup.RunSetup) -> tuple[Any, int]:
  """(state, step) of the newest committed checkpoint that reads back intact, read only
  (a damaged one is skipped with a warning, never moved). ValueError when there is none."""
  import orbax.checkpoint as ocp

  root = epath.Path(ckpt_lib.absolute(os.path.join(workdir, record_files.CHECKPOINTS)))
  steps = [
    s for s in ckpt_lib.saved_steps(str(root)) if (root / str(s) / ckpt_lib.COMMIT_MARKER).exists()
  ]
  if not steps:
    raise ValueError(f"{workdir} has no checkpoint (no committed step in {root})")
  abstract = run.abstract
  held = orbax_quiet.quiet_orbax_errors()  # TensorStore's error is dozens of lines: one here
  damaged: list[str] = []
  for step in reversed(steps):
    try:
      state = ocp.PyTreeCheckpointer().restore(
        root / str(step) / "state",
        args=ocp.args.PyTreeRestore(
          abstract, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract)
        ),
      )
      meta = json.loads((root / str(step) / "meta" / "metadata").read_text())
      table, saved = checkpoint_integrity.leaf_table(state), meta.get("leaves", {})
      bad = [k for k, v in saved.items() if table.get(k) != v]
      if bad:
        raise ValueError(f"{len(bad)} leaves differ from their saved fingerprint")
    except Exception as e:  # noqa: BLE001 - any read failure: try the previous one
      held.reported()
      damaged.append(f"step {step} at {root / str(step)} ({ckpt_lib.one_line(e)})")
      continue
    if damaged:  # as a training resume does, read only: nothing is moved
      print(
        f"WARNING: checkpoint {'; '.join(damaged)} is damaged: sampling step {step}, the "
        "newest intact one",
        file=sys.stderr,
        flush=True,
      )
    return state, step
  raise ValueError(f"no checkpoint of {workdir} reads back intact: {'; '.join(damaged)} damaged")


@dataclasses.dataclass
class Sampler:
  """Next tokens from a model over a fixed window (one compiled shape, full recompute)."""

  run: run_setup.RunSetup
  state: Any
  tokenizer: RunTokenizer

  def __post_init__(self):
    self.window = int(self.run.config.train.seq_len)
    table = self.run.mcfg.vocab_size
    # The model's table is padded past the tokenizer's ids: those rows are never sampled.
    self.allowed_V = jnp.arange(table) < min(self.tokenizer.vocab_size, table)
    model_def = self.run.model_def

    @jax.jit
    def next_token(params, model_state, buf_1xT, pos, key, temperature, top_k):
      logits_1xTxV, _, _ = model_def.apply(params, model_state, buf_1xT, train=False)
      logits_V = logits_1xTxV[0, pos - 1].astype(jnp.float32)  # causal: padding after pos
      logits_V = jnp.where(self.allowed_V, logits_V, -jnp.inf)
      vocab = logits_V.shape[0]
      kth = jnp.sort(logits_V)[vocab - jnp.clip(top_k, 1, vocab)]
      logits_V = jnp.where((top_k > 0) & (logits_V < kth), -jnp.inf, logits_V)
      sampled = jax.random.categorical(key, logits_V / jnp.maximum(temperature, 1e-6))
      return jnp.where(temperature > 0, sampled, jnp.argmax(logits_V))

    self._next = next_token

  def sample(
    self, prompt_ids: list[int], n: int, *, temperature: float, top_k: int, seed: int
  ) -> tuple[list[int], float]:
    """(n new ids, seconds after the first token, which includes compiling)."""
    if not prompt_ids:
      raise ValueError("the prompt is empty and the data has no document separator")
    if not (math.isfinite(temperature) and temperature >= 0):
      raise ValueError(f"temperature={temperature} must be a finite number >= 0")
    ids, out, key = list(prompt_ids), [], jax.random.key(seed)
    t0 = None
    for i in range(n):
      context = ids[-self.window :]
      buf = np.zeros((1, self.window), np.int32)
      buf[0, : len(context)] = context
      token = self._next(
        self.state.params,
        self.state.model_state,
        buf,
        np.int32(len(context)),
        jax.random.fold_in(key, i),
        np.float32(temperature),
        np.int32(top_k),
      )
      token = int(token)
      ids.append(token)
      out.append(token)
      if t0 is None:
        t0 = time.perf_counter()
    seconds = time.perf_counter() - t0 if t0 is not None else 0.0
    return out, seconds
