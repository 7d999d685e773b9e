"""Speed and memory of one config's train step (scripts/benchmark.py, compare_steps.py,
profile_step.py): compile time, step time, tokens/s, MFU, memory.

Times the step the loop runs (run_setup.build: the same model, shardings and jitted step),
fed the way the loop feeds it: each step builds its batch on the host and places it, and
step n+1 is dispatched before step n's metrics are read back. Reported in one process:
  compile: lower (trace) and XLA compile seconds of the train step (loop's compile_seconds);
  loop:    seconds between successive metric reads in that pipelined loop (median, p10, p90)
           and tokens/s from the median: what a training run achieves;
  sync:    the same steps blocked one by one, with the host batch time apart (data path);
  memory:  peak host RSS (ru_maxrss, whole process, compile included), device peak bytes
           (memory_stats, GPU/TPU), XLA's ahead-of-time estimate (run_setup.aot_memory);
  flops:   per token from the shapes (formula in `flops_per_token`), achieved FLOP/s and
           MFU against the dense matmul rate measured here (a large jnp.dot in the compute
           dtype), so CPU, GPU and TPU runs all have a denominator.
If the ahead-of-time estimate exceeds the memory limit, nothing runs: the estimate is reported
(as with compile_only). The limit is max_memory_gib where given, else the device's memory
on GPU/TPU (memory_stats' bytes_limit) and CPU_MEMORY_LIMIT_GIB of host RAM on CPU.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import sys
import time

import jax
import jax.numpy as jnp

from resnorm_jax.model import variants
from resnorm_jax.model.transformer import COMPUTE_DTYPES
from resnorm_jax.train import run_setup

CPU_MEMORY_LIMIT_GIB = 16.0  # host RAM a CPU benchmark may plan for


def flops_per_token(m, seq_len: int) -> dict:
  """Training FLOPs per token counted from the shapes (multiply-add = 2 FLOPs).

  N_mm = L * (4 d^2 [q, k, v, out] + k_ffn d d_ff [k_ffn = 2, or 3 for swiglu]
              + g d^2 [gated residuals: g = 2 sequential, 1 parallel, 0 otherwise]
              + the features' matmuls [gated attention: d^2 or d H])
         + d V [the head, tied or not; the embedding lookups are gathers, no FLOPs]
  forward  = 2 N_mm + 4 L T d   [QK^T and AV: 2 T d each per token per layer; the full
                                  T x T score matrix is computed (masked), so full T]
  training = 3 x forward = 6 N_mm + 12 L T d   (backward = 2 x forward)
  Norms, softmax, activations and the optimizer update are not counted (conventional: they
  are O(d) per token against O(d^2)).
  """
  d, f, n_layers, v = m.d_model, m.d_ff, m.num_layers, m.vocab_size
  ffn = (3 if m.ffn_activation == "swiglu" else 2) * d * f
  # Matmuls of the residual modules themselves (a gated residual's W_g: d^2 per sub-layer).
  gates = (1 if m.block == "parallel" else 2) * variants.residual(m.residual).matmul_params(m)
  # And those of the features turned on (gated attention's W_g: d^2 per layer).
  gates += sum(feature.matmul_params(m) for feature in variants.features(m))
  per_layer = 4 * d * d + ffn + gates
  n_mm = n_layers * per_layer + d * v
  attn_fwd = 4 * n_layers * seq_len * d
  forward = 2 * n_mm + attn_fwd
  return {
    "matmul_params": n_mm,
    "forward": forward,
    "train": 3 * forward,
    "train_matmul_part": 6 * n_mm,
    "train_attention_part": 3 * attn_fwd,
  }


def _pct(xs: list[float], q: float) -> float:
  """The q-quantile (0..1) by linear interpolation."""
  s = sorted(xs)
  if len(s) == 1:
    return s[0]
  pos = q * (len(s) - 1)
  lo = int(math.floor(pos))
  hi = min(lo + 1, len(s) - 1)
  return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def memory_limit_bytes(device, max_memory_gib: float) -> int | None:
  """The AOT memory estimate above which the step is not run (None: no limit known).

  --max_memory_gib where > 0; else the device's own memory on GPU/TPU (memory_stats'
  bytes_limit) and CPU_MEMORY_LIMIT_GIB of host RAM on CPU.
  """
  if max_memory_gib > 0:
    return int(max_memory_gib * 2**30)
  if device.platform == "cpu":
    return int(CPU_MEMORY_LIMIT_GIB * 2**30)
  limit = device_memory_stats(device).get("bytes_limit")
  return int(limit) if limit else None


def device_memory_stats(device) -> dict:
  """The device's memory statistics; {} where it keeps none (CPU) or cannot give them."""
  try:
    return device.memory_stats() or {}
  except Exception:  # some backends raise instead of returning None
    return {}


def summarize(xs: list[float]) -> dict:
  """Median, p10, p90, min, max, mean and count of a list of timings."""
  return {
    "median": _pct(xs, 0.5),
    "p10": _pct(xs, 0.1),
    "p90": _pct(xs, 0.9),
    "min": min(xs),
    "max": max(xs),
    "mean": sum(xs) / len(xs),
    "n": len(xs),
  }


def peak_rss_bytes() -> int:
  """Peak resident set size of this process so far (Linux ru_maxrss is in KiB)."""
  r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return int(r if sys.platform == "darwin" else r * 1024)


def machine_info() -> dict:
  """nproc, CPU model and load average: timings on a shared machine need them."""
  cpu = platform.processor() or ""
  try:
    with open("/proc/cpuinfo") as f:
      cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
  except OSError:
    pass
  return {
    "nproc": os.cpu_count(),
    "cpu_model": cpu,
    "loadavg": list(os.getloadavg()),
    "python": platform.python_version(),
  }


def matmul_rate(dtype_name: str, n: int = 0, reps: int = 5) -> dict:
  """Dense matmul FLOP/s on the default device: k chained n x n products per call."""
  platform_name = jax.devices()[0].platform
  n = n or (2048 if platform_name == "cpu" else 8192)
  k = 4 if platform_name == "cpu" else 16
  dtype = COMPUTE_DTYPES[dtype_name]
  ka, kb = jax.random.split(jax.random.key(0))
  a = jax.random.normal(ka, (n, n), jnp.float32).astype(dtype)
  # Scaled so the chained products keep unit size (no overflow, no denormals).
  b = (jax.random.normal(kb, (n, n), jnp.float32) / math.sqrt(n)).astype(dtype)

  @jax.jit
  def chain(a, b):
    return jax.lax.fori_loop(0, k, lambda _, x: jnp.dot(x, b, preferred_element_type=dtype), a)

  chain(a, b).block_until_ready()
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    chain(a, b).block_until_ready()
    times.append(time.perf_counter() - t0)
  flops = 2.0 * n**3 * k
  return {
    "n": n,
    "chained": k,
    "dtype": dtype_name,
    "best_flops_per_s": flops / min(times),
    "median_flops_per_s": flops / _pct(times, 0.5),
  }


def time_steps(compiled, state, batch_at, steps: int, warmup: int, sync: bool = True) -> dict:
  """Step timings after `warmup` untimed steps: the loop's pipelined pattern, then (with
  `sync`) each step blocked with its host batch time apart; the last loss and the load."""
  step = 0
  for _ in range(warmup):
    state, metrics = compiled(state, batch_at(step))
    step += 1
  jax.block_until_ready(state)

  # --- loop-style: dispatch step n+1, then read step n's metrics (as loop.run does) ---------
  load_before = os.getloadavg()
  intervals, pending = [], None
  t_prev = time.perf_counter()
  for _ in range(steps + 1):
    state, metrics = compiled(state, batch_at(step))
    step += 1
    if pending is not None:
      float(pending["loss"]), float(pending["grad_norm"])
      now = time.perf_counter()
      intervals.append(now - t_prev)
      t_prev = now
    pending = metrics
  float(pending["loss"])
  loss = float(pending["loss"])
  loop_stats = summarize(intervals)

  # --- sync: each step blocked, its host batch time apart (the data-path overhead) ----------
  sync_stats = data_stats = None
  if sync:
    step_times, data_times = [], []
    for _ in range(steps):
      ts0 = time.perf_counter()
      batch = batch_at(step)
      jax.block_until_ready(batch)
      ts1 = time.perf_counter()
      state, metrics = compiled(state, batch)
      jax.block_until_ready((state, metrics))
      ts2 = time.perf_counter()
      step += 1
      step_times.append(ts2 - ts1)
      data_times.append(ts1 - ts0)
    sync_stats, data_stats = summarize(step_times), summarize(data_times)
  load_after = os.getloadavg()

  return {
    "loop_step_s": loop_stats,
    "sync_step_s": sync_stats,
    "data_s": data_stats,
    "final_loss": loss,
    "loadavg_during": [load_before[0], load_after[0]],
  }


def benchmark(config, steps: int = 20, warmup: int = 3, matmul_size: int = 0, **kw) -> dict:
  """Runs the measurements described in the module docstring; returns them as a dict."""
  max_memory_gib = kw.get("max_memory_gib", 0.0)
  sync = kw.get("sync", True)
  compile_only = kw.get("compile_only", False)
  malloc_tuned = run_setup.keep_freed_host_memory()  # before JAX starts threads
  t = config.train
  s = run_setup.build(config)  # the loop's run setup; nothing compiled yet
  batch_at = run_setup.batches(s).train
  mcfg = s.mcfg
  result: dict = {
    "config_name": config.name,
    "model": vars(mcfg).copy(),
    "train": {"batch_size": t.batch_size, "seq_len": t.seq_len},
    "per_layer_diagnostics": bool(config.diag.per_layer),
    "host_malloc_tuned": malloc_tuned,
    "machine": machine_info(),
    "jax": jax.__version__,
  }
  device = jax.devices()[0]
  result["device"] = {
    "platform": device.platform,
    "kind": device.device_kind,
    "count": jax.device_count(),
  }

  result["params"] = s.num_params
  t0 = time.perf_counter()
  lowered = s.lower_step()
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  result["compile"] = {"lower_s": t1 - t0, "compile_s": t2 - t1, "total_s": t2 - t0}
  aot = run_setup.aot_memory(compiled)
  result["memory"] = {"aot_bytes": aot}
  fl = flops_per_token(mcfg, t.seq_len)
  tokens_per_step = t.batch_size * t.seq_len
  result["flops"] = {**fl, "per_step": fl["train"] * tokens_per_step}
  limit = memory_limit_bytes(device, max_memory_gib)
  result["memory"]["limit_bytes"] = limit
  if compile_only or (aot and limit is not None and aot["total"] > limit):
    result["skipped"] = (
      "--compile_only"
      if compile_only
      else f"AOT estimate {aot['total'] / 2**30:.2f} GiB > the limit, {limit / 2**30:.2f} GiB "
      "(--max_memory_gib; 0: the device's memory, or 16 GiB on CPU)"
    )
    result["memory"]["peak_rss_bytes"] = peak_rss_bytes()
    return result

  state = s.init_state()
  jax.block_until_ready(state)
  rss_after_init = peak_rss_bytes()
  timed = time_steps(compiled, state, batch_at, steps, warmup, sync)
  loop_stats = timed["loop_step_s"]
  step_s = loop_stats["median"]
  flops_per_s = result["flops"]["per_step"] / step_s
  result["memory"]["peak_rss_bytes"] = peak_rss_bytes()
  result["memory"]["peak_rss_after_init_bytes"] = rss_after_init
  device_mem = device_memory_stats(device)
  result["memory"]["device_peak_bytes"] = device_mem.get("peak_bytes_in_use")
  result["memory"]["device_limit_bytes"] = device_mem.get("bytes_limit")
  mm = matmul_rate(mcfg.dtype, matmul_size)
  result.update(
    {
      **timed,
      "tokens_per_step": tokens_per_step,
      "tokens_per_second": tokens_per_step / step_s,
      "achieved_flops_per_s": flops_per_s,
      "matmul": mm,
      "mfu": flops_per_s / mm["best_flops_per_s"],
    }
  )
  return result


def _gib(n) -> str:
  return "-" if n is None else f"{n / 2**30:.3f} GiB"


def table(r: dict) -> str:
  """A readable summary of `benchmark`'s result."""
  m, c = r["model"], r["compile"]
  lines = [
    f"{r['config_name']}: {m['num_layers']} layers, d_model {m['d_model']}, "
    f"{m['num_heads']} heads, d_ff {m['d_ff']}, vocab {m['vocab_size']}, "
    f"norm {m['norm']}/{m['norm_position']}, {m['ffn_activation']}, {m['position']} positions, "
    f"tied {m['tie_embeddings']}, remat {m['remat']}, {m['dtype']}; {r['params']:,} params",
    f"batch {r['train']['batch_size']} x seq {r['train']['seq_len']}; "
    f"per-layer diagnostics {r['per_layer_diagnostics']}; "
    f"{r['device']['count']} x {r['device']['platform']}:{r['device']['kind']}; "
    f"nproc {r['machine']['nproc']} ({r['machine']['cpu_model']}); "
    f"load {r['machine']['loadavg'][0]:.2f} at start",
    f"{'compile (lower + XLA)':<28}{c['total_s']:9.2f} s  "
    f"(lower {c['lower_s']:.2f} s, compile {c['compile_s']:.2f} s)",
    f"{'train FLOPs per token':<28}{r['flops']['train'] / 1e6:9.3f} M  "
    f"(6 N_mm {r['flops']['train_matmul_part'] / 1e6:.3f} M + "
    f"attention {r['flops']['train_attention_part'] / 1e6:.3f} M)",
  ]
  aot = r["memory"]["aot_bytes"]
  if aot:
    lines.append(
      f"{'AOT memory estimate':<28}{_gib(aot['total']):>13}  (temp {_gib(aot['temp'])}, "
      f"arguments {_gib(aot['argument'])})"
    )
  if "skipped" in r:
    lines.append(f"not run: {r['skipped']}")
    return "\n".join(lines)
  ls, ss, ds = r["loop_step_s"], r["sync_step_s"], r["data_s"]
  lines += [
    f"{'step (loop-style)':<28}{ls['median'] * 1e3:9.2f} ms median  "
    f"(p10 {ls['p10'] * 1e3:.2f}, p90 {ls['p90'] * 1e3:.2f}, n {ls['n']})",
  ]
  if ss:
    lines += [
      f"{'step (blocked, no data)':<28}{ss['median'] * 1e3:9.2f} ms median  "
      f"(p10 {ss['p10'] * 1e3:.2f}, p90 {ss['p90'] * 1e3:.2f})",
      f"{'host batch + placement':<28}{ds['median'] * 1e3:9.3f} ms median",
    ]
  mm = r["matmul"]
  lines += [
    f"{'tokens/s':<28}{r['tokens_per_second']:12,.0f}",
    f"{'achieved FLOP/s':<28}{r['achieved_flops_per_s'] / 1e9:9.2f} G",
    f"{'matmul rate (measured)':<28}{mm['best_flops_per_s'] / 1e9:9.2f} G  "
    f"({mm['dtype']}, {mm['n']}^2 x {mm['chained']} chained)",
    f"{'MFU':<28}{100 * r['mfu']:9.2f} %",
    f"{'peak host RSS':<28}{_gib(r['memory']['peak_rss_bytes']):>13}",
    f"{'device peak':<28}{_gib(r['memory']['device_peak_bytes']):>13}",
    f"{'load average during':<28}{r['loadavg_during'][0]:9.2f} -> {r['loadavg_during'][1]:.2f}",
    f"{'final loss':<28}{r['final_loss']:9.4f}",
  ]
  return "\n".join(lines)
