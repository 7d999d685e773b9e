"""The one place with I/O: run(config, workdir) trains, evaluates, logs and checkpoints.

Order of work: validate everything (config, data, mesh) before anything compiles; restore
or initialize the sharded state; compile the step ahead of time (timed); then train,
reading the device back once per step (one step behind) and writing metrics, TensorBoard,
checkpoints and summary.json. Divergence ends the run with status "diverged" (a result,
not a crash); SIGTERM/SIGINT save at the current step and end with "interrupted" (with
several processes, at the same step on all: resnorm_jax/preemption.py).
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from etils import epath
from ml_collections import ConfigDict

from resnorm_jax import admin, cli, optim, preemption
from resnorm_jax import checkpoint as ckpt_lib
from resnorm_jax import data as data_lib
from resnorm_jax import hparams as hparams_lib
from resnorm_jax import sharding as shard_lib
from resnorm_jax import train_step as ts
from resnorm_jax.config_types import model_config_from
from resnorm_jax.outcome import classify
from resnorm_jax.writers import MetricWriter


def validate_train(config: ConfigDict) -> None:
  """Refuses impossible training settings with the key, the value and what is valid."""
  t = config.train
  for key in (
    "steps",
    "batch_size",
    "seq_len",
    "log_every",
    "eval_every",
    "eval_batches",
    "final_eval_tokens",
    "checkpoint_every",
    "keep_checkpoints",
  ):
    v = t[key]
    if not isinstance(v, int) or v < 1:
      raise ValueError(f"train.{key}={v!r} must be a positive integer")
  if config.model.position == "learned" and t.seq_len > config.model.max_seq_len:
    raise ValueError(
      f"train.seq_len={t.seq_len} exceeds model.max_seq_len="
      f"{config.model.max_seq_len} (the learned position table)"
    )


def _fmt_time(seconds: float) -> str:
  seconds = max(0, int(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def _write_json(path: str, obj: Any) -> None:
  """Writes then renames (a local folder or gs://..., through etils.epath)."""
  tmp = epath.Path(path + ".tmp")
  tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
  tmp.replace(path)


def resolved_config(config: ConfigDict, data_split: dict | None = None) -> dict:
  """The run's config plus the constants the model resolved (alpha, beta, final norm) and,
  when given, how the corpus was split (`data_split`: method and sizes of both splits)."""
  out = config.to_dict()
  mcfg = model_config_from(config)
  out["resolved_model"] = vars(mcfg).copy()
  # Admin's profiled omegas (a pure function of the seed): {} for every other residual.
  out["resolved_model"].update(admin.resolved(mcfg, lambda: ts.init_model(mcfg, config.seed)[0]))
  if data_split is not None:
    out["data_split"] = dict(data_split)
  return json.loads(json.dumps(out, default=str))


def final_eval_batches(train_cfg: ConfigDict) -> int:
  """Held-out batches of the end-of-run eval: at least train.final_eval_tokens tokens (and
  never fewer than train.eval_batches), so a verdict near the plateau rests on enough text."""
  per_batch = train_cfg.batch_size * train_cfg.seq_len
  return max(train_cfg.eval_batches, -(-train_cfg.final_eval_tokens // per_batch))


def keep_freed_host_memory() -> bool:
  """On a CPU-only Linux host, keeps freed memory mapped for reuse (glibc malloc settings).

  XLA:CPU allocates each step's temporaries afresh (42 MiB at the nanoGPT shape). glibc
  serves such blocks with mmap (a thread's arena: any above 64 MiB) and unmaps them on
  free, so every step page-faults its temporaries in again: 20,000 faults and a sixth to a
  quarter of the step there. One arena and mmap/trim thresholds of 256 MiB keep them.
  Larger blocks (a 1000-layer model's) still come from mmap: keeping those grew the peak
  RSS from 1.7 to 2.9-4.1 GiB, for faults that cost little at such step times. Skipped
  where an accelerator plugin may be used (its buffers are not malloc'd) or off glibc.
  Call it before JAX starts its thread pools; returns True if applied.
  """
  import ctypes
  import importlib.util

  platforms = jax.config.jax_platforms
  if platforms:
    cpu_only = set(platforms.lower().split(",")) == {"cpu"}
  else:
    cpu_only = not any(importlib.util.find_spec(m) for m in ("jax_plugins", "libtpu"))
  if not cpu_only:
    return False
  try:
    libc = ctypes.CDLL("libc.so.6")
  except OSError:
    return False
  m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8  # glibc malloc.h
  ok = libc.mallopt(m_arena_max, 1) == 1
  ok &= libc.mallopt(m_mmap_threshold, 256 * 2**20) == 1
  ok &= libc.mallopt(m_trim_threshold, 256 * 2**20) == 1
  return bool(ok)


def train_batch(tokens: np.ndarray, config: ConfigDict, sharding: Any, step: int):
  """Step `step`'s (inputs, targets) of this process, placed as global arrays on `sharding`.

  A pure function of (seed, step, process): a resumed or benchmarked run sees the same data.
  """
  x, y = data_lib.get_batch(
    tokens,
    seed=config.seed,
    step=step,
    batch_size=config.train.batch_size,
    seq_len=config.train.seq_len,
    process_index=jax.process_index(),
    process_count=jax.process_count(),
  )
  return shard_lib.global_batch(x, sharding), shard_lib.global_batch(y, sharding)


def default_workdir(config: ConfigDict, overrides: Mapping[str, Any] | None = None) -> str:
  """runs/<config name>-<overrides>-<timestamp> (`postnorm_96L-L12-warmup200-20261130-123614`).

  One process's clock, so single-process runs only.
  """
  label = cli.override_label(overrides or {})
  parts = [config.name, label, time.strftime("%Y%m%d-%H%M%S")]
  return os.path.join("runs", "-".join(p for p in parts if p))


def end_message(summary: Mapping[str, Any], workdir: str, argv: Sequence[str] | None) -> str:
  """The end-of-run lines: rounded results, where the summary is, how to compare or resume."""
  r = lambda x, fmt=".4f": "-" if x is None else format(x, fmt)
  baseline = summary.get("heldout_unigram_entropy", summary.get("unigram_entropy"))
  tps = summary.get("tokens_per_second")
  lines = [
    f"{summary['status']} ({summary.get('outcome', '?')}) at step {summary['steps']}: "
    f"train {r(summary.get('final_train_loss'))}, eval {r(summary.get('final_eval_loss'))} "
    f"(best {r(summary.get('best_eval_loss'))}), no-context {r(baseline, '.3f')}, "
    f"{r(tps, ',.0f')} tokens/s, {_fmt_time(summary.get('wall_seconds') or 0)}",
    f"  summary: {os.path.join(workdir, 'summary.json')}",
    f"  compare: tensorboard --logdir {os.path.dirname(os.path.normpath(workdir)) or '.'}",
  ]
  if summary["status"] == "interrupted" and argv:
    lines.append(f"  resume:  {cli.resume_command(argv, workdir)}")
  return "\n".join(lines)


def finished_summary(workdir: str, checkpoint_step: int, steps: int) -> dict | None:
  """The summary of a run already completed in `workdir` at `steps`, else None."""
  try:
    with open(os.path.join(workdir, "summary.json")) as f:
      summary = json.load(f)
  except (OSError, json.JSONDecodeError):
    return None
  done = summary.get("status") == "completed" and summary.get("steps") == steps
  return summary if done and checkpoint_step == steps else None


def run(
  config: ConfigDict,
  workdir: str | None = None,
  *,
  overrides: Mapping[str, Any] | None = None,
  argv: Sequence[str] | None = None,
) -> dict:
  """Trains `config` in `workdir` (default: default_workdir); returns the summary.

  `overrides` ({dotted key: value} given on the command line) name the default workdir;
  `argv` (the command line's arguments) is printed back as the command that resumes an
  interrupted run, with its --workdir.
  Signal handlers are installed first: a SIGTERM/SIGINT during setup or compilation stops
  the run as soon as the state exists (saved at its step), never with a traceback.
  """
  with preemption.StopSignals() as signals, preemption.exit_on_peer_failure():
    return _run(config, workdir, signals, overrides, argv)


def _run(
  config: ConfigDict,
  workdir: str | None,
  signals: preemption.StopSignals,
  overrides: Mapping[str, Any] | None = None,
  argv: Sequence[str] | None = None,
) -> dict:
  wall_start = time.time()
  keep_freed_host_memory()
  shard_lib.maybe_initialize_distributed(config.dist)
  signals.after_distributed_init()  # several processes: a stop is agreed by all
  # --- validate before anything compiles -------------------------------------------------
  mcfg = model_config_from(config)
  validate_train(config)
  t = config.train
  optimizer = optim.make_optimizer(config.opt, t.steps)
  schedule = optim.make_schedule(config.opt, t.steps)
  mesh = shard_lib.make_mesh(config.mesh)
  rows = shard_lib.batch_shards(mesh, config.mesh.rules)
  nproc, pidx = jax.process_count(), jax.process_index()
  if t.batch_size % rows or t.batch_size % nproc:
    raise ValueError(
      f"train.batch_size={t.batch_size} must be divisible by the data-parallel "
      f"size {rows} (the mesh axes of the 'batch' rule) and the {nproc} processes"
    )
  if workdir is None:
    if nproc > 1:  # each host's clock would name a different folder
      raise ValueError(f"--workdir is required with {nproc} processes: a folder every host sees")
    workdir = default_workdir(config, overrides)
  corpus = data_lib.load_corpus(config.data, mcfg.vocab_size, t.seq_len)
  is_main = pidx == 0
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  unigram = data_lib.unigram_entropy(corpus.train, mcfg.vocab_size)
  heldout_unigram = data_lib.heldout_unigram_entropy(corpus.train, corpus.val, mcfg.vocab_size)

  # --- state: restore or initialize, sharded -------------------------------------------------
  model_def = ts.make_model_def(mcfg)
  init_fn = functools.partial(ts.init_state, model_def, optimizer, config.seed)
  abstract = jax.eval_shape(init_fn)
  shardings = shard_lib.state_shardings(abstract, model_def, optimizer, mesh, config.mesh.rules)
  abstract = jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
  )
  # A changed experiment is refused (ValueError naming the keys) before anything is written.
  checkpointer = ckpt_lib.Checkpointer(os.path.join(workdir, "ckpt"), keep=t.keep_checkpoints)
  config_dict = config.to_dict()
  # A checkpoint belongs to its data: a prepared folder's manifest fingerprint is frozen too.
  config_dict["data_fingerprint"] = corpus.split.get("manifest", {}).get("fingerprint")
  try:
    restored = checkpointer.restore_latest(abstract, config_dict)
  except BaseException:
    checkpointer.close()
    raise
  prev_summary: dict = {}
  resumed_interval: list[float] = []  # losses of the log interval the checkpoint cut
  if restored is not None:
    state, ckpt_meta, start = restored
    done = finished_summary(workdir, start, t.steps)
    if done is not None:  # a rerun of a finished run: nothing to train, nothing to rewrite
      checkpointer.close()
      print(f"already completed at step {start}: nothing to do", flush=True)
      print(end_message(done, workdir, None), flush=True)
      return done
    prev_summary, resumed_interval = ckpt_lib.resumed_run(ckpt_meta)
    print(f"resuming from step {start} ({checkpointer.directory})", flush=True)
  else:
    state = jax.jit(init_fn, out_shardings=shardings)()
    start = 0
    if epath.Path(workdir, "metrics.jsonl").exists():
      print(f"no checkpoint in {checkpointer.directory}: starting from step 0", flush=True)
  if is_main:
    _write_json(os.path.join(workdir, "config.json"), resolved_config(config, corpus.split))

  # --- compile ahead of time ---------------------------------------------------------------
  bsh = shard_lib.batch_sharding(mesh, config.mesh.rules)
  per_layer = bool(config.diag.per_layer)
  step_fn = shard_lib.jit_train_step(  # explicit shardings, donated state, replicated metrics
    functools.partial(ts.train_step, model_def, optimizer, per_layer=per_layer), shardings, bsh
  )
  eval_fn = jax.jit(
    functools.partial(ts.eval_step, model_def), in_shardings=(shardings, (bsh, bsh))
  )

  batch_at = functools.partial(train_batch, corpus.train, config, bsh)

  def held_out(i: int):
    x, y = data_lib.eval_batch(
      corpus.val,
      index=i,
      batch_size=t.batch_size,
      seq_len=t.seq_len,
      process_index=pidx,
      process_count=nproc,
    )
    return shard_lib.global_batch(x, bsh), shard_lib.global_batch(y, bsh)

  # Periodic evals use the first train.eval_batches batches; the end-of-run eval adds more
  # of the same stream, up to train.final_eval_tokens tokens.
  n_final_eval = final_eval_batches(t)
  eval_batches = [held_out(i) for i in range(t.eval_batches)]

  def evaluate(st, final: bool = False) -> float:
    """Mean held-out loss; its time is kept out of the throughput figures."""
    nonlocal t_last
    t0 = time.time()
    if final:
      eval_batches.extend(held_out(i) for i in range(len(eval_batches), n_final_eval))
    batches = eval_batches if final else eval_batches[: t.eval_batches]
    # One batch in flight at a time: XLA:CPU deadlocked (an all-reduce waiting for 7 of 8
    # fake devices, then an abort) with the end-of-run eval's 64 batches dispatched at once.
    loss = float(np.mean([jax.device_get(eval_compiled(st, b)) for b in batches]))
    t_last += time.time() - t0
    return loss

  devices = shard_lib.device_info()  # platform, kind and counts: a CPU fallback shows
  compile_start = time.time()
  compiled = step_fn.lower(state, batch_at(start)).compile()
  compile_seconds = time.time() - compile_start
  eval_compiled = eval_fn.lower(state, eval_batches[0]).compile()
  print(
    f"{config.name}: {mcfg.num_layers} layers, norm={mcfg.norm} "
    f"position={mcfg.norm_position} residual={mcfg.residual} block={mcfg.block} "
    f"init={mcfg.init}; {sum(x.size for x in jax.tree.leaves(abstract.params)):,} params; "
    f"mesh {dict(mesh.shape)} on {shard_lib.describe_devices(devices)}; "
    f"attention {mcfg.attention}; compiled in {compile_seconds:.1f}s; "
    f"unigram entropy {unigram:.3f} nats (held-out {heldout_unigram:.3f}); "
    f"{corpus.description}; run folder {workdir}",
    flush=True,
  )

  # --- train ---------------------------------------------------------------------------------
  writer = MetricWriter(
    workdir,
    enabled=is_main,
    truncate_after=start,
    profile_every=t.eval_every,  # depth images redrawn at each evaluation and at the end
    no_context_loss=heldout_unigram,  # the eval loss of a model without context
  )
  best_eval = prev_summary.get("best_eval_loss")
  best_eval = math.inf if best_eval is None else best_eval
  last_eval = prev_summary.get("final_eval_loss")
  last_eval_tokens = prev_summary.get("final_eval_tokens")
  status, step, last_train = "completed", start, prev_summary.get("final_train_loss")
  interval_losses: list[float] = resumed_interval
  tokens_per_step = t.batch_size * t.seq_len
  train_time, timed_steps = 0.0, 0
  pending = None  # (step index, metrics on device) of the step dispatched last
  t_last = time.time()

  def meta() -> dict:
    """What a resumed run needs besides the state (checkpoint.run_meta's schema)."""
    summary = {
      "final_train_loss": last_train,
      "final_eval_loss": last_eval,
      "best_eval_loss": None if math.isinf(best_eval) else best_eval,
      "final_eval_tokens": last_eval_tokens,
    }
    return ckpt_lib.run_meta(config_dict, interval_losses, summary)

  evals: dict[int, float] = {}
  # eval loss by step, measured when that step's state exists; the end-of-run eval on
  # final_eval_tokens apart
  final_evals: dict[int, float] = {}

  def handle(n: int, metrics) -> bool:
    """Reads step n's metrics (n steps done); logs at intervals; False on divergence."""
    nonlocal last_train, t_last, train_time, timed_steps
    loss, gnorm = float(metrics["loss"]), float(metrics["grad_norm"])
    if not (math.isfinite(loss) and math.isfinite(gnorm)):
      print(f"step {n}: non-finite loss {loss} (grad norm {gnorm}): diverged", flush=True)
      writer.write(n, {"train/loss": loss, "grad_norm": gnorm})
      return False
    interval_losses.append(loss)
    if n % t.log_every == 0 or n in evals or n == t.steps:
      now = time.time()
      dt, k = now - t_last, len(interval_losses)
      t_last = now
      train_time, timed_steps = train_time + dt, timed_steps + k
      last_train = float(np.mean(interval_losses))
      interval_losses.clear()
      row = {
        "train/loss": last_train,
        "lr": float(schedule(n - 1)),
        "tokens_per_second": k * tokens_per_step / max(dt, 1e-9),
        "step_seconds": dt / max(k, 1),
        "tokens": n * tokens_per_step,
      }
      row.update({key: v for key, v in jax.device_get(metrics).items() if key != "loss"})
      if n in evals:
        row["eval/loss"] = evals.pop(n)
      if n in final_evals:
        row["eval/final_loss"] = final_evals.pop(n)
      t0 = time.time()
      writer.write(n, row)
      t_last += time.time() - t0  # drawing the depth images is not training time
      eta = (t.steps - n) * dt / max(k, 1)
      ev = f" | eval {row['eval/loss']:.4f}" if "eval/loss" in row else ""
      print(
        f"step {n:>6}/{t.steps} | loss {last_train:.4f}{ev} | lr {row['lr']:.2e} | "
        f"{row['tokens_per_second']:,.0f} tok/s | ETA {_fmt_time(eta)}",
        flush=True,
      )
    return True

  def save() -> None:
    """Saves the state (step n, already handled); its blocking time is kept out of tok/s."""
    nonlocal t_last
    t0 = time.time()
    checkpointer.save(state, meta(), force=True)
    t_last += time.time() - t0

  stop = t.steps
  if signals.should_stop(start):  # signalled during setup or compilation: no training
    status, stop = "interrupted", start
  for step in range(start, stop):
    state, metrics = compiled(state, batch_at(step))
    n = step + 1
    if pending is not None and not handle(*pending):  # read step n-1 while n runs
      status = "diverged"
      break
    pending = (n, metrics)
    if n % t.eval_every == 0 or n == t.steps:
      # eval/loss (the curve) and best_eval_loss always use the periodic eval set, so a run
      # extended later has the same curve as one run to the end at once; the verdict's
      # final_eval_loss adds the rest of the final_eval_tokens at the last step.
      last_eval = evals[n] = evaluate(state)
      last_eval_tokens = tokens_per_step * t.eval_batches
      best_eval = min(best_eval, last_eval)
      if n == t.steps and n_final_eval > t.eval_batches:
        last_eval = final_evals[n] = evaluate(state, final=True)
        last_eval_tokens = tokens_per_step * n_final_eval
    if signals.should_stop(n):  # every process stops at the same n
      status = "interrupted"
      break
    if n % t.checkpoint_every == 0 and n < t.steps:
      # Log step n before saving it: a checkpoint never runs ahead of metrics.jsonl, its
      # meta holds the exact interval losses, and a diverged step is never saved.
      ok, pending = handle(*pending), None
      if not ok:
        status = "diverged"
        break
      save()
  if status != "diverged" and pending is not None and not handle(*pending):
    status = "diverged"
  final_step = int(jax.device_get(state.step))
  if status != "diverged":
    save()
  checkpointer.close()
  writer.close()
  summary = {
    "status": status,
    "steps": final_step,
    "final_train_loss": last_train,
    "final_eval_loss": last_eval,
    "best_eval_loss": None if math.isinf(best_eval) else best_eval,
    "unigram_entropy": unigram,
    "heldout_unigram_entropy": heldout_unigram,
    "final_eval_tokens": last_eval_tokens,
    "data_split": corpus.split,
    "tokens_per_second": (timed_steps * tokens_per_step / train_time) if train_time else None,
    "compile_seconds": compile_seconds,
    "wall_seconds": time.time() - wall_start,
    "checkpoint_blocking_seconds": sum(checkpointer.save_seconds),
    "config_name": config.name,
    "devices": devices,
  }
  summary["outcome"] = classify(summary)  # trained | stuck | diverged | interrupted
  if is_main:
    _write_json(os.path.join(workdir, "summary.json"), summary)
    hparams_lib.write_run(workdir, config, summary)  # TensorBoard's HParams: axes, outcome
  print(end_message(summary, workdir, argv), flush=True)
  return summary
