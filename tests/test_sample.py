"""experiments.sample and resnorm_jax.probes.generate: a run's config rebuilt from config.json, its
tokenizer, a read-only restore of a sharded checkpoint onto one device, the fixed-window
sampler against a direct forward pass, and the command end to end on a tiny trained run."""

import json
import os
import shutil
import sys

import jax
import numpy as np
import pytest

from resnorm_jax.probes import generate
from resnorm_jax.train import run_setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = os.path.join(ROOT, "docs", "deepnet_panel", "runs", "prenorm-L96-invsqrt-w200")


def _smoke_config(**model):
  from configs import smoke

  c = smoke.get_config()
  c.model.update(model)
  return c


def test_run_config_from_a_committed_config_json():
  config, recorded = generate.run_config(COMMITTED)
  assert config.model.num_layers == 96 and config.model.norm_position == "pre"
  assert config.opt.lr == recorded["opt"]["lr"] and config.train.seq_len == 128
  assert config.mesh.data == -1 and config.mesh.fsdp == 1  # one device, whatever was used
  assert isinstance(config.mesh.rules[0][1], tuple)  # JSON lists back as the schema's tuples
  assert generate.run_tokenizer(config).name == "bytes"  # the stdlib corpus: raw bytes


def test_no_config_or_no_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(ValueError, match="not a run folder"):
    generate.run_config(str(tmp_path))
  shutil.copy(os.path.join(COMMITTED, "config.json"), tmp_path / "config.json")
  config, _ = generate.run_config(str(tmp_path))
  config.model.num_layers = 2
  run = run_setup.build(config, jax.devices()[:1])
  with pytest.raises(ValueError, match="has no checkpoint"):
    generate.restore(str(tmp_path), run)


def test_bytes_tokenizer_round_trip_with_the_separator():
  tok = generate.RunTokenizer("bytes", 256, 256)
  ids = tok.encode("é x")
  assert ids[0] == 256 and ids[1:] == list("é x".encode())
  assert tok.decode(ids + [104, 105]) == "<|endoftext|>é xhi"
  assert generate.bytes_tokenizer().encode("ab") == [97, 98]  # text/stdlib: no separator
  assert tok.decode([0xC3]) == "\ufffd"  # half a character: replaced, not an error


def test_the_shown_text_has_no_literal_document_start_and_a_stuck_run_says_so(tmp_path):
  tok = generate.RunTokenizer("bytes", 256, 256)
  prompt = tok.encode("def f(")
  assert generate.shown_text(tok, prompt, [120, 256, 121]) == "def f(x<|endoftext|>y"
  assert generate.shown_text(generate.bytes_tokenizer(), [97], [98]) == "ab"
  assert generate.ended_stuck_note(str(tmp_path)) == ""  # no summary.json
  (tmp_path / "summary.json").write_text(json.dumps({"outcome": "trained", "steps": 200}))
  assert generate.ended_stuck_note(str(tmp_path)) == ""
  (tmp_path / "summary.json").write_text(json.dumps({"outcome": "stuck", "steps": 200}))
  note = generate.ended_stuck_note(str(tmp_path))
  assert note.startswith("note: this run ended stuck at step 200") and "\n" not in note


def test_bpe_tokenizer_from_a_prepared_folder(tmp_path):
  """A prepared folder's manifest names tokenizer.json: encode and decode with it."""
  from resnorm_jax.data import tokenizer as tok_lib

  texts = ["the cat sat on the mat. " * 20, "a dog ate the cat food. " * 20]
  tok = tok_lib.Tokenizer("train:300", tok_lib.train_bpe(texts, 300))
  tok.save(str(tmp_path))
  record = tok.describe()
  manifest = {"format": 1, "tokenizer": record, "splits": {}, "fingerprint": "x"}
  (tmp_path / "manifest.json").write_text(json.dumps(manifest))
  config = _smoke_config()
  config.data.source, config.data.path = "tokens", str(tmp_path)
  run_tok = generate.run_tokenizer(config)
  assert run_tok.vocab_size == tok.vocab_size and run_tok.eot == tok.eot
  ids = run_tok.encode("the cat")
  assert ids[0] == tok.eot and ids == tok.encode("the cat").tolist()
  assert run_tok.decode(ids[1:]) == "the cat"
  config.data.path = str(tmp_path / "elsewhere" / "shard_000.bin")  # no manifest there
  with pytest.raises(ValueError, match="no manifest.json"):
    generate.run_tokenizer(config)


@pytest.mark.slow  # one forward pass per sampled token (about 10 s)
def test_greedy_window_sampler_matches_a_direct_forward_pass():
  """The padded fixed window gives the logits of the unpadded context (causality), also once
  the context is longer than the window; top_k=1 at temperature 1 is greedy; the padded rows
  of the vocabulary are never picked."""
  config = _smoke_config()
  config.train.seq_len = 8
  config.model.vocab_size = 384  # a table padded past the tokenizer's 257 ids
  run = run_setup.build(config, jax.devices()[:1])
  state = run.init_state()
  tok = generate.RunTokenizer("bytes", 257, 256)
  sampler = generate.Sampler(run, state, tok)
  prompt = tok.encode("abc")
  greedy, _ = sampler.sample(prompt, 9, temperature=0.0, top_k=0, seed=0)
  ids = list(prompt)
  for _ in range(9):  # the reference: the model over the unpadded last <= 8 tokens
    context = np.asarray([ids[-8:]], np.int32)
    logits, _, _ = run.model_def.apply(state.params, state.model_state, context, train=False)
    logits = np.array(logits[0, -1], np.float32)
    logits[257:] = -np.inf
    ids.append(int(np.argmax(logits)))
  assert greedy == ids[len(prompt) :]
  top1, _ = sampler.sample(prompt, 9, temperature=1.0, top_k=1, seed=3)
  assert top1 == greedy
  sampled, _ = sampler.sample(prompt, 30, temperature=5.0, top_k=0, seed=1)
  assert max(sampled) < 257 and len(set(sampled)) > 3  # hot sampling, no padded id
  with pytest.raises(ValueError, match="temperature"):
    sampler.sample(prompt, 1, temperature=-1.0, top_k=0, seed=0)


@pytest.mark.slow  # compiles the smoke model on 8 and on 1 devices
def test_a_sharded_checkpoint_restores_onto_one_device(tmp_path):
  """A state saved sharded over 8 (fake) devices with the run's checkpointer reads back
  onto one device unchanged; nothing in ckpt/ is moved or added."""
  from resnorm_jax.train import checkpoint as ckpt_lib
  from resnorm_jax.train import resume_policy

  config = _smoke_config()
  config.mesh.fsdp, config.mesh.data = -1, 1  # parameters sharded over all 8 devices
  sharded = run_setup.build(config)
  assert len(sharded.mesh.devices.flat) == 8
  state = sharded.init_state()
  c = ckpt_lib.Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  c.save(state, resume_policy.run_meta(config.to_dict(), [], {}), force=True)
  c.close()
  shutil.copy(os.path.join(COMMITTED, "config.json"), tmp_path / "config.json")
  (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
  before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
  one, _ = generate.run_config(str(tmp_path))
  single = run_setup.build(one, jax.devices()[:1])
  restored, step = generate.restore(str(tmp_path), single)
  assert step == 0
  for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(restored.params), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert len(b.sharding.device_set) == 1
  assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


@pytest.mark.long  # a run and the sample command in processes
def test_sample_command_on_a_tiny_trained_run(tmp_path, run_script):
  """Train 3 steps, then sample: greedy text is the same twice and starts with the prompt;
  bad input exits 2 with one line."""
  workdir = str(tmp_path / "run")
  proc = run_script(
    [sys.executable, "-m", "experiments.train", "--config=configs/smoke.py", f"--workdir={workdir}"]
    + ["--config.train.steps=3", "--config.train.checkpoint_every=3"],
    timeout=600,  # a loaded 2-core machine: the compile alone took 100 s once
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.load(open(os.path.join(workdir, "summary.json")))
  assert summary["periodic_eval_loss"] == summary["best_eval_loss"]  # one periodic eval
  assert summary["periodic_eval_tokens"] == 2 * 8 * 32 < summary["final_eval_tokens"]
  cmd = [sys.executable, "-m", "experiments.sample", f"--workdir={workdir}", "--prompt=def f(x):"]
  greedy = cmd + ["--tokens=12", "--temperature=0"]
  first, second = run_script(greedy, timeout=600), run_script(greedy, timeout=600)
  assert first.returncode == 0, first.stderr[-2000:]
  assert first.stdout == second.stdout and first.stdout.startswith("def f(x):")
  assert len(first.stdout.encode()) >= len("def f(x):") + 1
  assert "step 3 of" in first.stderr and "tokens/s" in first.stderr
  assert "no KV cache" in first.stderr
  hot = run_script(cmd + ["--tokens=12", "--temperature=1.5", "--top_k=0", "--seed=1"])
  assert hot.returncode == 0 and hot.stdout.startswith("def f(x):")
  bad = run_script(cmd + ["--temperature=-0.5"])
  assert bad.returncode == 2 and "--temperature=-0.5" in bad.stderr
  assert "Traceback" not in bad.stderr
  empty = tmp_path / "empty"
  empty.mkdir()
  shutil.copy(os.path.join(workdir, "config.json"), empty / "config.json")
  none = run_script([sys.executable, "-m", "experiments.sample", f"--workdir={empty}"])
  assert none.returncode == 2 and "has no checkpoint" in none.stderr
  assert "Traceback" not in none.stderr
