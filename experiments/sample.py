"""Text from a trained run: python -m experiments.sample --workdir=RUN [--prompt=TEXT]
    [--tokens=200] [--temperature=0.8] [--top_k=200] [--seed=0] [--tokenizer=PATH|bytes]

Loads the run's latest checkpoint (any variant and depth; saved sharded or not, it is read
onto one device), encodes the prompt with the run's own tokenizer (bytes, or the prepared
folder's BPE from its manifest), samples --tokens new tokens and prints the prompt and
continuation on stdout; where the text came from and the speed go to stderr. Temperature 0
is greedy (the same text every time); --top_k=0 samples from the whole vocabulary. Decoding
is a full recompute over a fixed window of train.seq_len tokens (no KV cache):
resnorm_jax/probes/generate.py. Bad input (no checkpoint, a bad flag value) exits with status 2.
"""

import math
import os
import sys

from absl import flags, logging

from resnorm_jax.config import cli

_WORKDIR = flags.DEFINE_string("workdir", None, "Run folder (holds config.json and ckpt/).")
_PROMPT = flags.DEFINE_string("prompt", "", "Text to continue; empty: a document start.")
_TOKENS = flags.DEFINE_integer("tokens", 200, "New tokens to sample.")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.8, "Softmax temperature; 0: greedy.")
_TOP_K = flags.DEFINE_integer("top_k", 200, "Sample among the k likeliest tokens; 0: all.")
_SEED = flags.DEFINE_integer("seed", 0, "Sampling seed.")
_TOKENIZER = flags.DEFINE_string(
  "tokenizer", None, "Override the run's tokenizer: a tokenizer.json, or 'bytes'."
)


def _check_flags() -> None:
  if not _WORKDIR.value:
    cli.fail("--workdir=RUN is required (a run folder with config.json and ckpt/)")
  if _TOKENS.value < 1:
    cli.fail(f"--tokens={_TOKENS.value} must be at least 1")
  if not (math.isfinite(_TEMPERATURE.value) and _TEMPERATURE.value >= 0):
    cli.fail(f"--temperature={_TEMPERATURE.value} must be a finite number >= 0 (0: greedy)")
  if _TOP_K.value < 0:
    cli.fail(f"--top_k={_TOP_K.value} must be >= 0 (0: the whole vocabulary)")
  try:  # argv bytes that are not UTF-8 arrive as lone surrogates (surrogateescape)
    _PROMPT.value.encode("utf-8")
  except UnicodeEncodeError as e:
    raw = os.fsencode(_PROMPT.value)
    bad = os.fsencode(_PROMPT.value[e.start : e.end])
    cli.fail(
      f"--prompt is not valid UTF-8 text (bytes {bad!r} at byte {raw.find(bad)}): refused, not "
      "guessed; give the prompt as UTF-8 (the tokenizers encode text as UTF-8)"
    )


def main(argv):
  if len(argv) > 1:
    cli.fail(f"unexpected arguments {argv[1:]}")
  _check_flags()
  logging.set_verbosity(logging.WARNING)  # orbax logs every file it reads at INFO
  import jax  # after the flags: --help and bad flags stay fast

  from resnorm_jax.probes import generate
  from resnorm_jax.train import run_setup

  workdir = _WORKDIR.value
  try:
    config, _ = generate.run_config(workdir)
    if _TOKENIZER.value == "bytes":
      tokenizer = generate.bytes_tokenizer()
    elif _TOKENIZER.value:
      tokenizer = generate.from_tokenizer_json(_TOKENIZER.value)
    else:
      tokenizer = generate.run_tokenizer(config)
    run = run_setup.build(config, jax.devices()[:1])
    state, step = generate.restore(workdir, run)
    prompt_ids = tokenizer.encode(_PROMPT.value) or tokenizer.encode("\n")
    sampler = generate.Sampler(run, state, tokenizer)
    new_ids, seconds = sampler.sample(
      prompt_ids,
      _TOKENS.value,
      temperature=_TEMPERATURE.value,
      top_k=_TOP_K.value,
      seed=_SEED.value,
    )
  except (ValueError, OSError) as e:
    cli.fail(str(e))
  text = generate.shown_text(tokenizer, prompt_ids, new_ids)
  print(text if text.endswith("\n") else text + "\n", end="", flush=True)
  note = generate.ended_stuck_note(workdir)
  if note:
    print(note, file=sys.stderr)
  rate = (len(new_ids) - 1) / seconds if seconds > 0 else float("nan")
  print(
    f"{config.name}: step {step} of {workdir}, {run.mcfg.num_layers} layers, tokenizer "
    f"{tokenizer.name}; {len(new_ids)} tokens at temperature {_TEMPERATURE.value:g}, top_k "
    f"{_TOP_K.value}; {rate:,.1f} tokens/s after the first (full recompute of a "
    f"{sampler.window}-token window per token, no KV cache)",
    file=sys.stderr,
  )


def cli_main() -> None:
  """The console command (pyproject.toml's [project.scripts]): the same as `python -m`."""
  cli.run_app(main, __name__)


if __name__ == "__main__":
  cli_main()
