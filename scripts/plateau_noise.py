"""How far an eval loss on the plateau can fall below the no-context baseline by chance.

For each corpus: the train split's unigram entropy, the held-out unigram cross-entropy (the
plateau: train frequencies scored on the eval split) and the loss of that exact unigram model
on many random end-of-run eval sets of --eval_tokens tokens drawn as the loop draws them
(windows of seq_len + 1 at random offsets): their spread is the eval noise a verdict margin
must exceed. Pure NumPy, seconds.

python scripts/plateau_noise.py --out=docs/verdict/plateau_noise.csv
"""

import argparse
import os
import types

import numpy as np

from resnorm_jax.data import sources, unigram
from resnorm_jax.data.batches import eval_batch
from resnorm_jax.files import csv_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CORPORA = {
  "stdlib": types.SimpleNamespace(source="stdlib", path="", val_path="", val_fraction=0.1),
  "tinyshakespeare": types.SimpleNamespace(
    source="text",
    path=os.path.join(ROOT, "data", "tinyshakespeare.txt"),
    val_path="",
    val_fraction=0.1,
  ),
}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default="docs/verdict/plateau_noise.csv")
  parser.add_argument("--eval_tokens", type=int, default=16384)
  parser.add_argument("--batch_size", type=int, default=16)
  parser.add_argument("--seq_len", type=int, default=128)
  parser.add_argument("--draws", type=int, default=200)
  args = parser.parse_args()
  rows = []
  for name, cfg in CORPORA.items():
    corpus = sources.load_corpus(cfg, 256, args.seq_len)
    counts = unigram.token_counts(corpus.train, 256) + unigram.UNIGRAM_SMOOTHING
    logp = np.log(counts / counts.sum())
    batches = -(-args.eval_tokens // (args.batch_size * args.seq_len))
    # The loop's own eval set (indices 0..batches-1), then random others.
    own = [
      eval_batch(corpus.val, index=i, batch_size=args.batch_size, seq_len=args.seq_len)[1]
      for i in range(batches)
    ]
    own_loss = float(-logp[np.concatenate(own).ravel()].mean())
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(args.draws):
      starts = rng.integers(0, len(corpus.val) - args.seq_len, batches * args.batch_size)
      ys = corpus.val[starts[:, None] + 1 + np.arange(args.seq_len)]
      losses.append(float(-logp[ys.ravel()].mean()))
    heldout = unigram.heldout_unigram_entropy(corpus.train, corpus.val, 256)
    rows.append(
      {
        "corpus": name,
        "train_tokens": len(corpus.train),
        "val_tokens": len(corpus.val),
        "unigram_entropy": round(unigram.unigram_entropy(corpus.train, 256), 4),
        "heldout_unigram_entropy": round(heldout, 4),
        "eval_tokens": batches * args.batch_size * args.seq_len,
        "unigram_model_on_loop_eval_set": round(own_loss, 4),
        "unigram_model_eval_std": round(float(np.std(losses)), 4),
        "unigram_model_eval_min": round(min(losses), 4),
        "unigram_model_eval_max": round(max(losses), 4),
      }
    )
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  csv_table.write_csv(args.out, rows, list(rows[0]))
  for r in rows:
    print(r)


if __name__ == "__main__":
  main()
