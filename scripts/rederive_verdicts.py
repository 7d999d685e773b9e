"""Re-derives the verdicts of committed results made before the held-out baseline existed.

Older runs judged `stuck` against the train split's unigram entropy with a 0.05-nat margin
on 8k eval tokens. This recomputes each verdict with the rule of resnorm_jax/runs/outcome.py
(the held-out unigram cross-entropy of the run's corpus, margin STUCK_MARGIN), from the
results.csv files and summary.json files given, all on the default stdlib corpus (the
corpus of every result committed before it), and writes one table.

python scripts/rederive_verdicts.py docs/stability_map/results.csv docs/seeds/results.csv \
    docs/xiong_warmup/results.csv docs/runs/*/summary.json --out=docs/verdict/rederived.csv
"""

import argparse
import json
import os
import types

from resnorm_jax.data import sources, unigram
from resnorm_jax.files import csv_table
from resnorm_jax.runs.outcome import STUCK_MARGIN, classify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows_of(path: str) -> list[dict]:
  """(name, summary-like dict, old verdict) rows of a results.csv or a summary.json."""
  if path.endswith(".json"):
    with open(path) as f:
      s = json.load(f)
    name = os.path.basename(os.path.dirname(path))
    return [{"name": name, "summary": s, "old": s.get("outcome", "")}]
  out = []
  for r in csv_table.read_csv(path):
    loss = float(r["final_eval_loss"]) if r["final_eval_loss"] else None
    status = {"trained": "completed", "stuck": "completed"}.get(r["status"], r["status"])
    out.append(
      {
        "name": r["name"],
        "old": r["status"],
        "summary": {
          "status": status,
          "final_eval_loss": loss,
          "unigram_entropy": float(r["unigram_entropy"] or "nan"),
        },
      }
    )
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("paths", nargs="+")
  parser.add_argument("--out", default="docs/verdict/rederived.csv")
  args = parser.parse_args()
  cfg = types.SimpleNamespace(source="stdlib", path="", val_path="", val_fraction=0.1)
  corpus = sources.load_corpus(cfg, 256, 128)
  heldout = unigram.heldout_unigram_entropy(corpus.train, corpus.val, 256)
  table = []
  for path in args.paths:
    for r in rows_of(path):
      s = {**r["summary"], "heldout_unigram_entropy": heldout}
      new = classify(s, STUCK_MARGIN)
      loss = s.get("final_eval_loss")
      table.append(
        {
          "file": os.path.relpath(path, ROOT) if os.path.isabs(path) else path,
          "name": r["name"],
          "final_eval_loss": round(loss, 4) if isinstance(loss, float) else loss,
          "old_verdict": r["old"],
          "heldout_unigram_entropy": round(heldout, 4),
          "below_baseline": round(heldout - loss, 4) if isinstance(loss, float) else "",
          "new_verdict": new,
          "changed": "yes" if r["old"] and new != r["old"] else "",
        }
      )
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  csv_table.write_csv(args.out, table, list(table[0]))
  changed = [t for t in table if t["changed"]]
  print(f"{len(table)} verdicts, {len(changed)} changed (held-out baseline {heldout:.4f}):")
  for t in changed:
    print(
      f"  {t['file']} {t['name']}: {t['final_eval_loss']} {t['old_verdict']} -> {t['new_verdict']}"
    )


if __name__ == "__main__":
  main()
