"""How much held-out text the evals score: the periodic eval's train.eval_batches batches, the
end-of-run eval's at least train.final_eval_tokens tokens, and the warning when the held-out
split is shorter than the end-of-run eval asks for (its windows then repeat)."""

from __future__ import annotations

from ml_collections import ConfigDict

from resnorm_jax.data import batches as batches_lib


def final_eval_batches(train_cfg: ConfigDict) -> int:
  """Held-out batches of the end-of-run eval: at least train.final_eval_tokens tokens (and
  never fewer than train.eval_batches), so a verdict near the plateau rests on enough text."""
  per_batch = train_cfg.batch_size * train_cfg.seq_len
  return max(train_cfg.eval_batches, -(-train_cfg.final_eval_tokens // per_batch))


def eval_tokens(train_cfg: ConfigDict) -> dict[str, int]:
  """Tokens of the periodic eval (eval/loss) and of the end-of-run eval (eval/final_loss)."""
  per_batch = train_cfg.batch_size * train_cfg.seq_len
  return {
    "periodic": train_cfg.eval_batches * per_batch,
    "final": final_eval_batches(train_cfg) * per_batch,
  }


def short_heldout(corpus, t: ConfigDict) -> dict[str, int]:
  """{final_eval_distinct_tokens: N} and a warning, once, when the held-out split has fewer
  tokens than the end-of-run eval asks for (its windows repeat); else {}."""
  asked = eval_tokens(t)["final"]
  if len(corpus.val) >= asked:
    return {}
  n = final_eval_batches(t)
  distinct = batches_lib.distinct_eval_targets(
    len(corpus.val), n, batch_size=t.batch_size, seq_len=t.seq_len
  )
  print(
    f"warning: the held-out split has {len(corpus.val):,} tokens, fewer than the {asked:,} "
    f"the end-of-run eval scores: it scores {distinct:,} distinct tokens, with repeats "
    "(hold out more: data.val_fraction, or prepare_data --val_fraction)",
    flush=True,
  )
  return {"final_eval_distinct_tokens": distinct}
