"""Tokenize a corpus into llm.c shards + manifest.json, for data.source=tokens.

python -m experiments.prepare_data --input='corpus/*.txt' --tokenizer=train:4096 \
    --out=$HOME/data/corpus_bpe4096
python -m experiments.prepare_data --input=stdlib --tokenizer=train:4096 --val_fraction=0.1 \
    --out=data/prepared/stdlib_bpe4096      (the :wide scale's corpus; resnorm_jax/data/prepare.py
                                             RECIPES lists each such folder's command)
python -m experiments.prepare_data --hf_dataset=HuggingFaceFW/fineweb-edu --hf_name=sample-10BT \
    --tokenizer=gpt2 --out=$HOME/data/fineweb_edu_10B_gpt2   (pip install -r requirements-data.txt)
python -m experiments.prepare_data --verify=DIR      (re-read every file, compare checksums; when
    all match, record the sampled sha256s a folder prepared before them lacks)

--input=stdlib: the running Python's standard-library source, the files data.source=stdlib
reads, one document each (held out here by document hash, not by path as data.source=stdlib).
--out: a new folder outside the repository (shards run to tens of GB; the repository's data/
is tracked by git), or a small CPU corpus under data/prepared/ (git-ignored). It is written
as a hidden sibling `.NAME.partial-HOST.PID` and renamed at the end: a failed run leaves
nothing in the way of the next one. It then holds:
  val_000000.bin, ...     the held-out documents (llm.c shards of --shard_tokens tokens)
  train_000000.bin, ...   the training documents
  token_counts.npz        how often each id occurs in each split
  manifest.json           tokenizer, vocabulary, tokens/documents/pieces per split, every
                          file's sha256, how the split was made, the source, a fingerprint
  tokenizer.json          gpt2, train:V and PATH only (bytes needs none: ids 0-255 are the
                          UTF-8 bytes, 256 the document separator)
Held out: each document whose hash falls below --val_fraction, up to --max_val_tokens
(resnorm_jax/data/heldout.py). --tokenizer: bytes | gpt2 | train:V | PATH/tokenizer.json
(resnorm_jax/data/tokenizer.py). Then train with --config.data.source=tokens --config.data.path=DIR
(model.vocab_size=0: from the manifest). Exit status 2 for bad input, with one line.
"""

import errno
import os
import sys

from absl import flags

from resnorm_jax.config import cli
from resnorm_jax.data import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INPUT = flags.DEFINE_string(
  "input", None, "Local text files (path or glob): one document each; `stdlib`: the stdlib corpus."
)
_HF = flags.DEFINE_string("hf_dataset", None, "Hugging Face dataset, streamed.")
_HF_NAME = flags.DEFINE_string("hf_name", "", "Its configuration, e.g. sample-10BT.")
_HF_SPLIT = flags.DEFINE_string("hf_split", "train", "Its split.")
_HF_FIELD = flags.DEFINE_string("hf_text_field", "text", "The column holding the text.")
_TOKENIZER = flags.DEFINE_string("tokenizer", None, "bytes | gpt2 | train:V | tokenizer.json")
_OUT = flags.DEFINE_string(
  "out", None, "New folder, outside the repository (e.g. $HOME/data/NAME): see above."
)
_VAL = flags.DEFINE_float(
  "val_fraction",
  prepare.VAL_FRACTION,
  "Documents held out: those whose hash falls below this fraction.",
)
_MAX_VAL = flags.DEFINE_integer(
  "max_val_tokens", prepare.MAX_VAL_TOKENS, "At most this many tokens held out (the rest trains)."
)
_SHARD = flags.DEFINE_integer("shard_tokens", 100_000_000, "Tokens per shard (llm.c: 1e8).")
_WORKERS = flags.DEFINE_integer("workers", os.cpu_count() or 1, "Tokenizing processes.")
_MAX_DOCS = flags.DEFINE_integer("max_docs", 0, "Stop after this many documents; 0: all.")
_TRAIN_DOCS = flags.DEFINE_integer(
  "tokenizer_train_docs", 0, "train:V on the training pieces of the first N documents; 0: all."
)
_VERIFY = flags.DEFINE_string("verify", None, "Check a prepared folder's checksums, then exit.")


def _inside_repository(out: str) -> bool:
  """Whether --out lies inside this repository (where git would see tens of GB of shards),
  outside data/prepared/ (git-ignored: the small CPU corpora)."""
  path = os.path.realpath(os.path.expanduser(out))
  ignored = os.path.join(ROOT, prepare.PREPARED_DIR)
  return os.path.commonpath([path, ROOT]) == ROOT and os.path.commonpath([path, ignored]) != ignored


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  from resnorm_jax.data import token_files
  from resnorm_jax.data import tokenizer as tok_lib

  try:
    if _VERIFY.value:
      bad = token_files.verify(_VERIFY.value)
      print(f"{_VERIFY.value}: " + (f"damaged: {bad}" if bad else "every checksum matches"))
      sys.exit(1 if bad else 0)
    if bool(_INPUT.value) == bool(_HF.value):
      cli.fail("give exactly one of --input=GLOB and --hf_dataset=NAME")
    if not _TOKENIZER.value or not _OUT.value:
      cli.fail("--tokenizer and --out are required")
    if _inside_repository(_OUT.value):
      print(
        f"note: --out={_OUT.value} is inside the repository ({ROOT}): its shards are large and "
        "git does not ignore them; a folder outside it is better (e.g. $HOME/data/NAME)",
        flush=True,
      )
    spec = tok_lib.parse(_TOKENIZER.value)
    if _INPUT.value == prepare.STDLIB:
      source, documents = prepare.stdlib_documents()
    elif _INPUT.value:
      source, documents = prepare.local_documents(_INPUT.value)
    else:
      source, documents = prepare.hf_documents(
        _HF.value, _HF_NAME.value, _HF_SPLIT.value, _HF_FIELD.value
      )
    manifest = prepare.prepare(
      documents, source, spec, _OUT.value, val_fraction=_VAL.value,
      max_val_tokens=_MAX_VAL.value, shard_tokens=_SHARD.value,
      workers=_WORKERS.value, max_docs=_MAX_DOCS.value, tokenizer_train_docs=_TRAIN_DOCS.value,
      command=sys.argv,
    )  # fmt: skip
  except OSError as e:
    code, message = os_error_exit(e, _OUT.value)
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)
  except (ValueError, ImportError) as e:
    cli.fail(" ".join(str(e).split()))  # one line, whatever the library's message
  s = manifest["splits"]
  print(
    f"{_OUT.value}: {manifest['tokenizer']['name']} ({manifest['tokenizer']['vocab_size']} ids); "
    f"train {s['train']['tokens']:,} tokens in {len(s['train']['shards'])} shards, val "
    f"{s['val']['tokens']:,}; fingerprint {manifest['fingerprint']}"
  )


# A write that the disk refused (full, over quota, failing): a fault at run time (exit 1, the
# same command again once there is room), not bad input.
_WRITE_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)


def os_error_exit(e: OSError, out: str) -> tuple[int, str]:
  """(exit status, one-line message) for an OSError while preparing `out`: a refused write
  names the file and the free space (1); anything else, e.g. an input that cannot be read,
  is bad input naming its path (2)."""
  from resnorm_jax.train import io_errors

  if e.errno in _WRITE_FAULTS:
    return 1, io_errors.describe_io_error(e, out, f"preparing {out}")
  where = f" ({e.filename})" if e.filename and e.filename not in str(e) else ""
  return 2, " ".join(f"{e}{where}".split())


def cli_main() -> None:
  """The console command (pyproject.toml's [project.scripts]): the same as `python -m`."""
  cli.run_app(main, __name__)


if __name__ == "__main__":
  cli_main()
