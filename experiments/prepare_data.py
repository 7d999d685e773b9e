"""Tokenize a corpus into llm.c shards + manifest.json, for data.source=tokens.

python -m experiments.prepare_data --input='corpus/*.txt' --tokenizer=train:4096 --out=DIR
python -m experiments.prepare_data --hf_dataset=HuggingFaceFW/fineweb-edu --hf_name=sample-10BT \
    --tokenizer=gpt2 --out=data/fineweb_edu_10B      (needs `pip install -r requirements-data.txt`)
python -m experiments.prepare_data --verify=DIR      (re-read every file, compare checksums)

--tokenizer: bytes | gpt2 | train:V | PATH/tokenizer.json (resnorm_jax/tokenizer.py). Then
train with --config.data.source=tokens --config.data.path=DIR (model.vocab_size=0: from the
manifest). Exit status 2 for bad input.
"""

import os
import sys

from absl import app, flags

from resnorm_jax import cli

_INPUT = flags.DEFINE_string("input", None, "Local text files (path or glob): one document each.")
_HF = flags.DEFINE_string("hf_dataset", None, "Hugging Face dataset, streamed.")
_HF_NAME = flags.DEFINE_string("hf_name", "", "Its configuration, e.g. sample-10BT.")
_HF_SPLIT = flags.DEFINE_string("hf_split", "train", "Its split.")
_HF_FIELD = flags.DEFINE_string("hf_text_field", "text", "The column holding the text.")
_TOKENIZER = flags.DEFINE_string("tokenizer", None, "bytes | gpt2 | train:V | tokenizer.json")
_OUT = flags.DEFINE_string("out", None, "New folder for the shards and manifest.json.")
_VAL = flags.DEFINE_float(
  "val_fraction", 0.005, "Documents held out: those whose hash falls below this fraction."
)
_MAX_VAL = flags.DEFINE_integer(
  "max_val_tokens", 100_000_000, "At most this many tokens held out (the rest trains)."
)
_SHARD = flags.DEFINE_integer("shard_tokens", 100_000_000, "Tokens per shard (llm.c: 1e8).")
_WORKERS = flags.DEFINE_integer("workers", os.cpu_count() or 1, "Tokenizing processes.")
_MAX_DOCS = flags.DEFINE_integer("max_docs", 0, "Stop after this many documents; 0: all.")
_TRAIN_DOCS = flags.DEFINE_integer("tokenizer_train_docs", 0, "train:V on the first N; 0: all.")
_VERIFY = flags.DEFINE_string("verify", None, "Check a prepared folder's checksums, then exit.")


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  from resnorm_jax import prepare, shards
  from resnorm_jax import tokenizer as tok_lib

  try:
    if _VERIFY.value:
      bad = shards.verify(_VERIFY.value)
      print(f"{_VERIFY.value}: " + (f"damaged: {bad}" if bad else "every checksum matches"))
      sys.exit(1 if bad else 0)
    if bool(_INPUT.value) == bool(_HF.value):
      cli.fail("give exactly one of --input=GLOB and --hf_dataset=NAME")
    if not _TOKENIZER.value or not _OUT.value:
      cli.fail("--tokenizer and --out are required")
    spec = tok_lib.parse(_TOKENIZER.value)
    if _INPUT.value:
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
  except (ValueError, ImportError) as e:
    cli.fail(str(e))
  s = manifest["splits"]
  print(
    f"{_OUT.value}: {manifest['tokenizer']['name']} ({manifest['tokenizer']['vocab_size']} ids); "
    f"train {s['train']['tokens']:,} tokens in {len(s['train']['shards'])} shards, val "
    f"{s['val']['tokens']:,}; fingerprint {manifest['fingerprint']}"
  )


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags_or_exit)
